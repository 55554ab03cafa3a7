"""Run every lab's handout commands as a student would, then its checker, then the checker on a tampered file.

`make benchmark` runs every handout exactly as written; the test suite runs two of them (tests/test_labs.py
SUITE_LABS) with every `--iters N` cut to `--iters 2` (the same commands and checks, minutes fewer). Usage:
    .venv/bin/python labs/handouts.py [--iters N] [--only lab1-topologies,...] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# lab -> (results folder, a results file to tamper with, the key to change in it: 'N.key' in a list; a .py file
# is replaced by the handed-out one)
LABS = {"lab1-topologies": ("results/lab1", "bcube-net.json", "fidelity_min"),
        "lab2-gradient-sync": ("results/lab2", "bml/summary.json", "gst_median_s"),
        "lab3-compression": ("results/lab3", "ps-terngrad/summary.json", "wire_ratio"),
        "lab4-hierarchy": ("results/lab4", "blueconnect/summary.json", "gst_ratio"),
        "lab5-latency": ("results/lab5", "bml-400KB/summary.json", "gst_theory_calibrated_s"),
        "lab6-write-a-plan": ("results/lab6", "my_plan.py", None),
        "lab7-capstone": ("results/lab7", "reproduction/comparison.json", "0.gst_ratio"),
        "lab8-3d-parallelism": ("results/lab8", "1f1b/summary.json", "over_flow_model")}
WRITEUP_FILLER = ("This paragraph stands in for a student's text in the handouts' own run of the lab, written to "
                  "exercise the checker: the sections, the length and the quoted numbers. ")


def student_work(lab: str, folder: str) -> None:
    """What a student adds between the commands and the checker: lab 6's plan (the teacher's solution stands in),
    lab 7's write-up (filler with two numbers from the reproduction)."""
    root = os.path.join(ROOT, folder)
    if lab == "lab6-write-a-plan":
        shutil.copyfile(os.path.join(ROOT, "labs", "teacher", "lab6_solution.py"), os.path.join(root, "my_plan.py"))
    if lab == "lab7-capstone":
        with open(os.path.join(root, "reproduction", "comparison.json")) as f:
            rows = [r for r in json.load(f) if r.get("gst_median_s")]
        numbers = f"GST {rows[0]['gst_median_s']:.4g} s against {rows[0]['gst_theory_s']:.4g} s in theory."
        sections = ["The claim", "How we reproduced it", "What we found", "Where we differ and why",
                    "What could mislead"]
        text = "".join(f"## {name}\n\n{WRITEUP_FILLER * 3}\n\n" for name in sections) + numbers + "\n"
        with open(os.path.join(root, "writeup.md"), "w") as f:
            f.write("# Reproduction\n\n" + text)


def tamper(lab: str, path: str, key: Optional[str]) -> None:
    """Change one number of a results file (a plan: put the handed-out one back)."""
    if path.endswith(".py"):
        shutil.copyfile(os.path.join(ROOT, "labs", lab, os.path.basename(path)), path)
        return
    with open(path) as f:
        data = json.load(f)
    holder, field = data, key
    if "." in key:
        index, field = key.split(".", 1)
        holder = data[int(index)]
    holder[field] = holder[field] * 0.5 if holder[field] else 0.123
    with open(path, "w") as f:
        json.dump(data, f)


DILATED = re.compile(r"^(sudo \S*dmlbed (?:run|calibrate|bench) )")  # the emulated commands that take --dilation


def handout_commands(lab: str, iters: Optional[int] = None, dilation: Optional[float] = None) -> List[str]:
    """The handout's command block, one command per line (with `--iters N` replaced when iters is given; with
    dilation, every emulated run, calibration and benchmark dilated: a machine slower than the handouts assume,
    such as a software-emulated VM)."""
    text = open(os.path.join(ROOT, "labs", lab, "README.md")).read()
    block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    lines = [line for line in block.splitlines() if line.strip()]
    if iters is not None:
        lines = [re.sub(r"--iters \d+", f"--iters {iters}", line) for line in lines]
    if dilation is not None:
        lines = [DILATED.sub(lambda m: f"{m.group(1)}--dilation {dilation:g} ", line) for line in lines]
    return lines


LINE_TIMEOUT_S = [900.0]  # --line-timeout (a software-emulated VM needs more)


SHOWN_KEYS = ("pairs_tested", "pairs_reachable", "unreachable", "packet_in", "packet_in_samples", "verdict", "cause",
              "fidelity_min", "error", "datapath")


def written_json(line: str) -> Optional[dict]:
    """What a failed `... --json > FILE` line wrote, the keys that say why (None without such a file)."""
    m = re.search(r">\s*(\S+\.json)\s*$", line)
    path = os.path.join(ROOT, m.group(1)) if m else None
    if not path or not os.path.isfile(path):
        return None
    try:
        with open(path) as f:
            data = json.load(f)
    except ValueError:
        return None
    shown = {k: data[k] for k in SHOWN_KEYS if k in data}
    for key in ("unreachable", "packet_in_samples"):
        if isinstance(shown.get(key), list):
            shown[key] = shown[key][:5]
    return shown


def run_line(line: str) -> subprocess.CompletedProcess:
    """Run one handout line from the project folder (as root already, so without the student's sudo)."""
    return subprocess.run(["bash", "-c", line.replace("sudo ", "")], cwd=ROOT, capture_output=True, text=True,
                          timeout=LINE_TIMEOUT_S[0])


