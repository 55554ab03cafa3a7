"""The flow model's results on a set of cases, as a reference file: tests/test_flow_reference.py checks that
the model still gives them (a faster model must give the same results).

Usage: .venv/bin/python scripts/flow_reference.py [--scale] [--out tests/data/flow_reference.json]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

from emulation.results.provenance import provenance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = [
    "--topo bcube:4,2 --algo bml",
    "--topo bcube:8,2 --algo bml --model alexnet",
    "--topo bcube:3,2 --algo ps",
    "--topo bcube:4,2 --algo blueconnect",
    "--topo fattree:4 --algo ps",
    "--topo fattree:8 --algo ps",
    "--topo fattree:8 --algo hier",
    "--topo fattree:4 --algo ring --ecmp hash",
    "--topo fattree:4 --algo ring --granularity message",
    "--topo star:8 --algo ring --latency 50",
    "--topo star:8 --algo hd --model resnet50",
    "--topo star:6 --algo ps --servers 2 --ps-placement tensor --model alexnet",
    "--topo star:4 --algo ps --codec terngrad",
    "--topo tree:3,2,2 --algo blueconnect",
    "--topo tree:2,4 --algo twolevel",
    "--topo leafspine:4,4,2 --algo ring --bw 100,50",
    "--topo torus:4,4 --algo ring",
    "--topo rail:8,2,1 --algo ring",
    "--topo jellyfish:8,3,2 --algo ring",
    "--topo star:8 --algo pflow --servers 1 --pf-dvf none",
    "--topo fattree:4 --algo ring --background h14-h15:onoff:0.05,0.05 --hosts h0..h11 --iters 5",
    "--topo fattree:4 --algo ring --event e0_0-a0_0=down@3it --iters 6",
    "--topo star:8 --algo ibatch --servers 1",
    "--topo fattree:4 --algo ring --background h14-h15 --hosts h0..h11",
    "--topo fattree:4 --algo ps --link-rate e0_0-a0_0=30",
    "--topo star:4 --algo ring --overlap --model resnet50",
    "--topo star:4 --algo ring --compute-time exp:0.1 --iters 6 --seed 3",
]
# 512 to 1,024 hosts, written by the event model (--flow-method events: the model before the shortcuts), answered by
# whatever the model chooses now (issue 61)
SCALE_CASES = [
    "--topo leafspine:16,32,8 --algo ring",
    "--topo leafspine:16,32,8 --algo ring --ecmp hash",
    "--topo leafspine:16,32,8 --algo ring --link-rate h100=500",
    "--topo fattree:16 --algo ring",
    "--topo leafspine:16,32,8 --algo hd",
    "--topo leafspine:16,32,8 --algo ps",
    "--topo bcube:8,3 --algo bml",
    "--topo fattree:16 --algo hier",
    "--topo leafspine:16,32,8 --algo moe --model moe:512x64",
    "--topo leafspine:16,32,8 --algo ring --codec terngrad",
    "--topo leafspine:16,32,8 --algo ring --background h256-h31 --share-hosts --hosts h0..h255",
]
EVENTS = " --flow-method events"
FIELDS = ("gst_median_s", "iteration_median_s", "jct_s", "messages", "rank_done_s", "bytes_by_level",
          "link_utilization")


def run(args: str) -> dict:
    """One case's summary fields, from `dmlbed simulate --json`."""
    with tempfile.TemporaryDirectory() as out:
        proc = subprocess.run([sys.executable, "-m", "emulation.commands.cli", "simulate", *args.split(), "--json",
                               "--out", out, "--force"], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise SystemExit(f"{args}: {proc.stderr.strip().splitlines()[-1]}")
    summary = json.loads(proc.stdout)
    return {k: summary.get(k) for k in FIELDS}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default=None, help="default: tests/data/flow_reference.json (with --scale: "
                                                "flow_reference_scale.json)")
    ap.add_argument("--scale", action="store_true", help="the cases at 512 to 1,024 hosts, by the event model")
    args = ap.parse_args()
    name = "flow_reference_scale.json" if args.scale else "flow_reference.json"
    args.out = args.out or os.path.join(ROOT, "tests", "data", name)
    cases = {c: run(c + EVENTS) for c in SCALE_CASES} if args.scale else {c: run(c) for c in CASES}
    with open(args.out, "w") as f:
        json.dump({"provenance": provenance(), "cases": cases}, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
