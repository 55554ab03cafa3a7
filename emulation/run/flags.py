"""The option table as argparse flags: each option's help on one command, --help's sections, the arguments a
command adds, and the old spellings still taken."""

from __future__ import annotations

import argparse
import sys
from typing import Any, Dict, Iterable, Optional, Sequence

from emulation.core.units import EXAMPLES
from emulation.run.options import (APP_B, BACKGROUND, BATCH, CONTROLLER, DILATION, EVENTS, FLOW_MODEL, ITERATIONS,
                                   LINKS, MATRIX, NETWORK, OUTPUT, PARALLEL, PLAN_INPUTS, RANKS, REPLACE, SEED, SYNCHRONIZATION,
                                   TOPOLOGY, TRAINING, WAIT, Option, flag_of, in_groups)


def help_for(opt: Option, command: Optional[str] = None) -> str:
    """An option's help on one command: its wording there, '{command}' filled in."""
    text = next((t for names, t in opt.per_command if command in names), opt.help)
    return text.replace("{command}", command or "COMMAND")


def argument_help(opt: Option, default: Any, command: Optional[str] = None) -> str:
    """An option's help text as argparse shows it: the choices, and the default where there is one."""
    text = help_for(opt, command) + (f" ({' | '.join(opt.choices)})" if opt.choices else "")
    if opt.quantity is not None:
        text += f" (or with a unit: {EXAMPLES[opt.quantity.kind]})"
    if opt.alias:
        text += f" (formerly {opt.alias}, still taken)"
    if default not in (None, False, "", []) and not opt.positional:
        text += f" [default: {default:g}]" if isinstance(default, float) else f" [default: {default}]"
    return text.replace("%", "%%")  # argparse formats help with %


# The sections of a command's --help, in order, and the option groups each one shows (a command's own options come
# first, under its name; algorithms' and codecs' own options have a section of their own).
HELP_SECTIONS = (("network", (TOPOLOGY, LINKS, BACKGROUND, EVENTS, NETWORK, CONTROLLER)),
                 ("training and synchronization", (SYNCHRONIZATION, PLAN_INPUTS, BATCH, ITERATIONS, SEED, TRAINING)),
                 ("parallel job (tensor, pipeline and data parallelism)", (PARALLEL,)),
                 ("algorithm- and codec-specific (each applies to the algorithms or codec it names)", ()),
                 ("models (theory, simulate)", (FLOW_MODEL, APP_B, MATRIX)),
                 ("machine", (RANKS, DILATION, WAIT)),
                 ("output", (OUTPUT, REPLACE)))
SPECIFIC = HELP_SECTIONS[3][0]


def help_section(opt: Option, own_title: str) -> str:
    """The --help section an option is shown in."""
    if opt.algorithm_option or opt.codec_option:
        return SPECIFIC
    return next((title for title, groups in HELP_SECTIONS if opt.group in groups), own_title)


def add_arguments(parser, groups: Iterable[str] = (), own: Sequence[Option] = (), own_title: str = "options",
                  command: Optional[str] = None) -> None:
    """argparse arguments of the RunConfig fields in these groups and of a command's own options, in --help's
    sections (values are converted and checked later, in one place)."""
    entries = [(opt.name, opt, opt.default) for opt in own] + in_groups(groups)
    titles = [own_title] + [title for title, _ in HELP_SECTIONS]
    sections: Dict[str, Any] = {}
    for title in titles:  # created in order, only those with options: argparse shows them so
        if any(not opt.positional and help_section(opt, own_title) == title for _, opt, _ in entries):
            sections[title] = parser.add_argument_group(title)
    exclusive: Dict[str, Any] = {}
    for name, opt, default in entries:
        target = parser if opt.positional else sections[help_section(opt, own_title)]
        if opt.exclusive:
            if opt.exclusive not in exclusive:
                exclusive[opt.exclusive] = target.add_mutually_exclusive_group(required=opt.required)
            target = exclusive[opt.exclusive]
        add_argument(target, name, opt, default, command)


def add_argument(parser, name: str, opt: Option, default: Any, command: Optional[str] = None) -> None:
    """One argparse argument of an option (its help worded for the command)."""
    text = argument_help(opt, default, command)
    if opt.positional:
        parser.add_argument(name, help=text, nargs=opt.nargs, metavar=opt.metavar,
                            **({"default": default} if opt.nargs in ("?", "*") else {}))
    elif opt.kind is bool:
        parser.add_argument(flag_of(name, opt), dest=name, action="store_true", help=text)
    elif opt.kind is list:
        parser.add_argument(flag_of(name, opt), dest=name, action="append", default=[], help=text,
                            metavar=opt.metavar or name.upper())
    else:
        required = opt.required and not opt.exclusive
        parser.add_argument(flag_of(name, opt), dest=name, required=required, help=text,
                            default=None if required else default,
                            metavar=opt.metavar or flag_of(name, opt)[2:].replace("-", "_").upper())  # choices once
    if opt.alias:
        parser.add_argument(opt.alias, dest=name, action=OldSpelling, help=argparse.SUPPRESS, new=flag_of(name, opt))


class OldSpelling(argparse.Action):
    """A flag's old spelling: takes the value as the new one does, and says which flag to use now (stderr)."""

    def __init__(self, option_strings, dest, new: str, **kwargs):
        super().__init__(option_strings, dest, **kwargs)
        self.new = new

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"dmlbed: note: {option_string} is the old spelling of {self.new} (it takes units: see --help)",
              file=sys.stderr)
        setattr(namespace, self.dest, values)
