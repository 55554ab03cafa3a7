"""`dmlbed jobs`: several jobs sharing one network, each on its own hosts, emulated, simulated or in closed form;
each job's slowdown against itself alone on the same hosts, and how its synchronizations overlapped the others'."""

from __future__ import annotations

import os

from emulation.backends import shared
from emulation.commands.base import RUN_GROUPS, Command, fmt
from emulation.core.job_specs import JOB_HELP
from emulation.run.options import EVENTS, FLOW_MODEL, command_option
from emulation.run.progress import log


class Jobs(Command):
    name, help = "jobs", "several jobs sharing one network: each job's slowdown against itself alone"
    description = ("Runs every --job at once on one network under one controller, each on its own hosts (listed, or "
                   "placed contiguous, interleaved or random:SEED) and from its own start; first each job alone on "
                   "the same hosts. Writes jobs.json (each job alone and together, its slowdown, the overlap of its "
                   "synchronizations with the other jobs' per iteration) and each job's own run folder. The run "
                   "options are every job's; a job's own keys override them.")
    examples = (
        ("two ring jobs on the two halves of Fat-Tree(4): each one's slowdown against itself alone",
         "--topo fattree:4 --algo ring --model mlp:2MB --job 'name=a hosts=h0..h7' --job 'name=b hosts=h8..h15'"),
        ("the same in the flow model",
         "--topo fattree:4 --algo ring --model mlp:2MB --job 'name=a hosts=h0..h7' --job 'name=b hosts=h8..h15' "
         "--mode simulate"),
    )
    groups = tuple(g for g in RUN_GROUPS if g != EVENTS) + (FLOW_MODEL,)  # jobs do not change links yet
    own = (command_option("job", JOB_HELP, kind=list, metavar="'KEY=VALUE ...'"),
           command_option("mode", "emulate: real ranks on the emulated network; simulate: the flow model; theory: "
                                  "the closed forms", "emulate", choices=shared.MODES))

    def prepare(self, args):
        values = self.values(args)
        return shared.prepare(self.config(args), values["job"], values["mode"])

    def needs_root(self, job):
        return job.emulated and not job.cfg.local

    def execute(self, job, args):
        return shared.execute(job, log=log)

    def show(self, report):
        print_jobs(report)

    def exit_code(self, report):
        if report["mode"] != shared.EMULATE:
            return 0
        return 0 if all((j.get("together") or {}).get("correct") and (j.get("alone") or {}).get("correct")
                        for j in report["jobs"]) else 1


def print_jobs(r: dict) -> None:
    """One line per job: alone, together, slowdown, overlap."""
    print(f"{len(r['jobs'])} jobs on {r['topology']} ({r['mode']})")
    for j in r["jobs"]:
        alone, together = j.get("alone") or {}, j.get("together") or {}
        a = alone.get("iteration_mean_s", alone.get("iteration_s"))
        t = together.get("iteration_mean_s", together.get("iteration_s"))
        line = (f"  {j['name']:<10} {j['algo']} {j['model']} on {','.join(j['hosts'])} start {j['start']}{(' held ' + j['hold']) if j.get('hold') else ''}: iteration "
                f"alone {fmt(a)} s, together {fmt(t)} s, slowdown {fmt(j.get('slowdown'))}")
        if j.get("overlap_median") is not None:
            line += f", overlap {j['overlap_median']:.0%} (median)"
        if together.get("formula"):
            line += f"  [{together['formula']}]"
        if (together.get("fidelity") or {}).get("verdict"):
            line += f"  fidelity {together['fidelity']['verdict']}"
        print(line)
        if j.get("note"):
            print(f"    note: {j['note']}")
    if r["config"].get("out"):
        print(f"results: {os.path.join(r['config']['out'], shared.REPORT)}")


COMMAND = Jobs()
