"""`dmlbed schema NAME`: the JSON Schema of what dmlbed reads (a compare config, a command's flags) or writes (a
run's summary.json, a launch's), generated from the option table and the summary's types."""

from __future__ import annotations

import json
import math
import typing
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, Dict, Iterable, Sequence

from emulation.commands.base import Command
from emulation.results import claims as paper
from emulation.results import targets
from emulation.results.parallel_summary import ParallelSummary
from emulation.results.summary import MODE_SECTIONS, SECTIONS, Head, LaunchSummary
from emulation.run.options import Option, OptionError, command_option, described, flag_of, in_groups, yaml_key

DRAFT = "https://json-schema.org/draft/2020-12/schema"
NUMBER = {"type": "number"}
TEXT = {"type": "string"}
PRIMITIVES = {int: {"type": "integer"}, float: {"type": "number"}, str: {"type": "string"},
              bool: {"type": "boolean"}, type(None): {"type": "null"}}

def option_schema(opt: Option, default: Any) -> dict:
    """One option's values as a YAML config may give them (null: the default)."""
    if opt.kind is bool:
        schema: Dict[str, Any] = {"type": "boolean"}
    elif opt.kind is list:
        schema = {"type": "array", "items": TEXT}
    elif opt.kind in (int, float):
        schema = {"type": "integer" if opt.kind is int else "number"}
        if opt.quantity is not None:  # or a string with a unit (5ms, 16K): the bounds apply to numbers only
            schema["type"] = [schema["type"], "string"]
        if opt.low is not None and math.isfinite(opt.low):  # JSON has no infinity: such a bound stays open
            schema["exclusiveMinimum" if opt.low_open else "minimum"] = opt.low
        if opt.high is not None and math.isfinite(opt.high):
            schema["maximum"] = opt.high
    elif opt.choices:
        schema = {"enum": list(opt.choices)}
    else:  # a string option also takes a number (bw: 100, rto_min: 250, compute_time: 0.3)
        schema = {"type": ["string", "number"]}
    schema["description"] = opt.help
    if default is not None:
        schema["default"] = default
    return {"anyOf": [schema, {"type": "null"}]} if not opt.required else schema


def config_options() -> Dict[str, dict]:
    """Every compare-config key of the option table with its schema, plus a run's label."""
    out = {yaml_key(name, opt): option_schema(opt, default) for name, opt, default in described() if opt.yaml}
    out["label"] = {"type": "string", "description": "the run's name in tables and plots"}
    return out


def claim_schema() -> dict:
    """One claim of a config's `paper:` block (claims.py checks what a schema cannot: rows, ranges, quotes)."""
    value = {"anyOf": [NUMBER, {"type": "array", "items": NUMBER, "minItems": 2, "maxItems": 2}]}
    properties = {key: TEXT for key in paper.CLAIM_KEYS}
    properties.update(metric={"enum": list(paper.METRICS)}, relation={"enum": list(paper.RELATIONS)},
                      kind={"enum": list(paper.KINDS)}, evidence={"enum": list(paper.EVIDENCE)}, paper={},
                      tolerance={"type": "number", "exclusiveMinimum": 0, "maximum": paper.MAX_TOLERANCE})
    scored = {"required": ["row", "metric", "paper", "evidence"], "properties": {"paper": value}}  # out of reach: any
    quoted = {"if": {"properties": {"kind": {"const": "model"}}, "required": ["kind"]}, "else": {"required": ["quote"]}}
    return {"type": "object", "properties": properties, "required": ["what", "from"], "additionalProperties": False,
            "if": {"required": ["out_of_reach"]}, "else": scored, "allOf": [quoted]}


def target_schema() -> dict:
    """One target of a config's `targets:` block (targets.py checks what a schema cannot: rows, can-it-fail)."""
    bound = {"at_most": NUMBER, "at_least": NUMBER, "between": {"type": "array", "items": NUMBER, "minItems": 2,
                                                                "maxItems": 2},
             "equals": {"type": ["string", "boolean"]}, "one_of": {"type": "array", "items": TEXT, "minItems": 1},
             "contains": TEXT}
    group = {"type": "object", "minProperties": 1, "description": "sweep key: value"}
    properties = {"what": TEXT, "row": TEXT, "relative_to": TEXT, "why": TEXT, **bound, "in": group,
                  "relative_in": group,
                  "metric": {"anyOf": [{"enum": [*targets.DOMAINS, *targets.CHOICES]},
                                       {"type": "string", "pattern": r"\.", "description": "a command row's figure"}]},
                  "relation": {"enum": list(paper.RELATIONS)}}
    return {"type": "object", "properties": properties, "required": ["what", "row", "metric"],
            "additionalProperties": False, "oneOf": [{"required": [k]} for k in targets.BOUNDS]}


