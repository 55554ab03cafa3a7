"""The registry of `dmlbed` subcommands, in the order `dmlbed --help` lists them. Adding a command: a module in this
folder defining COMMAND (a base.Command), and one line below."""

from typing import Tuple

from emulation.commands import (bench, calibrate, clean, compare, ecmp_patterns, jobs, launch, net, reproduce, rules,
                                run, schema, simulate, theory, timeline, topo)
from emulation.commands.base import Command

COMMANDS: Tuple[Command, ...] = (
    topo.COMMAND,
    rules.COMMAND,
    net.COMMAND,
    run.COMMAND,
    launch.COMMAND,
    theory.COMMAND,
    simulate.COMMAND,
    ecmp_patterns.COMMAND,
    compare.COMMAND,
    jobs.COMMAND,
    reproduce.COMMAND,
    clean.COMMAND,
    bench.COMMAND,
    calibrate.COMMAND,
    timeline.COMMAND,
    schema.COMMAND,
)
for _command in COMMANDS:
    _command.registry = COMMANDS


def names() -> str:
    """The subcommands, comma-separated."""
    return ", ".join(c.name for c in COMMANDS)
