"""The labs' commands run as the handouts write them (here two labs with --iters cut to 2; `make benchmark` runs
every lab exactly as written); the checker accepts their output and rejects a tampered results file."""

import os
import re
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
