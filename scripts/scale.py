"""Simulation at scale: each case in its own process, timed (median of --repeats), with its own peak memory
(the child's, from wait4); JSON report, exit 1 when a case misses its target (issues 39 and 61: 1,024 servers
within 5 s and 1 GB; 10,000 servers within 60 s and 8 GiB, the ring within 1% of its closed form at the links'
goodput; 100,000 GPUs within 10 min and 16 GiB). Each case says how the flow model answered it.

Usage: .venv/bin/python scripts/scale.py [--quick] [--repeats 3] [--out results/scale]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from emulation.results.provenance import provenance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SERVERS_1K = {"seconds": 5.0, "mb": 1000.0}
SERVERS_10K = {"seconds": 60.0, "mb": 8192.0}
RING_10K = dict(SERVERS_10K, closed_form=0.01)  # non-blocking for a ring: GST within 1% of 2(N-1)/N TF at goodput
GPUS_100K = {"seconds": 600.0, "mb": 16384.0}
RECORDED = {"seconds": None, "mb": None}  # answered, its time recorded (no target)
FULL = [("bcube:32,2", "bml", SERVERS_1K, ()), ("fattree:16", "ps", SERVERS_1K, ()),
        ("bcube:32,2", "ps", SERVERS_1K, ()), ("fattree:16", "hier", SERVERS_1K, ()),
        ("fattree:16", "ring", SERVERS_1K, ()),
        ("leafspine:250,40,16", "ring", RING_10K, ()), ("fattree:34", "ps", SERVERS_10K, ()),
        ("leafspine:250,40,16", "ring", RECORDED, ("--link-rate", "h4999=500")),
        ("leafspine:250,40,16", "ring", RECORDED, ("--ecmp", "hash")),
        ("fattree:74", "ring", GPUS_100K, ()), ("fattree:74", "hier", GPUS_100K, ()),
        ("rail:12500,8", "ring", GPUS_100K, ()), ("rail:12500,8", "hier", GPUS_100K, ())]
QUICK = [("bcube:8,2", "bml", SERVERS_1K, ()), ("fattree:8", "ps", SERVERS_1K, ()),
         ("fattree:8", "hier", SERVERS_1K, ())]


def run_case(topo: str, algo: str, target: dict, extra, out: str, repeats: int) -> dict:
    """A case run `repeats` times (once when it fails): median wall time, largest peak memory, its result."""
    runs = []
    for _ in range(repeats):
        runs.append(run_child(topo, algo, extra, out))
        if runs[-1]["returncode"] != 0:
            break
    last = runs[-1]
    row = {"topology": topo, "algo": algo, "flags": " ".join(extra), "returncode": last["returncode"],
           "repeats": len(runs),
           "wall_s": statistics.median(r["wall_s"] for r in runs), "wall_all_s": [r["wall_s"] for r in runs],
           "peak_rss_mb": max(r["peak_mb"] for r in runs), "target_s": target["seconds"], "target_mb": target["mb"]}
    if last["returncode"] == 0:
        s = json.loads(last["stdout"])
        row.update(ranks=s["ranks"], messages=s["messages"], gst_s=s["gst_median_s"], gst_ratio=s["gst_ratio"],
                   answered=s.get("answered"),
                   closed_form_at_goodput=s["gst_ratio"] * s["model_settings"]["goodput"])
    else:
        row["error"] = last["stderr"].strip().splitlines()[-1:]
    row["target_closed_form"] = target.get("closed_form")
    row["met"] = last["returncode"] == 0 and (target["seconds"] is None or row["wall_s"] <= target["seconds"]) and \
        (target["mb"] is None or row["peak_rss_mb"] <= target["mb"]) and \
        (target.get("closed_form") is None or abs(row["closed_form_at_goodput"] - 1) <= target["closed_form"])
    return row


def run_child(topo: str, algo: str, extra, out: str) -> dict:
    """One `dmlbed simulate` in a child process: its exit, wall time, output and its own peak memory (wait4 reaps
    it with its resource usage)."""
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "emulation.commands.cli", "simulate", "--topo", topo, "--algo",
                             algo, "--model", "lenet5", "--bw", "1000", *extra, "--json", "--force", "--no-report",
                             "--out", out],
                            stdout=open(out + ".stdout", "w"), stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    stderr = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.time() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    with open(out + ".stdout") as f:
        stdout = f.read()
    os.remove(out + ".stdout")
    return {"returncode": proc.returncode, "wall_s": wall, "stdout": stdout, "stderr": stderr,
            "peak_mb": usage.ru_maxrss * 1024 / 1e6}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="the smaller cases (the test suite's form)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per case (the median's wall time is reported)")
    ap.add_argument("--out", default="results/scale")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for n, (topo, algo, target, extra) in enumerate(QUICK if args.quick else FULL):
        case_dir = os.path.join(args.out, f"{n:02d}-{algo}-{topo.replace(':', '').replace(',', '_')}")
        rows.append(run_case(topo, algo, target, extra, case_dir, 1 if args.quick else args.repeats))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    report = {"provenance": provenance(), "cases": rows, "repeats": args.repeats,
              "ok": all(r["met"] for r in rows)}
    with open(os.path.join(args.out, "scale.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
