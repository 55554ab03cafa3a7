"""The `dmlbed` subcommands as small plug-ins of the harness in cli.py: each declares its arguments, prepares a
checked job from them (bad input raises a ValueError: one line, exit 2, nothing started), executes the job, and
says how its result is shown and what exit code it earns. Tables live in render.py; the work in the command
modules (experiment, simulate, compare, bench, calibrate, netcheck, theory)."""

from __future__ import annotations

import json
import os
from typing import List

from emulation.orchestration import (bench, calibrate, compare, experiment, launch, netcheck, render, reproduce_all,
                                     schemas, simulate, theory)
from emulation.orchestration.options import (BENCH, CALIBRATE, LAUNCH, NET, RUN, SIMULATE, THEORY, OptionError,
                                             add_arguments, check_values, from_args)
from workloads.algorithms import ALGORITHMS
from emulation.spec.topology import parse

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(PROJECT, "configs")


class Command:
    """One subcommand. prepare() validates everything once and returns the checked job that execute() runs."""

    name = ""
    help = ""
    json_flag = True  # the command takes --json (print its result as JSON)

    def arguments(self, parser) -> None:
        """Add the command's own arguments."""

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

    def as_json(self, result):
        """What --json prints."""
        return result

    def exit_code(self, result) -> int:
        """0 when the result is good."""
        return 0


class Topo(Command):
    name, help = "topo", "print a topology"

    def arguments(self, parser):
        parser.add_argument("spec", help="bcube:n,k | fattree:k | star:N | tree:F0,F1,...")

    def prepare(self, args):
        return parse(args.spec)

    def execute(self, topo, args):
        data = topo.to_dict()
        data["counts"] = {"hosts": len(topo.hosts), "switches": len(topo.switches), "links": len(topo.links),
                          "switch_ports": topo.switch_ports(),
                          "fat_tree_switches_same_hosts": topo.fat_tree_switches_for_same_hosts()}
        return topo, data

    def show(self, result):
        render.print_topo(result[0])

    def as_json(self, result):
        return result[1]


class Rules(Command):
    name, help = "rules", "print the controller's proactive rules per switch and level"

    def arguments(self, parser):
        parser.add_argument("spec")

    def prepare(self, args):
        return parse(args.spec)

    def execute(self, topo, args):
        from controllers.rules import rules_view
        return rules_view(topo)

    def show(self, view):
        render.print_rules(view)


class Net(Command):
    name, help = "net", "bring a network up, check it, tear it down"

    def arguments(self, parser):
        parser.add_argument("spec")
        add_arguments(parser, NET)
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--check", action="store_true", help="reachability + iperf3 fidelity test")
        mode.add_argument("--cli", action="store_true", help="open the Mininet CLI")
        parser.add_argument("--all-pairs", action="store_true", help="BCube: also test relayed (multi-hop) pairs")
        parser.add_argument("--duration", type=float, default=5.0, help="iperf3 seconds per flow (default 5)")

    def prepare(self, args):
        return netcheck.prepare(from_args(args, NET, topology=args.spec), args.duration, args.all_pairs, args.cli)

    def needs_root(self, job):
        return True

    def execute(self, job, args):
        return netcheck.execute(job, render.log)

    def show(self, report):
        if report is not None:
            render.print_net_report(report)

    def exit_code(self, report):
        return 0 if netcheck.passed(report) else 1


class Run(Command):
    name, help = "run", "train with real workers on an emulated network"

    def arguments(self, parser):
        add_arguments(parser, RUN)

    def prepare(self, args):
        return experiment.prepare(from_args(args, RUN))

    def needs_root(self, job):
        return not job.cfg.local

    def execute(self, job, args):
        return experiment.execute(job, log=render.log, progress=not args.json)

    def show(self, summary):
        render.print_summary(summary)

    def exit_code(self, summary):
        return 0 if summary["correct"] else 1


class Launch(Command):
    name, help = "launch", "run your own training command (e.g. a DDP script) on every emulated host"

    def arguments(self, parser):
        add_arguments(parser, LAUNCH)
        parser.add_argument("--algo", choices=tuple(ALGORITHMS), default=None,
                            help="the algorithm whose DDP hook dmlbed.ddp.register(model) installs in your script "
                                 "(default: none, the script's own synchronization)")
        parser.add_argument("--cwd", help="working directory of the command (default: this one)")
        parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                            help="set an environment variable for every rank (repeatable)")
        parser.add_argument("--time-limit", type=float, default=0.0, help="seconds the command may run (0: no limit)")
        parser.add_argument("argv", nargs="...", metavar="COMMAND", help="-- then the command and its arguments")

    def prepare(self, args):
        cfg = from_args(args, LAUNCH, algo=args.algo)
        return launch.prepare(cfg, args.argv, args.cwd, launch.parse_env(args.env), args.time_limit)

    def needs_root(self, job):
        return not job.cfg.local

    def execute(self, job, args):
        return launch.execute(job, log=render.log)

    def show(self, summary):
        render.print_launch(summary)

    def exit_code(self, summary):
        return 0 if summary["completed"] else 1


