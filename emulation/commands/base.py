"""What every `dmlbed` subcommand is to the harness (cli.py): a plug-in that declares its options (named groups of
the option table and options of its own), prepares a checked job from them (bad input raises a ValueError: one
line, exit 2, nothing started), executes it, shows the result as a table (or as JSON) and says what exit code it
earns. A command module holds its plug-in, its work and its table."""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

from emulation.run.options import (BACKGROUND, EVENTS, BATCH, CONTROLLER, DILATION, ITERATIONS, LINKS, NETWORK, OUTPUT, PLAN_INPUTS, RANKS,
                                   REPLACE, SEED, SYNCHRONIZATION, TOPOLOGY, TRAINING, WAIT, Option, RunConfig,
                                   command_option, from_args)
from emulation.run.flags import add_arguments
from emulation.run.validation import check_command_options
from emulation.core.topology import TOPOLOGY_HELP

# The groups of run options each kind of command takes.
RUN_GROUPS = (TOPOLOGY, LINKS, BACKGROUND, EVENTS, NETWORK, CONTROLLER, RANKS, DILATION, SYNCHRONIZATION, PLAN_INPUTS, BATCH, ITERATIONS,
              SEED, TRAINING, OUTPUT, REPLACE, WAIT)
JSON = Option(help="print the result as JSON", name="json", default=False, kind=bool, group=OUTPUT, yaml=False)
NO_REPORT = Option(help="write no report.html and figures/ (drawing them takes a few seconds)", name="no_report",
                   default=False, kind=bool, group=OUTPUT, yaml=False)
SPEC = command_option("spec", TOPOLOGY_HELP, positional=True)


WARMUP = command_option("warmup", "untimed repetitions per size", 2, kind=int, low=0, high=100)


def reps_option(default: int) -> Option:
    """--reps of a command that runs bench ranks (bench, calibrate)."""
    return command_option("reps", "timed repetitions per size", default, kind=int, low=1, high=1000)


def matrix_flags(what: str) -> Tuple[Option, ...]:
    """The options of a command that runs a config's matrix (compare, reproduce)."""
    return (command_option("out", "output folder (default: a new results/COMMAND/NAME/DATE-TIME)"),
            command_option("local", "run the workers on 127.0.0.1 without emulation", False, kind=bool),
            command_option("force", f"replace an earlier {what} in --out", False, kind=bool),
            command_option("wait", "wait for another run's emulated network instead of refusing", False, kind=bool),
            command_option("scheduler", "run the rows as Dask tasks: local:N (N worker processes here) or "
                           "tcp://HOST:PORT (a running dask scheduler; default: $DMLBED_SCHEDULER, else in turn "
                           "here); one emulated network per machine at a time"),
            command_option("resume", "run only the rows missing or failed in --out (an earlier run of this "
                           "config, interrupted or with failed rows)", False, kind=bool))


def matrix_passed(result: dict) -> int:
    """0 unless a row that checks correctness was wrong (a simulated or closed-form row's `correct` is None), a row
    failed to run (on a scheduler's worker), or a target of the config was missed or has no value."""
    wrong = any(r["correct"] is False or r.get("failed") for r in result["rows"])
    missed = any(t["met"] is not True for t in result.get("targets") or [])
    return 1 if wrong or missed else 0


def failed_rows(result: dict) -> Optional[str]:
    """The line that says which rows did not run (on a scheduler's workers), or None."""
    failed = [r for r in result["rows"] if r.get("failed")]
    if not failed:
        return None
    return (f"{len(failed)} of {len(result['rows'])} rows did not run (first: {failed[0]['label']}: "
            f"{failed[0]['error']}); `--resume` with the same --out runs them again")


