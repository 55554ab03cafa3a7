"""Every lab's commands run as the handout writes them (with --iters cut to 2 here; `make benchmark` runs them
exactly as written); the checker accepts their output and rejects a tampered results file."""

import os
import re
import sys

import pytest

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "labs"))
from handouts import LABS, handout_commands, run_lab  # noqa: E402

SUITE_ITERS = 2


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


@pytest.mark.emulation
@pytest.mark.parametrize("lab", list(LABS))
def test_lab_runs_and_checker_rejects_tampering(lab):
    r = run_lab(lab, SUITE_ITERS)
    assert r["failed_command"] is None, f"{r['failed_command']}\n{r.get('error')}"
    assert r["checker_passes"], r["checker_output"]
    assert r["checker_rejects_tampering"]