def config_schema() -> dict:
    """A compare config: name, defaults, sweep, runs, an optional paper block, targets and repetitions."""
    options = config_options()
    keys = sorted(options)
    mapping = {"type": "object", "properties": options, "additionalProperties": False}
    sweep = {"type": "object", "propertyNames": {"enum": keys},
             "additionalProperties": {"type": "array", "minItems": 1}}
    jobs = {"type": "array", "minItems": 1, "items": {"type": "string"},
            "description": "several jobs sharing the run's network, each 'KEY=VALUE ...' as dmlbed jobs --job takes"}
    command = {"type": "string", "description": "a row that is one dmlbed command line (without 'dmlbed'), its JSON "
               "result's figures the row's"}
    until = {"type": "object", "properties": {"metric": {"type": "string"},
                                              "attempts": {"type": "integer", "minimum": 1, "maximum": 20}},
             "required": ["metric", "attempts"], "additionalProperties": False,
             "description": "run the row again while this figure of it is missing or zero, up to attempts times"}
    derived = {"type": "object", "properties": {"from": TEXT, "metric": TEXT, "times": {"type": "number",
                                                                                   "exclusiveMinimum": 0}},
               "required": ["from", "metric"], "additionalProperties": False,
               "description": "set when the row runs: an earlier row's figure (metric of the row labelled from) "
                              "times `times`"}
    own = {key: (schema if key == "label" else {"anyOf": [schema, derived]}) for key, schema in options.items()}
    run = {"type": "object", "properties": {**own, "sweep": sweep, "jobs": jobs, "command": command,
                                            "until": until}, "additionalProperties": False}
    return {"$schema": DRAFT, "title": "dmlbed compare config", "type": "object",
            "properties": {"name": TEXT, "defaults": mapping, "sweep": sweep,
                           "runs": {"type": "array", "items": run, "minItems": 1},
                           "paper": {"type": "object",
                                     "properties": {"source": TEXT, "text": {"enum": list(paper.PAPERS)},
                                                    "claims": {"type": "array", "items": claim_schema(),
                                                               "minItems": 1}},
                                     "required": ["source", "text", "claims"], "additionalProperties": False},
                           "targets": {"type": "array", "items": target_schema(), "minItems": 1},
                           "repeat": {"type": "integer", "minimum": 1, "maximum": 100,
                                      "description": "run the whole matrix this many times over (round-robin), "
                                                     "each row judged on its own"}},
            "required": ["runs"], "additionalProperties": False}


def flags_schema(command: str, groups: Iterable[str], own: Sequence[Option]) -> dict:
    """Every flag (and positional argument) of one command: the run options of its groups and its own, each with
    its type, range, default and group; x-flag is how it is given on the command line."""
    properties: Dict[str, dict] = {}
    required = []
    for name, opt, default in list(in_groups(groups)) + [(o.name, o, o.default) for o in own]:
        schema = option_schema(opt, default)
        schema["x-flag"] = name if opt.positional else flag_of(name, opt)
        schema["x-group"] = opt.group
        properties[name] = schema
        if opt.required and not opt.exclusive:
            required.append(name)
    return {"$schema": DRAFT, "title": f"dmlbed {command} flags", "type": "object", "properties": properties,
            "required": required, "additionalProperties": False}


def provenance_schema() -> dict:
    """The provenance block every result carries (provenance.py)."""
    maybe_text = {"type": ["string", "null"]}
    return {"type": "object",
            "properties": {"dmlbed": maybe_text, "commit": maybe_text, "dirty": {"type": ["boolean", "null"]},
                           "kernel": TEXT, "openvswitch": maybe_text, "mininet": maybe_text, "python": TEXT,
                           "torch": maybe_text,
                           "controller_library": {"type": ["object", "null"], "additionalProperties": TEXT},
                           "cpus": {"type": ["integer", "null"]}, "memory_bytes": {"type": ["integer", "null"]},
                           "date": {"type": "string", "format": "date-time"}, "command": TEXT},
            "required": ["dmlbed", "commit", "kernel", "python", "torch", "cpus", "memory_bytes", "date", "command"]}


def run_config_schema() -> dict:
    """summary.json's `config`: every field of the run's configuration, by field name."""
    properties = {}
    for name, opt, default in described():
        schema = option_schema(opt, default)
        properties[name] = schema if not opt.required else {"anyOf": [schema, {"type": "null"}]}
    return {"type": "object", "properties": properties, "required": sorted(properties)}


