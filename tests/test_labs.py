"""The labs' commands run as the handouts write them (here two labs with --iters cut to 2; `make benchmark` runs
every lab exactly as written); the checker accepts their output and rejects a tampered results file."""

import os
import re
import subprocess
import sys

import pytest

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "labs"))
from handouts import LABS, handout_commands, run_lab  # noqa: E402

SUITE_ITERS = 2
# The suite's short form: the lab whose commands no other test covers (calibration, a calibrated theory and the
# timeline). `make benchmark` runs every lab as its handout writes it (labs/handouts.py); lab1, lab2 and lab4 are
# net checks and runs the suite tests elsewhere, and lab3's runs (TernGrad, Parameter Flow with its tree, digits)
# are each tested in test_run_emulation and test_run_local (53 s of the suite).
SUITE_LABS = ("lab5-latency",)


def test_handouts_have_goals_commands_output_questions_and_a_checker():
    for lab in LABS:
        text = open(os.path.join(ROOT, "labs", lab, "README.md")).read()
        for section in ("## Goals", "## Commands", "## What the output looks like", "## Questions"):
            assert section in text, (lab, section)
        assert handout_commands(lab)[-1].startswith(".venv/bin/python labs/")
        assert os.path.exists(os.path.join(ROOT, "labs", lab, "check.py"))


def test_only_the_iteration_count_changes_in_the_suite():
    for lab in LABS:
        written, short = handout_commands(lab), handout_commands(lab, SUITE_ITERS)
        assert len(written) == len(short)
        for a, b in zip(written, short):
            assert re.sub(r"--iters \d+", "--iters N", a) == re.sub(r"--iters \d+", "--iters N", b), (a, b)
            assert "--iters" not in a or f"--iters {SUITE_ITERS}" in b


def test_the_suites_labs_are_labs():
    assert set(SUITE_LABS) <= set(LABS)


@pytest.mark.emulation
@pytest.mark.parametrize("lab", SUITE_LABS)
def test_lab_runs_and_checker_rejects_tampering(lab):
    r = run_lab(lab, SUITE_ITERS)
    assert r["failed_command"] is None, f"{r['failed_command']}\n{r.get('error')}"
    assert r["checker_passes"], r["checker_output"]
    assert r["checker_rejects_tampering"]


def test_every_labs_theory_lines_pass_its_checks(tmp_path):
    """The handouts' `dmlbed theory` lines need no root: run them and hold their files to the checker's formulas
    (lab2's checker once broke on a one-level summary's bw_mbps without an emulated lab run noticing)."""
    import importlib.util
    from dmlbed.labcheck import Checker, rates
    assert rates({"bw_mbps": 50.0}) == [50.0] and rates({"bw_mbps": [200.0, 100.0]}) == [200.0, 100.0]
    lines = [l for l in handout_commands("lab2-gradient-sync") if " theory " in l]
    assert len(lines) == 3
    for line in lines:
        r = subprocess.run(["bash", "-c", line.replace("results/lab2", str(tmp_path))], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
    spec = importlib.util.spec_from_file_location("lab2_check", os.path.join(ROOT, "labs", "lab2-gradient-sync",
                                                                             "check.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    c = Checker("lab2")
    module.check_theory(c, str(tmp_path))
    assert c.failures == [] and c.passed == 6