class Command:
    """One subcommand. prepare() validates everything once and returns the checked job that execute() runs."""

    name = ""
    help = ""
    description = ""                       # a paragraph for `dmlbed NAME --help` and the reference
    examples: Tuple[Tuple[str, str], ...] = ()  # (what it does, the arguments after `dmlbed NAME`), two or more
    json_flag = True                       # the command takes --json (print its result as JSON)
    reports = False                        # it writes report.html after it ran (--no-report: it does not)
    groups: Tuple[str, ...] = ()           # the option table's groups it takes
    own: Tuple[Option, ...] = ()           # its own options
    registry: Sequence["Command"] = ()     # every command (set by the registry, for commands about commands)

    def options(self) -> Tuple[Option, ...]:
        """Its own options, --json included."""
        return self.own + ((JSON,) if self.json_flag else ()) + ((NO_REPORT,) if self.reports else ())

    def arguments(self, parser) -> None:
        """Add the command's arguments: its own (--json included) and its groups' run options, in --help's sections."""
        add_arguments(parser, self.groups, self.options(), own_title=f"{self.name} options", command=self.name)

    def config(self, args, **overrides) -> RunConfig:
        """The RunConfig of its groups' values."""
        return from_args(args, self.groups, **overrides)

    def values(self, args) -> Dict[str, Any]:
        """Its own options' values, converted and checked."""
        return check_command_options(vars(args), self.own)

    def prepare(self, args):
        """The checked job (raises ValueError naming the bad input)."""
        return args

    def needs_root(self, job) -> bool:
        """Whether the job brings up an emulated network (namespaces, Open vSwitch)."""
        return False

    def execute(self, job, args):
        """Run the checked job; its result."""
        raise NotImplementedError

    def show(self, result) -> None:
        """Print the result for a person."""

    def report(self, result) -> Optional[str]:
        """Write the result's report.html (commands with `reports`); its path (None: this result has none)."""
        raise NotImplementedError

    def as_json(self, result):
        """What --json prints."""
        return result.to_dict() if hasattr(result, "to_dict") else result

    def exit_code(self, result) -> int:
        """0 when the result is good."""
        return 0

    def failure(self, result) -> Optional[str]:
        """The one line that says why the command failed after it ran (None: it did not), printed last on stderr."""
        return None


def fmt(value, spec: str = ".3f") -> str:
    """A number for a table ('-' when there is none)."""
    return "-" if value is None else format(value, spec)


def print_link_events(s) -> None:
    """One line per link event of a run, simulation or closed form: when it held, the GST before and after it."""
    for e in s.get("link_events") or ():
        held = f"from iteration {e['took_effect_iteration']}" if e.get("took_effect_iteration") is not None else \
            "never held for a whole synchronization"
        applied = f", applied at {e['applied_s']:.3f} s" if e.get("applied_s") is not None else ""
        print(f"  link event    {e['event']}: {held}{applied}; GST {fmt(e.get('gst_before_median_s'))} -> "
              f"{fmt(e.get('gst_after_median_s'))} s (theory after {fmt(e.get('gst_after_theory_s'))} s)")
        if e.get("affected_iteration") is not None:  # emulated
            plane = e.get("data_plane") or {}
            outage, arrival = plane.get("outage_s"), plane.get("arrival_gap_s")
            print(f"                iteration {e['affected_iteration']} hit: {fmt(e.get('affected_over_before_s'), '+.3f')} s "
                  f"over the median before, recovered in {fmt(e.get('recovery_s'))} s; "
                  f"{e.get('connections_across_before', 0)} of the job's connections crossed the link"
                  + (f"; data-plane outage {outage * 1000:.0f} ms (wall, send times of the datagrams lost"
                     + (f"; arrival gap {arrival * 1000:.0f} ms" if arrival is not None else "") + ")"
                     if outage is not None else ""))


def run_report(summary) -> str:
    """report.html of a run or a simulation, or of a parallel job (its path)."""
    from emulation.results.parallel_summary import ParallelSummary
    if isinstance(summary, ParallelSummary):
        from emulation.results.parallel_report import parallel_report
        return parallel_report(summary.out, summary.to_dict())
    from emulation.results.report import run_report as report
    return report(summary["config"]["out"])


def show_run(summary, show) -> None:
    """A run's or a simulation's summary printed by `show`, or a parallel job's."""
    from emulation.results.parallel_summary import ParallelSummary
    if isinstance(summary, ParallelSummary):
        from emulation.backends.parallel_job import print_parallel
        print_parallel(summary)
        return
    show(summary)
