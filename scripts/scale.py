"""Simulation at scale: each case in its own process, timed, with its peak memory; JSON report, exit 1 when
a case misses its limit (60 s and 4 GiB by default, the targets of the 1024-server cases).

Usage: .venv/bin/python scripts/scale.py [--quick] [--out results/scale]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from emulation.run.provenance import provenance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FULL = [("bcube:32,2", "bml"), ("bcube:32,2", "ps"), ("fattree:16", "ps"), ("fattree:16", "hier")]
QUICK = [("bcube:8,2", "bml"), ("fattree:8", "ps"), ("fattree:8", "hier")]


def run_case(topo: str, algo: str, out: str) -> dict:
    """One `dmlbed simulate` in a child process: its summary, wall time and peak resident memory."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.time()
    proc = subprocess.run([sys.executable, "-m", "emulation.commands.cli", "simulate", "--topo", topo, "--algo",
                           algo, "--model", "lenet5", "--bw", "1000", "--json", "--force", "--out", out],
                          capture_output=True, text=True, cwd=ROOT)
    wall = time.time() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    row = {"topology": topo, "algo": algo, "wall_s": wall, "returncode": proc.returncode,
           "peak_rss_mib": peak / 1024 if peak > before else None}
    if proc.returncode == 0:
        s = json.loads(proc.stdout)
        row.update(ranks=s["ranks"], messages=s["messages"], gst_s=s["gst_median_s"], gst_ratio=s["gst_ratio"])
    else:
        row["error"] = proc.stderr.strip().splitlines()[-1:]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="the smaller cases (the test suite's form)")
    ap.add_argument("--out", default="results/scale")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--mib", type=float, default=4096.0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for topo, algo in QUICK if args.quick else FULL:
        rows.append(run_case(topo, algo, os.path.join(args.out, f"{algo}-{topo.replace(':', '').replace(',', '_')}")))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    # ru_maxrss of children is the largest child so far: a case's own peak only when it is the new largest
    ok = all(r["returncode"] == 0 and r["wall_s"] < args.seconds and (r["peak_rss_mib"] or 0) < args.mib
             for r in rows)
    report = {"provenance": provenance(), "cases": rows, "limits": {"seconds": args.seconds, "mib": args.mib}, "ok": ok}
    with open(os.path.join(args.out, "scale.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
