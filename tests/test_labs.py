"""The labs' commands run as the handouts write them (here two labs with --iters cut to 2; `make benchmark` runs
every lab exactly as written); the checker accepts their output and rejects a tampered results file."""

import json
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


def test_handouts_have_goals_time_hand_in_commands_output_questions_and_a_checker():
    for lab in LABS:
        text = open(os.path.join(ROOT, "labs", lab, "README.md")).read()
        for section in ("## Goals", "## Class time", "## You hand in", "## Commands", "## What the output looks like",
                        "## Questions"):
            assert section in text, (lab, section)
        assert handout_commands(lab)[-1].startswith(".venv/bin/python labs/")
        assert os.path.exists(os.path.join(ROOT, "labs", lab, "check.py"))
        assert "--hand-in" in text and "answers.yaml" in text and "figure.png" in text


def graded_keys(lab):
    """The answers a lab's checker grades ('q3.relay'), read from its source."""
    return set(re.findall(r'"(q\d+\.\w+)"', open(os.path.join(ROOT, "labs", lab, "check.py")).read()))


def test_every_graded_answer_has_a_field_in_the_students_file_and_a_model_answer():
    import yaml
    for lab in LABS:
        template = yaml.safe_load(open(os.path.join(ROOT, "labs", lab, "answers.yaml")))
        fields = {f"{q}.{f}" for q, v in template.items() for f in v if f not in ("why", "caption")}
        assert fields == graded_keys(lab) and fields, lab
        assert all(v is None for q, f in template.items() for k, v in f.items() if k not in ("why", "caption"))
        assert "figure" in template and all("why" in f for q, f in template.items() if q != "figure")
        number = lab[3]
        key = open(os.path.join(ROOT, "labs", "teacher", f"lab{number}.md")).read()
        handout = open(os.path.join(ROOT, "labs", lab, "README.md")).read()
        for question in template:
            if question != "figure":
                assert f"\n{question[1:]}. " in key and f"\n{question[1:]}. " in handout, (lab, question)


def test_the_key_is_kept_apart_from_the_handouts():
    for lab in LABS:
        for name in os.listdir(os.path.join(ROOT, "labs", lab)):
            assert "solution" not in name and "key" not in name, (lab, name)
    assert os.path.exists(os.path.join(ROOT, "labs", "teacher", "README.md"))


def test_the_plan_lab_takes_the_solution_and_rejects_the_handed_out_plan_and_a_wrong_one(tmp_path):
    r = run_lab("lab6-write-a-plan")
    assert r["failed_command"] is None and r["checker_passes"], r.get("checker_output")
    assert r["checker_rejects_tampering"] and r["answers_pass"] and r["wrong_answer_rejected"]
    assert r["graded_answers"] == 3
    wrong = tmp_path / "my_plan.py"
    wrong.write_text("from workloads.plan import REDUCE, Plan, Transfer\n\n"
                     "def plan(ranks):\n"
                     "    up = tuple(Transfer(r, 0, 0, REDUCE) for r in range(1, ranks))\n"
                     "    return Plan('no-broadcast', ranks, 1, ((up,),), tuple(range(ranks)))\n")
    out = subprocess.run([sys.executable, os.path.join(ROOT, "labs", "lab6-write-a-plan", "check.py"), str(tmp_path)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 1 and "FAIL 2 ranks: AssertionError: no-broadcast: rank 1 element 0" in out.stdout


def test_the_capstone_checker_reads_the_write_up_against_the_students_own_numbers(tmp_path):
    from handouts import WRITEUP_FILLER
    config = tmp_path / "claim.yaml"
    config.write_text('name: claim\ndefaults: {model: "mlp:1MB", bw: 100, iters: 3}\nruns:\n'
                      '  - {label: ring, topo: "star:8", algo: ring, mode: simulate}\n'
                      'paper:\n  source: "a test"\n  text: bml\n  claims:\n'
                      '    - {what: "ring: GST / theory", row: ring, metric: gst_ratio, paper: 1.0, evidence: model,'
                      ' from: "sec. 2", quote: "GST for P2P based PS algorithm in Fat-Tree is 2∗(N"}\n')
    folder = tmp_path / "lab7"
    r = subprocess.run([sys.executable, "-m", "emulation.commands.cli", "compare", str(config), "--out",
                        str(folder / "reproduction")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    row = json.load(open(folder / "reproduction" / "comparison.json"))[0]
    sections = ["The claim", "How we reproduced it", "What we found", "Where we differ and why", "What could mislead"]
    body = "".join(f"## {name}\n\n{WRITEUP_FILLER * 3}\n\n" for name in sections)
    check = [sys.executable, os.path.join(ROOT, "labs", "lab7-capstone", "check.py"), str(folder)]
    (folder / "writeup.md").write_text(body + f"GST {row['gst_median_s']:.4g} s, theory {row['gst_theory_s']:.4g} s.")
    good = subprocess.run(check, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert good.returncode == 0, good.stdout
    (folder / "writeup.md").write_text(body + "GST 123.4 s, theory 567.8 s.")  # numbers not in the results
    made_up = subprocess.run(check, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert made_up.returncode == 1 and "0 numbers from your results" in made_up.stdout
    (folder / "writeup.md").write_text(f"GST {row['gst_median_s']:.4g} s, theory {row['gst_theory_s']:.4g} s.")
    short = subprocess.run(check, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert short.returncode == 1 and "a section '## The claim'" in short.stdout and "at least 300" in short.stdout


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
@pytest.mark.benchmark  # 38 s: make benchmark runs it beside every lab as written (labs/handouts.py)
@pytest.mark.parametrize("lab", SUITE_LABS)
def test_lab_runs_and_checker_rejects_tampering(lab):
    r = run_lab(lab, SUITE_ITERS)
    assert r["failed_command"] is None, f"{r['failed_command']}\n{r.get('error')}"
    assert r["checker_passes"], r["checker_output"]
    assert r["checker_rejects_tampering"]
    assert r["graded_answers"] >= 4 and r["answers_pass"], r["answers_output"]
    assert r["wrong_answer_rejected"]


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


def test_a_slower_machine_dilates_only_the_emulated_runs_and_calibration():
    written, dilated = handout_commands("lab5-latency", 2), handout_commands("lab5-latency", 2, 10)
    changed = [(a, b) for a, b in zip(written, dilated) if a != b]
    assert len(changed) == 3  # the calibration and the two runs; theory, timeline and the checker stay as written
    assert all(b.replace("--dilation 10 ", "") == a for a, b in changed)
    assert all(re.match(r"sudo \S+dmlbed (run|calibrate) --dilation 10 ", b) for _, b in changed)
