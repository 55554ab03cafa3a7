"""Every lab's commands run exactly as the handout writes them; the checker accepts their output and rejects
a tampered results file."""

import json
import os
import re
import shutil
import subprocess

import pytest

from helpers import ROOT

LABS = {"lab1-topologies": ("results/lab1", "bcube-net.json", "fidelity_min"),
        "lab2-gradient-sync": ("results/lab2", "bml/summary.json", "gst_median_s"),
        "lab3-compression": ("results/lab3", "ps-terngrad/summary.json", "wire_ratio"),
        "lab4-hierarchy": ("results/lab4", "blueconnect/summary.json", "gst_ratio")}


def handout_commands(lab):
    text = open(os.path.join(ROOT, "labs", lab, "README.md")).read()
    block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    return [line for line in block.splitlines() if line.strip()]


def run_line(line):
    # the tests already run as root; a student types sudo
    return subprocess.run(["bash", "-c", line.replace("sudo ", "")], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


def test_handouts_have_goals_commands_output_questions_and_a_checker():
    for lab in LABS:
        text = open(os.path.join(ROOT, "labs", lab, "README.md")).read()
        for section in ("## Goals", "## Commands", "## What the output looks like", "## Questions"):
            assert section in text, (lab, section)
        assert handout_commands(lab)[-1].startswith(".venv/bin/python labs/")
        assert os.path.exists(os.path.join(ROOT, "labs", lab, "check.py"))


@pytest.mark.emulation
@pytest.mark.parametrize("lab", list(LABS))
def test_lab_runs_as_written_and_checker_rejects_tampering(lab):
    folder, tamper_file, key = LABS[lab]
    shutil.rmtree(os.path.join(ROOT, folder), ignore_errors=True)
    lines = handout_commands(lab)
    for line in lines[:-1]:
        r = run_line(line)
        assert r.returncode == 0, f"{line}\n{r.stderr[-2000:]}"
    check = run_line(lines[-1])
    assert check.returncode == 0 and " 0 failed" in check.stdout, check.stdout[-3000:]
    path = os.path.join(ROOT, folder, tamper_file)
    data = json.load(open(path))
    data[key] = data[key] * 0.5 if data[key] else 0.123
    json.dump(data, open(path, "w"))
    tampered = run_line(lines[-1])
    assert tampered.returncode == 1 and "FAIL" in tampered.stdout, tampered.stdout[-2000:]
