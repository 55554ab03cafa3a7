"""`dmlbed timeline RUN_DIR`: a run's trace.json drawn as a PNG (compute and sends per rank, coloured by level)."""

from __future__ import annotations

import os

from emulation.commands.base import Command
from emulation.results.files import read_json
from emulation.run.options import OptionError, command_option
from workloads.runfolder import RunFolder


class Timeline(Command):
    name, help, json_flag = "timeline", "draw a run's trace.json (compute and sends per rank) as a PNG", False
    description = ("Draws, per rank, each iteration's compute and every send of the synchronization, the sends on "
                   "each link level in a lane of their own. The same trace.json opens in chrome://tracing or "
                   "Perfetto; the run's report.html has the first iterations after the warm-up.")
    examples = (
        ("draw a run's (or a simulation's) compute and sends per rank as a PNG in its folder",
         "results/ring-star8"),
        ("only the first 2 iterations, into a file of your choice",
         "results/ring-star8 --iterations 2 --out ring-timeline.png"),
    )
    own = (command_option("run_dir", "a run's --out folder", positional=True),
           command_option("out", "PNG path (default RUN_DIR/timeline.png)"),
           command_option("iterations", "only the first N iterations", kind=int, low=1, high=1_000_000))

    def prepare(self, args):
        values = self.values(args)
        folder = RunFolder(values["run_dir"])
        path = folder.file(RunFolder.TRACE)
        if not os.path.isfile(path):
            raise OptionError(f"{values['run_dir']} has no trace.json: give the --out folder of a `dmlbed run` "
                              f"(every run writes one)")
        trace = read_json(path)
        if trace is None:
            raise OptionError(f"{path} is not valid JSON: was the run interrupted while writing it?")
        return trace, values["out"] or folder.file(RunFolder.TIMELINE), values["iterations"]

    def execute(self, job, args):
        from emulation.results.trace import plot_timeline
        return plot_timeline(*job)

    def show(self, path):
        print(path)


COMMAND = Timeline()