def run_lab(lab: str, iters: Optional[int] = None, dilation: Optional[float] = None) -> Dict[str, object]:
    """Every command, the checker on the results, the checker on a tampered copy; what happened and how long."""
    folder, tamper_file, key = LABS[lab]
    started = time.time()
    shutil.rmtree(os.path.join(ROOT, folder), ignore_errors=True)
    lines = handout_commands(lab, iters, dilation)
    result: Dict[str, object] = {"lab": lab, "iters": iters or "as written", "dilation": dilation or 1,
                                 "failed_command": None}
    for line in lines[:-1]:
        r = run_line(line)
        if r.returncode != 0:
            result.update(failed_command=line, error=r.stderr[-2000:], exit_code=r.returncode,
                          output=written_json(line), duration_s=time.time() - started)
            return result
    student_work(lab, folder)
    check = run_line(lines[-1])
    result["checker_passes"] = check.returncode == 0 and " 0 failed" in check.stdout
    result["checker_output"] = check.stdout[-3000:]
    result.update(hand_in(lab, folder, lines[-1]))
    tamper(lab, os.path.join(ROOT, folder, tamper_file), key)
    tampered = run_line(lines[-1])
    result["checker_rejects_tampering"] = tampered.returncode == 1 and "FAIL" in tampered.stdout
    result["duration_s"] = round(time.time() - started, 1)
    return result


def key_values(teacher_output: str) -> Dict[str, object]:
    """The graded answers a checker's --teacher prints ('key q1.steps: 4 (within 0%)', "key q4.faster: 'ring'")."""
    out: Dict[str, object] = {}
    for line in teacher_output.splitlines():
        m = re.match(r"key (q\d+\.\w+): (.*)$", line)
        if m:
            text = m.group(2)
            out[m.group(1)] = text[1:-1] if text.startswith("'") else float(text.split()[0])
    return out


def hand_in(lab: str, folder: str, check_line: str) -> Dict[str, object]:
    """A hand-in as a student who answered right makes it (the key's values, a figure), graded; then one value
    changed, which the checker must reject naming it. Both files are removed afterwards."""
    import yaml
    root = os.path.join(ROOT, folder)
    key = key_values(run_line(check_line + " --teacher").stdout)
    with open(os.path.join(ROOT, "labs", lab, "answers.yaml")) as f:
        answers = yaml.safe_load(f)
    why = "every value here follows from the results folder it was measured in"
    for question, fields in answers.items():
        for field in fields:
            fields[field] = key.get(f"{question}.{field}", why)
    answers_path, figure_path = os.path.join(root, "answers.yaml"), os.path.join(root, "figure.png")
    write_figure(figure_path)
    with open(answers_path, "w") as f:
        yaml.safe_dump(answers, f)
    graded = run_line(check_line + " --hand-in")
    first = sorted(key)[0] if key else None
    rejected = False
    if first:
        question, field = first.split(".")
        value = answers[question][field]
        answers[question][field] = "nonsense" if isinstance(value, str) else value * 1.5 + 1
        with open(answers_path, "w") as f:
            yaml.safe_dump(answers, f)
        wrong = run_line(check_line + " --hand-in")
        rejected = wrong.returncode == 1 and f"FAIL {first}:" in wrong.stdout
    os.remove(answers_path)
    os.remove(figure_path)
    return {"graded_answers": len(key), "answers_pass": graded.returncode == 0 and " 0 failed" in graded.stdout,
            "answers_output": graded.stdout[-2000:], "wrong_answer_rejected": rejected}


def write_figure(path: str) -> None:
    """A small PNG (a student's figure stands in)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [0, 1])
    fig.savefig(path)
    plt.close(fig)


def passed(r: Dict[str, object]) -> bool:
    """Whether a lab ran, its checker passed, graded a right hand-in and rejected tampering and a wrong answer."""
    return bool(r["failed_command"] is None and r.get("checker_passes") and r.get("checker_rejects_tampering") and
                r.get("answers_pass") and r.get("wrong_answer_rejected") and r.get("graded_answers"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, help="replace every --iters N in the handouts (default: as written)")
    ap.add_argument("--only", help="comma-separated labs")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--line-timeout", type=float, default=LINE_TIMEOUT_S[0], help="seconds one command may take")
    ap.add_argument("--dilation", type=float, help="dilate every emulated run, calibration and benchmark (a slower "
                                                   "machine than the handouts assume: a software-emulated VM)")
    args = ap.parse_args()
    LINE_TIMEOUT_S[0] = args.line_timeout
    labs = args.only.split(",") if args.only else list(LABS)
    unknown = [lab for lab in labs if lab not in LABS]
    if unknown:
        print(f"handouts: unknown lab {unknown[0]}: valid are {', '.join(LABS)}", file=sys.stderr)
        return 2
    results = [run_lab(lab, args.iters, args.dilation) for lab in labs]
    ok = all(passed(r) for r in results)
    if args.json:
        print(json.dumps({"ok": ok, "labs": results}, indent=1))
    else:
        for r in results:
            state = (f"command failed: {r['failed_command']}" if r["failed_command"] else
                     f"checker {'passes' if r['checker_passes'] else 'FAILS'}, tampering "
                     f"{'rejected' if r['checker_rejects_tampering'] else 'NOT rejected'}, "
                     f"{r['graded_answers']} graded answers {'pass' if r['answers_pass'] else 'FAIL'}, a wrong one "
                     f"{'rejected' if r['wrong_answer_rejected'] else 'NOT rejected'}")
            print(f"{r['lab']}: {state} ({r['duration_s']} s)")
            if not passed(r) and not r["failed_command"]:
                print(r.get("answers_output") or r.get("checker_output"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
