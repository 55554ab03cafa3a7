"""The short form of `make benchmark` (root): a benchmark config's emulated runs and network check measured, every
target judged, overload flagged."""

import csv
import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.emulation


@pytest.mark.benchmark  # the benchmark's own quick form: make benchmark runs it beside the full one
def test_quick_benchmark_config_measures_and_judges_every_target(tmp_path):
    out = tmp_path / "bench"
    r = subprocess.run([sys.executable, "-m", "emulation.commands.cli", "reproduce", "--config",
                        os.path.join(ROOT, "tests", "data", "bench-quick.yaml"), "--out", str(out), "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    result = json.loads(r.stdout)
    rows = {row["label"]: row for row in json.loads((out / "comparison.json").read_text())}
    assert set(rows) == {"ps-100-dilated", "bml-100", "overloaded-fattree", "net-bcube-100"}
    for key in ("ps-100-dilated", "bml-100", "overloaded-fattree"):
        row = rows[key]
        assert row["correct"], key
        assert row["fidelity"] in ("faithful", "degraded", "not faithful"), key
        assert row["gst_ratio"] > 0.9, key  # a GST below theory would mean the measurement is wrong
        assert row["gst_cv"] is not None, key
    assert rows["bml-100"]["dilation"] == 2.0
    assert rows["overloaded-fattree"]["fidelity"] == "not faithful" and rows["overloaded-fattree"]["fidelity_cause"]
    assert 0 < rows["net-bcube-100"]["fidelity_min"] <= 1.5 and rows["net-bcube-100"]["fidelity"]
    verdicts = {t["what"]: t["verdict"] for t in result["targets"]}
    assert verdicts["BML / PS GST at 100 (both dilated 2): BML needs less"] == "met"
    assert verdicts["overloaded fattree:4 at 400 is marked not faithful"] == "met"
    assert verdicts["every run correct"] == "met"
    assert verdicts["nothing left on the machine after any run (the soak's check)"] == "met"
    assert verdicts["the software switch never restarted"] == "met"
    assert all(row["switch_rss_kb"] > 0 and row["leftovers"] == [] for row in rows.values())
    with open(out / "targets.csv") as f:
        assert len(list(csv.DictReader(f))) == len(result["targets"]) == 6  # every target of the config, written
    assert r.returncode == (0 if all(t["met"] for t in result["targets"]) else 1)


def test_the_benchmark_page_keeps_a_measured_section_whose_results_are_missing_here():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from benchmark_page import MISSING, keep_measured
    old = ("# Benchmark\n\n## A\n\nFrom `results/a/a.json`, written by `x` on d at commit `c`.\n\n| 1 |\n\n"
           "## B\n\nFrom `results/b/b.json`, old figures.\n\n## C\n\n`results/c.json` " + MISSING + "\n")
    new = ("# Benchmark\n\n## A\n\n`results/a/a.json` " + MISSING + "\n\n## B\n\nFrom `results/b/b.json`, new.\n\n"
           "## C\n\n`results/c.json` " + MISSING + "\n\n## D\n\n`results/d.json` " + MISSING + "\n")
    got = keep_measured(new, old)
    assert "written by `x`" in got and "| 1 |" in got  # A: missing here, kept from the page
    assert "new." in got and "old figures" not in got  # B: measured now, replaced
    assert got.count(MISSING) == 2  # C and D: nothing measured to keep
