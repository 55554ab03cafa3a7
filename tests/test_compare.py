"""`dmlbed compare`: matrix expansion, config errors, and a small local matrix with CSV and plots."""

import csv
import json

import pytest

from emulation.orchestration.compare import ConfigError, expand, load
from helpers import ROOT, run_dmlbed


def write(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


def test_expand_runs_times_sweep(tmp_path):
    data = load(write(tmp_path, "defaults: {model: 'mlp:100K', iters: 2}\nsweep: {batch: [4, 8]}\nruns:\n"
                                " - {topo: 'star:3', algo: ps}\n - {label: R, topo: 'star:3', algo: ring}\n"))
    entries = expand(data, str(tmp_path / "out"))
    assert [(e["label"], e["config"].batch) for e in entries] == [("ps star:3", 4), ("ps star:3", 8), ("R", 4),
                                                                   ("R", 8)]
    assert len({e["config"].out for e in entries}) == 4


@pytest.mark.parametrize("text,fragment", [
    ("runs: []\n", "non-empty 'runs'"),
    ("runs:\n - {topo: 'star:9', algo: bml}\n", "valid combinations"),
    ("runs:\n - {topo: 'star:9', algo: ps, colour: red}\n", "unknown key 'colour'"),
    ("runs:\n - {algo: ps}\n", "needs 'topo' and 'algo'"),
    ("runs: [\n", "not valid YAML"),
])
def test_config_errors(tmp_path, text, fragment):
    with pytest.raises(ConfigError, match=fragment):
        expand(load(write(tmp_path, text)), str(tmp_path))
    r = run_dmlbed("compare", write(tmp_path, text))
    assert r.returncode == 2 and fragment in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_shipped_configs_are_valid():
    for name in ("demo", "bml-fig5", "bml-fig6"):
        entries = expand(load(f"{ROOT}/configs/{name}.yaml"), "/tmp/unused")
        assert entries


def test_local_compare_writes_csv_and_plots(tmp_path):
    cfg = write(tmp_path, "name: t\ndefaults: {model: 'mlp:100K', iters: 3, batch: 4}\nsweep: {batch: [4, 8]}\n"
                          "runs:\n - {label: A, topo: 'star:3', algo: ring}\n - {label: B, topo: 'star:3', algo: ps}\n")
    r = run_dmlbed("compare", cfg, "--local", "--out", str(tmp_path / "out"), "--json", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout)
    rows = list(csv.DictReader(open(tmp_path / "out" / "comparison.csv")))
    assert len(rows) == 4 and {row["label"] for row in rows} == {"A", "B"}
    assert all(row["correct"] == "True" for row in rows)
    for png in ("jct.png", "gst.png"):
        assert (tmp_path / "out" / png).stat().st_size > 5000
    assert len(result["plots"]) == 2
