"""The flow model's results on a set of cases, as a reference file: tests/test_flow_reference.py checks that
the model still gives them (a faster model must give the same results). The cases are the reference file's own
(its keys: `dmlbed simulate` arguments, or "jobs " and `dmlbed jobs --mode simulate`'s); --add ARGS writes one
more (with --only-added, only it). The scale file (--scale: 512 to 1,024 hosts, issue 61) is written by the event
model (--flow-method events: the model before the shortcuts) and answered by whatever the model chooses now.

Usage: .venv/bin/python scripts/flow_reference.py [--scale] [--add "--topo star:8 --algo ring"] [--out FILE]
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

from emulation.results.provenance import provenance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

EVENTS = " --flow-method events"
FIELDS = ("gst_median_s", "iteration_median_s", "jct_s", "messages", "rank_done_s", "bytes_by_level",
          "link_utilization")


JOBS = "jobs "  # a case of `dmlbed jobs --mode simulate` (the rest: its arguments), else of `dmlbed simulate`
JOB_FIELDS = ("alone", "together", "slowdown", "overlap")


def run(args: str) -> dict:
    """One case's result fields: from `dmlbed simulate --json`, or each job's from `dmlbed jobs --mode simulate
    --json` (several jobs in one flow model)."""
    jobs = args.startswith(JOBS)
    command = ["jobs", "--mode", "simulate", *shlex.split(args[len(JOBS):])] if jobs else ["simulate", *args.split()]
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run([sys.executable, "-m", "emulation.commands.cli", *command, "--json", "--out", out,
                               "--force"], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise SystemExit(f"{args}: {proc.stderr.strip().splitlines()[-1]}")
    result = json.loads(proc.stdout)
    if jobs:
        return {job["name"]: {k: job.get(k) for k in JOB_FIELDS} for job in result["jobs"]}
    return {k: result.get(k) for k in FIELDS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=None, help="default: tests/data/flow_reference.json (with --scale: "
                                                "flow_reference_scale.json)")
    ap.add_argument("--scale", action="store_true", help="the cases at 512 to 1,024 hosts, by the event model")
    ap.add_argument("--add", action="append", default=[], metavar="ARGS", help="one more case (its simulate "
                    "arguments), repeatable")
    ap.add_argument("--only-added", action="store_true", help="run only the --add cases and keep the others' results "
                    "(the added ones' provenance kept beside the file's)")
    args = ap.parse_args()
    name = "flow_reference_scale.json" if args.scale else "flow_reference.json"
    path = os.path.join(ROOT, "tests", "data", name)
    with open(path) as f:
        old = json.load(f)
    args.out = args.out or path
    if args.only_added:
        data, todo = {**old, "cases": dict(old["cases"])}, args.add
        data.setdefault("added", {}).update({c: provenance() for c in args.add})
    else:
        data, todo = {"provenance": provenance(), "cases": {}}, list(dict.fromkeys(list(old["cases"]) + args.add))
    data["cases"].update({c: run(c + (EVENTS if args.scale else "")) for c in todo})
    with open(args.out, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