# Fields whose type is a plain mapping in Python but has a schema of its own.
FIELD_SCHEMAS = {(Head, "config"): run_config_schema, (Head, "provenance"): provenance_schema,
                 (LaunchSummary, "provenance"): provenance_schema}


def type_schema(tp: Any) -> dict:
    """The JSON Schema of a Python type annotation (the summary's field types)."""
    if tp is Any:
        return {}
    if tp in PRIMITIVES:
        return dict(PRIMITIVES[tp])
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        return {"anyOf": [type_schema(a) for a in args]}
    if origin in (list, tuple, typing.Sequence):
        return {"type": "array", "items": type_schema(args[0]) if args else {}}
    if origin is dict:
        return {"type": "object", "additionalProperties": type_schema(args[1]) if len(args) > 1 else {}}
    if is_dataclass(tp):
        return dataclass_schema(tp)
    raise TypeError(f"no JSON Schema for the annotation {tp!r}")


def field_schemas(kind: type) -> Dict[str, dict]:
    """Each field of a dataclass with its schema (and description, where it has one)."""
    hints = typing.get_type_hints(kind)
    out = {}
    for f in fields(kind):
        own = FIELD_SCHEMAS.get((kind, f.name))
        schema = own() if own else type_schema(hints[f.name])
        if f.metadata.get("doc"):
            schema["description"] = f.metadata["doc"]
        out[f.name] = schema
    return out


def required_fields(kind: type) -> list:
    """The keys a section always carries (its optional ones may be absent)."""
    return [f.name for f in fields(kind) if not f.metadata.get("optional")]


def dataclass_schema(kind: type) -> dict:
    """An object of a dataclass's fields."""
    return {"type": "object", "properties": field_schemas(kind), "required": required_fields(kind)}


def summary_schema() -> dict:
    """summary.json of `dmlbed run` (emulated or --local), `dmlbed simulate`, and the closed forms' (`dmlbed
    theory --json`, a compare row of mode theory), generated from the summary's sections: every mode carries the
    head, the models asked for and the outcome; each mode requires its own sections. Keys a later version or a
    strategy (its extras) adds are allowed."""
    properties: Dict[str, dict] = {}
    for _, kind in SECTIONS:
        properties.update(field_schemas(kind))
    by_name = dict(SECTIONS)
    common = [k for name in ("head", "models", "outcome") for k in required_fields(by_name[name])]
    per_mode = [{"if": {"properties": {"mode": {"const": mode}}, "required": ["mode"]},
                 "then": {"required": [k for name in names for k in required_fields(by_name[name])]}}
                for mode, names in MODE_SECTIONS.items()]
    properties["mode"] = {"enum": list(MODE_SECTIONS)}
    return {"$schema": DRAFT, "title": "dmlbed summary.json", "type": "object", "properties": properties,
            "required": common, "allOf": per_mode}


def launch_schema() -> dict:
    """summary.json of `dmlbed launch`, generated from its type: the user's command on every host, how it
    synchronized, what it measured and where it came from."""
    schema = dataclass_schema(LaunchSummary)
    schema["required"] = [f.name for f in fields(LaunchSummary) if f.default is MISSING and
                          f.default_factory is MISSING] + ["completed", "error", "exit_codes", "wall_s", "fidelity"]
    return {"$schema": DRAFT, "title": "dmlbed launch summary.json", **schema}


def parallel_schema() -> dict:
    """summary.json of a parallel job (`--parallel` in theory and simulate), generated from its type."""
    return {"$schema": DRAFT, "title": "dmlbed parallel job summary.json", **dataclass_schema(ParallelSummary)}


SCHEMAS = {"config": config_schema, "summary": summary_schema, "launch": launch_schema, "parallel": parallel_schema}


def schema(name: str) -> dict:
    """The schema called name (ValueError naming the valid ones)."""
    if name not in SCHEMAS:
        raise ValueError(f"no schema named '{name}': valid are {', '.join(SCHEMAS)}")
    return SCHEMAS[name]()


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
        return list(SCHEMAS) + [FLAGS + c.name for c in self.registry]

    def prepare(self, args):
        which = args.which
        if which.startswith(FLAGS):
            command = next((c for c in self.registry if c.name == which[len(FLAGS):]), None)
            if command is None:
                raise OptionError(f"no schema named '{which}': valid are {', '.join(self.names())}")
            return flags_schema(command.name, command.groups, command.options())
        if which not in SCHEMAS:
            raise OptionError(f"no schema named '{which}': valid are {', '.join(self.names())}")
        return schema(which)

    def execute(self, job, args):
        return job

    def show(self, result):
        print(json.dumps(result, indent=1, allow_nan=False))


COMMAND = Schema()
