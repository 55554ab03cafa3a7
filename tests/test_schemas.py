"""Provenance and schemas: every result says where it came from, `dmlbed --version` prints it, and the JSON Schemas
generated from the option table validate every shipped config and the summary of each command that writes one."""

import glob
import json
import os
import subprocess

import jsonschema
import pytest
import yaml

from emulation.run.options import OptionError, yaml_keys
from emulation.commands.schema import schema
from helpers import ROOT, run_dmlbed

HEAD = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def validator(name):
    return jsonschema.Draft202012Validator(schema(name), format_checker=jsonschema.FormatChecker())


def check_provenance(block, command):
    assert block["dmlbed"] and block["python"] and block["kernel"] == os.uname().release
    assert block["commit"] == (HEAD or None) and block["cpus"] == os.cpu_count() and block["memory_bytes"] > 2 ** 28
    assert block["command"].startswith(f"dmlbed {command} "), block["command"]
    assert block["torch"] and block["controller_library"]


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "configs", "*.yaml"))),
                         ids=os.path.basename)
def test_every_shipped_config_validates(path):
    validator("config").validate(yaml.safe_load(open(path)))


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "configs", "*.yaml"))),
                         ids=os.path.basename)
def test_every_shipped_configs_rows_give_summaries_the_schema_accepts(path, tmp_path):
    """Each row of every shipped config, on the closed forms and (where its algorithm is made of plans) in the flow
    model, gives a summary the generated schema accepts; emulated and loopback summaries are checked wherever the
    suite runs them (helpers.check_summaries)."""
    from dataclasses import replace
    from emulation.backends import closed_form, flow_model, matrix
    summaries = validator("summary")
    for e in matrix.rows(matrix.load(path), str(tmp_path), local=True):
        cfg = replace(e["config"], mode="theory", out=str(tmp_path / "theory"), dilation=1.0, ecmp_ports=None)
        summary = closed_form.execute(closed_form.prepare(cfg))
        summaries.validate(summary.to_dict())
        if summary["ranks"] > SIMULATED_HOSTS:
            continue
        try:  # the flow model runs plans whose traffic does not depend on the data (not DVF's, not gloo's own)
            sim = flow_model.prepare(replace(cfg, mode="simulate", out=str(tmp_path / e["label"]), force=True))
        except OptionError as exc:
            assert "simulate" in str(exc)
            continue
        summaries.validate(flow_model.execute(sim).to_dict())
        summaries.validate(json.load(open(tmp_path / e["label"] / "summary.json")))


SIMULATED_HOSTS = 32  # larger rows (60 to 1,024 servers) take seconds each: `make benchmark` and the configs run them


def test_the_config_schema_is_the_option_table():
    s = schema("config")
    assert set(s["properties"]["defaults"]["properties"]) == set(yaml_keys())
    v = validator("config")
    assert not v.is_valid({"runs": [{"algo": "ps", "tpo": "star:4"}]})  # a misspelled key
    assert not v.is_valid({"runs": [{"algo": "ps", "iters": 0}]})  # below the option's range
    assert not v.is_valid({"runs": [{"algo": "allreduce"}]})  # not a registered algorithm
    assert not v.is_valid({"defaults": {"algo": "ps"}})  # no runs
    claim = {"what": "x", "from": "sec. 4", "row": "a", "metric": "gst_median_s", "paper": 1.5}
    assert not v.is_valid({"runs": [{"label": "a"}], "paper": {"source": "s", "text": "bml", "claims": [claim]}})
    assert v.is_valid({"runs": [{"label": "a"}],
                       "paper": {"source": "s", "text": "bml", "claims": [{**claim, "quote": "1.5x faster",
                                                                                 "evidence": "measurement"}]}})


def test_a_run_and_a_simulation_write_summaries_the_schema_accepts(tmp_path):
    r = run_dmlbed("run", "--topo", "star:3", "--algo", "ring", "--local", "--iters", "2", "--out",
                   str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr[-2000:]
    s = run_dmlbed("simulate", "--topo", "bcube:3,2", "--algo", "bml", "--out", str(tmp_path / "sim"))
    assert s.returncode == 0, s.stderr[-2000:]
    for folder, command in (("run", "run"), ("sim", "simulate")):
        summary = json.load(open(tmp_path / folder / "summary.json"))
        validator("summary").validate(summary)
        check_provenance(summary["provenance"], command)
    broken = json.load(open(tmp_path / "run" / "summary.json"))
    broken["config"]["iters"] = "ten"
    assert not validator("summary").is_valid(broken)


def test_a_bench_says_where_it_came_from(tmp_path):  # calibration.json: tests/test_calibrate.py
    r = run_dmlbed("bench", "--topo", "star:2", "--algo", "ring", "--local", "--sizes", "4K,64K", "--reps", "1",
                   "--out", str(tmp_path / "bench"))
    assert r.returncode == 0, r.stderr[-2000:]
    check_provenance(json.load(open(tmp_path / "bench" / "bench.json"))["provenance"], "bench")


def test_every_flag_of_every_command_is_in_its_flags_schema():
    """What argparse accepts and what `dmlbed schema flags:COMMAND` describes are the same flags."""
    import argparse
    from emulation.commands.cli import build_parser
    from emulation.commands.registry import COMMANDS
    from emulation.commands.schema import flags_schema
    from emulation.run.flags import OldSpelling
    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for command in COMMANDS:
        parser = subparsers.choices[command.name]
        accepted = {s for a in parser._actions if not isinstance(a, OldSpelling)  # old spellings: not described
                    for s in a.option_strings if s not in ("-h", "--help")}
        accepted |= {a.dest for a in parser._actions if not a.option_strings}
        described = {p["x-flag"] for p in flags_schema(command.name, command.groups,
                                                       command.options())["properties"].values()}
        assert accepted == described, command.name


def test_version_prints_the_provenance():
    r = run_dmlbed("--version")
    assert r.returncode == 0 and r.stdout.startswith("dmlbed ")
    if HEAD:
        assert HEAD[:12] in r.stdout.splitlines()[0]
    for key in ("kernel", "openvswitch", "mininet", "python", "torch", "controller", "machine"):
        assert any(line.startswith(key) for line in r.stdout.splitlines()), key


def test_the_schema_command_prints_json_and_refuses_an_unknown_name():
    r = run_dmlbed("schema", "summary")
    assert r.returncode == 0 and json.loads(r.stdout)["title"] == "dmlbed summary.json"
    r = run_dmlbed("schema", "sumary")
    assert r.returncode == 2 and "valid are config, summary, launch" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
