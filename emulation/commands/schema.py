"""`dmlbed schema NAME`: the JSON Schema of what dmlbed reads (a compare config, a command's flags) or writes (a
run's summary.json, a launch's), generated from the option table and the summary's types."""

from __future__ import annotations

import json

from emulation.commands.base import Command
from emulation.run import json_schemas
from emulation.run.options import OptionError, command_option

FLAGS = "flags:"  # flags:COMMAND, one command's flags


class Schema(Command):
    name, help, json_flag = "schema", "print the JSON Schema of a compare config, summary.json or a command's flags", False
    description = ("config: a compare config's keys; summary: summary.json of run and simulate (and the closed "
                   "forms' rows); launch: a launch's summary.json; flags:COMMAND: every flag of one command, "
                   "with its type, range, default and group.")
    examples = (
        ("a compare config's keys and types, for an editor's completion",
         "config"),
        ("run's flags as JSON Schema",
         "flags:run"),
    )
    own = (command_option("which", "config | summary | launch | flags:COMMAND", positional=True),)

    def names(self):
        """Every schema this command prints."""
        return list(json_schemas.SCHEMAS) + [FLAGS + c.name for c in self.registry]

    def prepare(self, args):
        which = args.which
        if which.startswith(FLAGS):
            command = next((c for c in self.registry if c.name == which[len(FLAGS):]), None)
            if command is None:
                raise OptionError(f"no schema named '{which}': valid are {', '.join(self.names())}")
            return json_schemas.flags_schema(command.name, command.groups, command.options())
        if which not in json_schemas.SCHEMAS:
            raise OptionError(f"no schema named '{which}': valid are {', '.join(self.names())}")
        return json_schemas.schema(which)

    def execute(self, job, args):
        return job

    def show(self, result):
        print(json.dumps(result, indent=1, allow_nan=False))


COMMAND = Schema()
