"""The short form of the soak test (root): mixed runs back to back leave nothing behind."""

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT

pytestmark = pytest.mark.emulation


@pytest.mark.benchmark  # make benchmark runs it beside the 20-run soak
def test_short_soak_leaves_nothing_behind(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "soak.py"), "--runs", "4", "--out",
                        str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=1200)
    report = json.loads((tmp_path / "soak.json").read_text())
    assert report["leftovers"] == [], report["leftovers"]
    assert report["all_correct"], [x["error"] for x in report["runs"]]
    assert all(x["completed"] for x in report["runs"])
    assert not report["switch_restarted"]
    assert r.returncode in (0, 1)  # memory growth over 4 runs is reported; the 20-run soak (make benchmark) judges it
