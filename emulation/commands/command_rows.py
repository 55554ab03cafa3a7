"""A compare config's `command:` row: one dmlbed command as a user runs it (`net bcube:3,2 --bw 100 --check`),
checked with the matrix before anything starts, its JSON result the row's figures."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any, Sequence, Tuple

from emulation.backends.matrix import ConfigError

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HARNESS: dict = {}  # the dmlbed harness's parser and its error, given by cli.py when it loads (use_harness)


def use_harness(build_parser, usage_error) -> None:
    """The harness's argument parser (every command's) and the error it raises for bad input (cli.py calls this:
    a command module does not import the harness)."""
    HARNESS.update(build_parser=build_parser, usage_error=usage_error)


@dataclass(frozen=True)
class CommandJob:
    """A command line parsed and prepared (validated once), ready to run."""

    command: Any
    job: Any
    args: Any
    argv: Tuple[str, ...] = ()
    refused: str = ""  # why the command refused its (well-formed) input: the row's outcome, nothing runs

    @property
    def emulated(self) -> bool:
        """Whether it brings up an emulated network (it needs root)."""
        return not self.refused and bool(self.command.needs_root(self.job))


class CommandRows:
    """The matrix back end of `command:` rows."""

    @staticmethod
    def prepare(text: str, out: str, where: str) -> CommandJob:
        """The command line checked as `dmlbed` checks it, writing into the row's folder: a malformed line (an
        unknown command or flag, a value the flag does not take) refuses the config; a well-formed one the command
        refuses (a size this machine cannot hold) is the row's outcome, reported beside its targets."""
        if not HARNESS:
            raise ConfigError(f"{where}: a 'command' row runs from the dmlbed command (dmlbed compare or reproduce)")
        build_parser, usage_error = HARNESS["build_parser"], HARNESS["usage_error"]
        argv = shlex.split(text)
        if argv and argv[0] == "dmlbed":
            argv = argv[1:]
        if not argv or argv[0] in ("compare", "reproduce"):
            raise ConfigError(f"{where}: command '{text}' must be one dmlbed command other than compare and "
                              f"reproduce (a matrix does not nest)")
        try:
            full = argv + output_flags(argv, out)
            args = build_parser().parse_args(full)
        except usage_error as exc:
            raise ConfigError(f"{where}: command '{text}': {exc}") from None
        except SystemExit:  # --help and the like
            raise ConfigError(f"{where}: command '{text}' does not run anything") from None
        try:
            return CommandJob(args.command, args.command.prepare(args), args, tuple(full))
        except ValueError as exc:
            return CommandJob(args.command, None, args, tuple(full), refused=str(exc))

    @staticmethod
    def execute(job: CommandJob, log=lambda m: None, progress: bool = True) -> dict:
        """Run the command; its JSON result. One that brings up a network runs here (under the matrix's network
        lock); any other runs in a process of its own, timed, with its own peak memory (wall_s, peak_rss_mib)."""
        if job.refused:
            log(f"refused: {job.refused}")
            return {"error": f"refused: {job.refused}"}
        if job.emulated:
            result = job.command.execute(job.job, job.args)
            return {**job.command.as_json(result), "exit_code": job.command.exit_code(result)}
        return in_child(job.argv)


# The command runs under a small interpreter that reaps it with wait4: a child's peak resident memory (ru_maxrss)
# starts from its parent's at the fork (Linux keeps it across exec), and a matrix's own process holds hundreds of MiB.
REAPER = ("import os, subprocess, sys\n"
          "child = subprocess.Popen(sys.argv[2:])\n"
          "_, status, usage = os.wait4(child.pid, 0)\n"
          "open(sys.argv[1], 'w').write(str(usage.ru_maxrss))\n"
          "sys.exit(os.waitstatus_to_exitcode(status))\n")


def in_child(argv: Sequence[str]) -> dict:
    """`dmlbed ARGV --json` in a process of its own: its JSON result, wall seconds and its own peak resident memory
    (reaped by a small interpreter, REAPER); a failure's last line of stderr as the row's error."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err, \
            tempfile.NamedTemporaryFile("r") as peak:
        proc = subprocess.Popen([sys.executable, "-S", "-c", REAPER, peak.name, sys.executable, "-m",
                                 "emulation.commands.cli", *argv, "--json"], stdout=out, stderr=err, text=True,
                                cwd=PROJECT, start_new_session=True)
        try:
            proc.wait()
        except BaseException:  # Ctrl-C: the command and its reaper, by their process group
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        out.seek(0)
        err.seek(0)
        text, errors, kib = out.read(), err.read().strip().splitlines(), peak.read().strip()
    figures = {"wall_s": time.monotonic() - started, "peak_rss_mib": int(kib) / 1024 if kib else None,
               "exit_code": proc.returncode}
    try:
        result = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        result = {}
    if proc.returncode != 0:
        result["error"] = errors[-1] if errors else f"exit {proc.returncode}"
    return {**result, **figures}


def output_flags(argv, out: str):
    """--out (the row's folder) and --force where the command writes results and the line does not say where."""
    args = HARNESS["build_parser"]().parse_args(argv)
    if not hasattr(args, "out") or "--out" in argv:
        return []
    return ["--out", out] + (["--force"] if hasattr(args, "force") else [])


COMMAND_ROWS = CommandRows()
