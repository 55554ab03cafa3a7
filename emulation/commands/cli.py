"""The `dmlbed` command: one harness for every subcommand (registry.py) -- parse, prepare the checked job (bad input:
one line, exit 2, nothing started), check root where the job needs it, execute, print (a table or --json) and map
the outcome to the exit code: 0 good, 1 failed after it started, 2 bad input, 75 the network busy with another run
(EX_TEMPFAIL: try again, or pass --wait), 128+n a signal."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import List, Optional

from emulation.net.lock import NetworkBusy
from emulation.commands import command_rows
from emulation.commands.registry import COMMANDS, names
from emulation.run import signals

EXIT_USAGE = 2
EXIT_BUSY = 75  # sysexits' EX_TEMPFAIL: a retrying script tells a busy network from bad input


class UsageError(Exception):
    """Bad input: reported on one line with exit code 2 before anything starts."""


class OneLineParser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line and exit with code 2."""

    def error(self, message):
        if message.startswith("argument name: invalid choice:"):  # argparse's words for an unknown subcommand
            given = message.split("'")[1] if "'" in message else message
            raise UsageError(f"unknown command '{given}': valid are {names()} (see dmlbed --help)")
        raise UsageError(message)


class VersionAction(argparse.Action):
    """--version: the provenance every result records (read only when asked for)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        from emulation.results.provenance import version_text
        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = OneLineParser(prog="dmlbed", description="Network emulation testbed for distributed ML.",
                           epilog=MAIN_EPILOG, formatter_class=ExamplesFormatter)
    parser.add_argument("--version", action=VersionAction, help="print dmlbed's version and what it runs on, then exit")
    sub = parser.add_subparsers(dest="name", parser_class=OneLineParser)
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.description or command.help,
                           epilog=examples_text(command), formatter_class=ExamplesFormatter)
        command.arguments(p)
        p.set_defaults(command=command, json=False)
    return parser


command_rows.use_harness(build_parser, UsageError)  # a config's `command:` rows are parsed as dmlbed parses
MAIN_EPILOG = ("examples:\n  dmlbed topo bcube:4,2\n  dmlbed run --topo bcube:4,2 --algo bml --bw 100\n"
               "  dmlbed NAME --help   (a command's options in sections, their defaults, and examples)\n\n"
               "The documentation is in docs/ (start at docs/index.md, or serve it with `mkdocs serve`); the labs, "
               "with what students hand in and how it is graded, are in labs/.")


def examples_text(command) -> str:
    """The examples under a command's --help."""
    lines = ["examples:"]
    for what, arguments in command.examples:
        lines += [f"  dmlbed {command.name} {arguments}".rstrip(), f"      {what}"]
    return "\n".join(lines) if command.examples else ""


class ExamplesFormatter(argparse.HelpFormatter):
    """argparse's help, with the examples (and what follows them) kept line by line instead of refilled."""

    def _fill_text(self, text, width, indent):
        if text.startswith("examples:"):
            return "".join(indent + line + "\n" for line in text.splitlines()).rstrip("\n")
        return super()._fill_text(text, width, indent)


def require_root(what: str) -> None:
    """Emulation needs root for namespaces, veths and OVS."""
    if os.geteuid() != 0:
        raise UsageError(f"{what} needs root (network namespaces and Open vSwitch): run it with sudo")


def checked(argv: Optional[List[str]]):
    """The command, its checked job and the parsed arguments; UsageError (one line) for bad input. Starts nothing."""
    args = build_parser().parse_args(argv)
    command = getattr(args, "command", None)
    if command is None:
        raise UsageError(f"a command is required: {names()} (see dmlbed --help)")
    try:
        return command, command.prepare(args), args
    except ValueError as exc:  # every validation error of every command: OptionError, TopologyError, ...
        raise UsageError(str(exc)) from None


def written_report(command, result) -> Optional[str]:
    """The command's report.html, or None with a warning on stderr when it could not be drawn (the results stand)."""
    try:
        return command.report(result)
    except Exception as exc:  # a figure that fails must not hide the run's own results
        print(f"dmlbed: warning: report.html not written ({type(exc).__name__}: {exc}); the results are in place",
              file=sys.stderr)
        return None


def main(argv: Optional[List[str]] = None) -> int:
    """Entry point of the `dmlbed` console script."""
    signals.install()
    try:
        command, job, args = checked(argv)
        if command.needs_root(job):
            require_root(f"dmlbed {command.name}")
        result = command.execute(job, args)
        report = written_report(command, result) if command.reports and not args.no_report else None
        if args.json:
            print(json.dumps(command.as_json(result), indent=1, default=str))
        else:
            command.show(result)
            if report:
                print(f"report: {report}")
        failure = command.failure(result)
        if failure:  # after the summary and the fidelity line: the last line on stderr says why it failed
            print(f"dmlbed: error: {failure}", file=sys.stderr)
        return command.exit_code(result)
    except UsageError as exc:
        print(f"dmlbed: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except NetworkBusy as exc:
        print(f"dmlbed: error: {exc}", file=sys.stderr)
        return EXIT_BUSY
    except KeyboardInterrupt as exc:
        name = exc.name if isinstance(exc, signals.Interrupted) else "SIGINT"
        with contextlib.suppress(OSError, ValueError):  # after SIGHUP the terminal may be gone
            print(f"dmlbed: interrupted by {name}; everything started was stopped", file=sys.stderr)
        return exc.exit_code if isinstance(exc, signals.Interrupted) else 130
    except BrokenPipeError:  # e.g. `dmlbed rules ... | head`
        sys.stderr.close()
        return 0
    except RuntimeError as exc:  # NetworkError, ControllerError, RankError: the run failed after validation
        print(f"dmlbed: error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
