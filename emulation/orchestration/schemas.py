"""JSON Schemas (draft 2020-12) of a compare config, of a run's or a simulation's summary.json and of a launch's,
generated from the one option table (options.described) and the paper-claim keys, so that editors and other tools
can check what dmlbed reads and writes (`dmlbed schema config|summary|launch`)."""

from __future__ import annotations

import math
from typing import Any, Dict

from emulation.orchestration import paper
from emulation.orchestration.options import Option, described, yaml_key

DRAFT = "https://json-schema.org/draft/2020-12/schema"
NUMBER = {"type": "number"}
COUNT = {"type": "integer", "minimum": 0}
TEXT = {"type": "string"}


def option_schema(opt: Option, default: Any) -> dict:
    """One option's values as a YAML config may give them (null: the default)."""
    if opt.kind is bool:
        schema: Dict[str, Any] = {"type": "boolean"}
    elif opt.kind in (int, float):
        schema = {"type": "integer" if opt.kind is int else "number"}
        if opt.low is not None and math.isfinite(opt.low):  # JSON has no infinity: such a bound stays open
            schema["exclusiveMinimum" if opt.low_open else "minimum"] = opt.low
        if opt.high is not None and math.isfinite(opt.high):
            schema["maximum"] = opt.high
    elif opt.choices:
        schema = {"enum": list(opt.choices)}
    elif opt.parse is None:  # a plain string option also takes a number (bw: 100)
        schema = {"type": ["string", "number"]}
    else:
        schema = {"type": "string"}
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
    """One claim of a config's `paper:` block (paper.py checks what a schema cannot: rows, ranges, quotes)."""
    value = {"anyOf": [NUMBER, {"type": "array", "items": NUMBER, "minItems": 2, "maxItems": 2}]}
    properties = {key: TEXT for key in paper.CLAIM_KEYS}
    properties.update(metric={"enum": list(paper.METRICS)}, relation={"enum": list(paper.RELATIONS)},
                      kind={"enum": list(paper.KINDS)}, paper={})
    scored = {"required": ["row", "metric", "paper"], "properties": {"paper": value}}  # out of reach: any note
    quoted = {"if": {"properties": {"kind": {"const": "model"}}, "required": ["kind"]}, "else": {"required": ["quote"]}}
    return {"type": "object", "properties": properties, "required": ["what", "from"], "additionalProperties": False,
            "if": {"required": ["out_of_reach"]}, "else": scored, "allOf": [quoted]}


def config_schema() -> dict:
    """A compare config: name, defaults, sweep, runs, and an optional paper block."""
    options = config_options()
    keys = sorted(options)
    mapping = {"type": "object", "properties": options, "additionalProperties": False}
    sweep = {"type": "object", "propertyNames": {"enum": keys},
             "additionalProperties": {"type": "array", "minItems": 1}}
    run = {"type": "object", "properties": {**options, "sweep": sweep}, "additionalProperties": False}
    return {"$schema": DRAFT, "title": "dmlbed compare config", "type": "object",
            "properties": {"name": TEXT, "defaults": mapping, "sweep": sweep,
                           "runs": {"type": "array", "items": run, "minItems": 1},
                           "paper": {"type": "object",
                                     "properties": {"source": TEXT, "text": {"enum": list(paper.PAPERS)},
                                                    "claims": {"type": "array", "items": claim_schema(),
                                                               "minItems": 1}},
                                     "required": ["source", "text", "claims"], "additionalProperties": False}},
            "required": ["runs"], "additionalProperties": False}


def provenance_schema() -> dict:
    """The provenance block every result carries (emulation/orchestration/provenance.py)."""
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


def summary_schema() -> dict:
    """summary.json of `dmlbed run` (emulated or --local) and `dmlbed simulate`: the head every run shares, what it
    measured, and where it came from. Keys a later version adds are allowed."""
    maybe_number = {"type": ["number", "null"]}
    seconds = {"type": "number", "minimum": 0}
    head = {"topology": TEXT, "algo": TEXT, "model": TEXT, "workers": COUNT, "ranks": COUNT, "servers": COUNT,
            "parameters": COUNT, "gradient_bytes": COUNT,
            "bw_mbps": {"anyOf": [NUMBER, {"type": "array", "items": NUMBER}]}, "batch": COUNT, "codec": TEXT,
            "iterations_requested": COUNT, "gst_theory_s": seconds, "gst_formula": TEXT, "tf_s": seconds,
            "config": run_config_schema(), "provenance": provenance_schema()}
    measured = {"iterations": COUNT, "gst_median_s": maybe_number, "gst_ratio": maybe_number,
                "jct_s": maybe_number, "correct": {"type": ["boolean", "null"]}, "completed": {"type": "boolean"},
                "error": {"type": ["string", "null"]}, "mode": {"enum": ["simulate"]},
                "fidelity": {"type": "object"}, "rank_start": {"type": "object"}}
    return {"$schema": DRAFT, "title": "dmlbed summary.json", "type": "object",
            "properties": {**head, **measured}, "required": sorted(head) + ["iterations", "gst_median_s", "completed"]}


def launch_schema() -> dict:
    """summary.json of `dmlbed launch`: the user's command on every host, how it synchronized, what it measured and
    where it came from (a script has no algorithm or model of dmlbed's, hence its own schema)."""
    maybe_text = {"type": ["string", "null"]}
    properties = {"topology": TEXT, "command": TEXT, "cwd": TEXT, "ranks": COUNT, "algo": maybe_text,
                  "synchronization": TEXT, "bw_mbps": {"anyOf": [NUMBER, {"type": "array", "items": NUMBER}]},
                  "shaped_mbps": {"type": "array", "items": NUMBER}, "config": {"type": "object"},
                  "provenance": provenance_schema(), "completed": {"type": "boolean"}, "error": maybe_text,
                  "exit_codes": {"type": "object", "additionalProperties": {"type": ["integer", "null"]}},
                  "wall_s": {"type": ["number", "null"]}, "fidelity": {"type": "object"},
                  "controller": {"type": ["object", "null"]}}
    return {"$schema": DRAFT, "title": "dmlbed launch summary.json", "type": "object", "properties": properties,
            "required": sorted(set(properties) - {"controller"})}


SCHEMAS = {"config": config_schema, "summary": summary_schema, "launch": launch_schema}


def schema(name: str) -> dict:
    """The schema called name (ValueError naming the valid ones)."""
    if name not in SCHEMAS:
        raise ValueError(f"no schema named '{name}': valid are {', '.join(SCHEMAS)}")
    return SCHEMAS[name]()