class Theory(Command):
    name, help = "theory", "the papers' theoretical GST (closed form, any size)"

    def arguments(self, parser):
        add_arguments(parser, THEORY)

    def prepare(self, args):
        return theory.prepare(from_args(args, THEORY))

    def execute(self, job, args):
        return theory.report(job)

    def show(self, report):
        render.print_theory(report)


class Simulate(Command):
    name, help = "simulate", "the same plan in a flow-level model (no packets; any size)"

    def arguments(self, parser):
        add_arguments(parser, SIMULATE)

    def prepare(self, args):
        return simulate.prepare(from_args(args, SIMULATE))

    def execute(self, job, args):
        return simulate.execute(job, log=render.log)

    def show(self, summary):
        render.print_simulation(summary)


def matrix_arguments(parser, what: str) -> None:
    """The flags of a command that runs a config's matrix (compare, reproduce)."""
    parser.add_argument("--out", help="output folder (default: a new results/compare/NAME/DATE-TIME)")
    parser.add_argument("--local", action="store_true", help="run the workers on 127.0.0.1 without emulation")
    parser.add_argument("--force", action="store_true", help=f"replace an earlier {what} in --out")
    parser.add_argument("--wait", action="store_true",
                        help="wait for another run's emulated network instead of refusing")


def matrix_passed(result: dict) -> int:
    """0 unless an emulated row was wrong (a simulated row's `correct` is None)."""
    return 0 if all(r["correct"] is not False for r in result["rows"]) else 1


class Compare(Command):
    name, help = "compare", "run a matrix of configurations from a YAML file"

    def arguments(self, parser):
        parser.add_argument("config", help="YAML file: name, defaults, runs, sweep (see configs/)")
        matrix_arguments(parser, "comparison")

    def prepare(self, args):
        return compare.prepare(args.config, args.out, args.local, args.force, args.wait)

    def needs_root(self, job):
        return job.emulated

    def execute(self, job, args):
        return compare.execute(job, log=render.log, progress=not args.json)

    def show(self, result):
        render.print_comparison(result)

    def exit_code(self, result):
        return matrix_passed(result)


class Reproduce(Command):
    name, help = "reproduce", "run a paper's config and print the paper's values beside ours"

    def arguments(self, parser):
        parser.add_argument("name", nargs="?", help=f"{', '.join(compare.reproducible(CONFIGS))} (see --list)")
        parser.add_argument("--list", action="store_true", help="list the paper configs")
        parser.add_argument("--all", action="store_true", help="run every paper config, one after another, and "
                            "write one table of every claim (papers.md, papers.csv)")
        matrix_arguments(parser, "reproduction")

    def prepare(self, args):
        configs = compare.reproducible(CONFIGS)
        if args.list:
            return configs
        if args.all:
            if args.name:
                raise OptionError("--all runs every paper config: give either --all or a name, not both")
            return reproduce_all.prepare_all(configs, args.out, args.local, args.force, args.wait)
        if not args.name:
            raise OptionError(f"a name is required: {', '.join(configs)} (or --all, or --list)")
        if args.name not in configs:
            raise OptionError(f"no paper config named '{args.name}': valid are {', '.join(configs)}")
        return compare.prepare(configs[args.name], args.out, args.local, args.force, args.wait,
                               kind="reproduce")

    def needs_root(self, job):
        return isinstance(job, (compare.CompareJob, reproduce_all.AllJob)) and job.emulated

    def execute(self, job, args):
        if isinstance(job, dict):
            return {"list": job}
        if isinstance(job, reproduce_all.AllJob):
            return reproduce_all.execute_all(job, log=render.log, progress=not args.json)
        return dict(compare.execute(job, log=render.log, progress=not args.json), reproduced=args.name)

    def show(self, result):
        if "list" in result:
            width = max(map(len, result["list"]), default=0) + 2
            for name, path in result["list"].items():
                print(f"{name:<{width}}{os.path.relpath(path)}")
            return
        if "claims" in result:
            render.print_claim_counts(result["claims"])
            print(f"\nevery claim: {result['out']}/papers.md (the README's table) and papers.csv; each config's "
                  f"runs in its own folder there")
            return
        render.print_paper(result)
        print(f"\nevery run: {result['out']}/comparison.csv (paper.csv holds the table above)")

    def as_json(self, result):
        if "list" in result:
            return result["list"]
        if "claims" in result:
            return {"out": result["out"], "claims": result["claims"], "configs": result["configs"]}
        return {"name": result["reproduced"], "out": result["out"], "paper": result["paper"],
                "source": result.get("source")}

    def exit_code(self, result):
        return 0 if "list" in result else matrix_passed(result)


