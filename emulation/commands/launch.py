"""`dmlbed launch ... -- COMMAND ARGS`: a user's own training command on every emulated host, one process per host,
with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, ...), so an unmodified DDP script with the gloo backend
trains across the emulated network (the launch back end, emulation/backends/launcher.py, does the work)."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import replace
from typing import Tuple

from emulation.backends.launcher import GROUPS, MAX_TIME_LIMIT_S, execute, parse_env, prepare
from emulation.core.units import SECONDS
from emulation.commands.base import Command
from emulation.results import fidelity
from emulation.run.options import COMMAND_OWN, Option, OptionError, command_option, described
from emulation.run.progress import log
from emulation.results.summary import LaunchSummary
from workloads.algorithms import ALGORITHMS, names_with

CODEC_FIELDS = ("codec",) + tuple(name for name, opt, _ in described() if opt.codec_option)
IDLE_WARNING_S = 60.0


def codec_options() -> Tuple[Option, ...]:
    """--codec and the codecs' own options, as run takes them, for the hook dmlbed.ddp.register installs."""
    return tuple(dataclasses.replace(opt, name=name, default=default, group=COMMAND_OWN, yaml=False,
                                     help=opt.help + (" (with --algo: the codec runs in its DDP hook)"
                                                      if name == "codec" else ""))
                 for name, opt, default in described() if name in CODEC_FIELDS)


class Launch(Command):
    name, help = "launch", "run your own training command (e.g. a DDP script) on every emulated host"
    description = ("Starts COMMAND once per emulated host with torchrun's variables (RANK, WORLD_SIZE, "
                   "MASTER_ADDR, ...), so an unmodified DDP script with the gloo backend trains across the emulated "
                   "network; each rank's output, exit code, bytes per level and a fidelity verdict are recorded.")
    examples = (
        ("PyTorch's own FSDP script on every host of a star of 4 at 100 Mbit/s",
         "--topo star:4 --bw 100 -- python examples/fsdp_train.py"),
        ("any command: each rank gets RANK, WORLD_SIZE and MASTER_ADDR as torchrun gives them",
         "--topo bcube:2,2 --bw 50 --time-limit 2min -- python -c 'import os; print(os.environ[\"RANK\"])'"),
    )
    groups = GROUPS
    own = (command_option("algo", "the algorithm whose DDP hook dmlbed.ddp.register(model) installs in your script "
                          "(default: none, the script's own synchronization)", choices=tuple(ALGORITHMS)),
           command_option("cwd", "working directory of the command (default: this one)"),
           command_option("env", "set an environment variable for every rank (repeatable)", kind=list,
                          metavar="KEY=VALUE"),
           command_option("time_limit", "seconds the command may run (0: no limit)", 0.0, kind=float, low=0,
                          high=MAX_TIME_LIMIT_S, quantity=SECONDS),
           command_option("idle_warning", "say so when every rank has been idle (no CPU, no bytes) this long "
                          "(0: never)", IDLE_WARNING_S, kind=float, low=0, high=MAX_TIME_LIMIT_S, quantity=SECONDS),
           *codec_options(),
           command_option("argv", "-- then the command and its arguments", positional=True, nargs="...",
                          metavar="COMMAND"))

    def prepare(self, args):
        values = self.values(args)
        codec = {name: values[name] for name in CODEC_FIELDS if values.get(name) is not None}
        if codec.get("codec", "none") != "none" and values["algo"] is None:
            raise OptionError(f"--codec {codec['codec']} runs in dmlbed's DDP hook: give --algo too (valid: "
                              f"{', '.join(names_with(lambda a: a.overlaps))})")
        cfg = self.config(args, algo=values["algo"], **codec)
        return replace(prepare(cfg, values["argv"], values["cwd"], parse_env(values["env"]), values["time_limit"]),
                       idle_warning=values["idle_warning"])

    def needs_root(self, job):
        return not job.cfg.local

    def execute(self, job, args):
        return execute(job, log=log)

    def show(self, summary):
        print_launch(summary)

    def exit_code(self, summary):
        return 0 if summary.completed else 1

    def failure(self, summary):
        return summary.error


def print_launch(s: LaunchSummary) -> None:
    """A launch: the command, each rank's exit code, wall time, bytes per level, fidelity."""
    print(f"`{s.command}` on {s.topology} ({s.datapath or '?'}), {s.ranks} ranks, {s.bw_mbps} Mbit/s; "
          f"synchronization: {s.synchronization}")
    print("  exit codes    " + " ".join(f"{r}:{'-' if c is None else c}" for r, c in s.exit_codes.items()))
    print(f"  wall time     {s.wall_s:.1f} s")
    print("  bytes sent    " + (", ".join(f"{k}: {v / 2**20:.1f} MiB" for k, v in s.bytes_by_level.items()) or
                                "- (loopback)"))
    if s.buckets:
        b = s.buckets
        print(f"  DDP buckets   {b['per_iteration']} per iteration, {b['records']} synchronized, median "
              f"{b['sync_s_median']:.3f} s each")
    if s.checks:
        print(f"  exact sums    {s.checks}")
    print(f"  {fidelity.one_line(s.fidelity)}")
    if s.error:
        print(f"  error         {s.error}")
    print(f"results: {os.path.join(s.config['out'], 'summary.json')}, workers/rank-N.stdout, .stderr, trace.json")


COMMAND = Launch()
