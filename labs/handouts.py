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

# lab -> (results folder, a results file to tamper with, the key to change in it)
LABS = {"lab1-topologies": ("results/lab1", "bcube-net.json", "fidelity_min"),
        "lab2-gradient-sync": ("results/lab2", "bml/summary.json", "gst_median_s"),
        "lab3-compression": ("results/lab3", "ps-terngrad/summary.json", "wire_ratio"),
        "lab4-hierarchy": ("results/lab4", "blueconnect/summary.json", "gst_ratio"),
        "lab5-latency": ("results/lab5", "bml-400KB/summary.json", "gst_theory_calibrated_s")}


def handout_commands(lab: str, iters: Optional[int] = None) -> List[str]:
    """The handout's command block, one command per line (with `--iters N` replaced when iters is given)."""
    text = open(os.path.join(ROOT, "labs", lab, "README.md")).read()
    block = re.search(r"```sh\n(.*?)```", text, re.S).group(1)
    lines = [line for line in block.splitlines() if line.strip()]
    if iters is not None:
        lines = [re.sub(r"--iters \d+", f"--iters {iters}", line) for line in lines]
    return lines


def run_line(line: str) -> subprocess.CompletedProcess:
    """Run one handout line from the project folder (as root already, so without the student's sudo)."""
    return subprocess.run(["bash", "-c", line.replace("sudo ", "")], cwd=ROOT, capture_output=True, text=True,
                          timeout=900)


def run_lab(lab: str, iters: Optional[int] = None) -> Dict[str, object]:
    """Every command, the checker on the results, the checker on a tampered copy; what happened and how long."""
    folder, tamper_file, key = LABS[lab]
    started = time.time()
    shutil.rmtree(os.path.join(ROOT, folder), ignore_errors=True)
    lines = handout_commands(lab, iters)
    result: Dict[str, object] = {"lab": lab, "iters": iters or "as written", "failed_command": None}
    for line in lines[:-1]:
        r = run_line(line)
        if r.returncode != 0:
            result.update(failed_command=line, error=r.stderr[-2000:], duration_s=time.time() - started)
            return result
    check = run_line(lines[-1])
    result["checker_passes"] = check.returncode == 0 and " 0 failed" in check.stdout
    result["checker_output"] = check.stdout[-3000:]
    path = os.path.join(ROOT, folder, tamper_file)
    with open(path) as f:
        data = json.load(f)
    data[key] = data[key] * 0.5 if data[key] else 0.123
    with open(path, "w") as f:
        json.dump(data, f)
    tampered = run_line(lines[-1])
    result["checker_rejects_tampering"] = tampered.returncode == 1 and "FAIL" in tampered.stdout
    result["duration_s"] = round(time.time() - started, 1)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, help="replace every --iters N in the handouts (default: as written)")
    ap.add_argument("--only", help="comma-separated labs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    labs = args.only.split(",") if args.only else list(LABS)
    unknown = [lab for lab in labs if lab not in LABS]
    if unknown:
        print(f"handouts: unknown lab {unknown[0]}: valid are {', '.join(LABS)}", file=sys.stderr)
        return 2
    results = [run_lab(lab, args.iters) for lab in labs]
    ok = all(r["failed_command"] is None and r["checker_passes"] and r["checker_rejects_tampering"]
             for r in results)
    if args.json:
        print(json.dumps({"ok": ok, "labs": results}, indent=1))
    else:
        for r in results:
            state = (f"command failed: {r['failed_command']}" if r["failed_command"] else
                     f"checker {'passes' if r['checker_passes'] else 'FAILS'}, tampering "
                     f"{'rejected' if r['checker_rejects_tampering'] else 'NOT rejected'}")
            print(f"{r['lab']}: {state} ({r['duration_s']} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