class Clean(Command):
    name, help, json_flag = "clean", "remove what a crashed run left behind", False

    def needs_root(self, job):
        return True

    def execute(self, job, args):
        from emulation.net.runstate import clean
        return clean()

    def show(self, actions: List[str]):
        for a in actions:
            print(a)
        print(f"clean: {len(actions)} action(s)" if actions else "clean: nothing left behind")


def repetition_arguments(parser, reps: int, out: str) -> None:
    """--warmup, --reps and --out of a command that runs bench ranks."""
    parser.add_argument("--warmup", type=int, default=2, help="untimed repetitions per size (default 2)")
    parser.add_argument("--reps", type=int, default=reps, help=f"timed repetitions per size (default {reps})")
    parser.add_argument("--out", help=f"output folder (default {out})")


class Bench(Command):
    name, help = "bench", "collective benchmark: message-size sweep, algbw/busbw (like nccl-tests)"

    def arguments(self, parser):
        add_arguments(parser, BENCH, skip=("out",))
        parser.add_argument("--algo", required=True, help="comma-separated plan algorithms, e.g. ring,ps")
        parser.add_argument("--sizes", default="1M:64M:x4",
                            help="MIN:MAX:xFACTOR or a list (bytes, K/M/G), default 1M:64M:x4")
        repetition_arguments(parser, 5, "results/bench/DATE-TIME")

    def prepare(self, args):
        base = from_args(args, BENCH, algo="ring", out=args.out)
        check_values(base, only=BENCH)
        algos = [a.strip() for a in args.algo.split(",") if a.strip()]
        return bench.prepare(base, algos, bench.parse_sizes(args.sizes), args.warmup, args.reps)

    def needs_root(self, job):
        return not job.base.local

    def execute(self, job, args):
        return bench.bench(job, log=render.log)

    def show(self, report):
        render.print_bench(report)

    def exit_code(self, report):
        return 0 if all(r["wrong"] == 0 for r in report["rows"]) else 1


class Calibrate(Command):
    name, help = "calibrate", "fit per-level latency and bandwidth (ping-pong and exchange probes)"

    def arguments(self, parser):
        add_arguments(parser, CALIBRATE, skip=("out",))
        repetition_arguments(parser, 7, "results/calibrate/DATE-TIME")

    def prepare(self, args):
        base = from_args(args, CALIBRATE, out=args.out)
        check_values(base, only=CALIBRATE)
        return calibrate.prepare(base, args.warmup, args.reps)

    def needs_root(self, job):
        return not job.cfg.local

    def execute(self, job, args):
        return calibrate.calibrate(job, log=render.log)

    def show(self, report):
        render.print_calibration(report)

    def exit_code(self, report):
        return 0 if report["meta"]["wrong"] == 0 else 1


class Timeline(Command):
    name, help, json_flag = "timeline", "draw a run's trace.json (compute and sends per rank) as a PNG", False

    def arguments(self, parser):
        parser.add_argument("run_dir", help="a run's --out folder")
        parser.add_argument("--out", help="PNG path (default RUN_DIR/timeline.png)")
        parser.add_argument("--iterations", type=int, help="only the first N iterations")

    def prepare(self, args):
        from workloads.runfolder import RunFolder
        folder = RunFolder(args.run_dir)
        path = folder.file(RunFolder.TRACE)
        if not os.path.isfile(path):
            raise OptionError(f"{args.run_dir} has no trace.json: give the --out folder of a `dmlbed run` "
                              f"(every run writes one)")
        if args.iterations is not None and args.iterations < 1:
            raise OptionError(f"--iterations {args.iterations} is out of range: give 1 or more")
        with open(path) as f:
            try:
                trace = json.load(f)
            except json.JSONDecodeError:
                raise OptionError(f"{path} is not valid JSON: was the run interrupted while writing it?") from None
        return trace, args.out or folder.file(RunFolder.TIMELINE), args.iterations

    def execute(self, job, args):
        from emulation.orchestration.timeline import plot_timeline
        return plot_timeline(*job)

    def show(self, path):
        print(path)


class Schema(Command):
    name, help, json_flag = "schema", "print the JSON Schema of a compare config or of summary.json", False

    def arguments(self, parser):
        parser.add_argument("which", help=f"{' | '.join(schemas.SCHEMAS)}")

    def prepare(self, args):
        return schemas.schema(args.which)

    def execute(self, job, args):
        return job

    def show(self, result):
        print(json.dumps(result, indent=1, allow_nan=False))


COMMANDS = (Topo(), Rules(), Net(), Run(), Launch(), Theory(), Simulate(), Compare(), Reproduce(), Clean(), Bench(),
            Calibrate(), Timeline(), Schema())


def names() -> str:
    """The subcommands, comma-separated."""
    return ", ".join(c.name for c in COMMANDS)
