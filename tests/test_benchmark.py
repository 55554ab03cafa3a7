"""The short form of `make benchmark` (root): every run measured, every target evaluated, overload flagged."""

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.emulation


@pytest.mark.benchmark  # the benchmark's own quick form: make benchmark runs it beside the full one
def test_quick_benchmark_measures_every_target(tmp_path):
    out = tmp_path / "bench"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "benchmark.py"), "--quick", "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert set(report["runs"]) == {"ps-100-dilated", "bml-100", "overloaded-fattree"}
    for key, run in report["runs"].items():
        assert run["correct"], key
        assert run["fidelity"] in ("faithful", "degraded", "not faithful"), key
        assert run["gst_ratio"] > 0.9, key  # a GST below theory would mean the measurement is wrong
        assert run["levels"] and all(v["shaped_mbps"] > 0 for v in run["levels"].values()), key
    assert report["runs"]["bml-100"]["dilation"] == 2.0
    assert report["runs"]["overloaded-fattree"]["fidelity"] == "not faithful"
    assert report["runs"]["overloaded-fattree"]["fidelity_cause"]
    assert all(isinstance(v, bool) for v in report["targets"].values())
    assert 0 < report["bml_over_ps_gst"] < 1  # BML needs less than PS on the same hosts at any load


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
