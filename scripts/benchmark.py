"""Issue-3 benchmark: BML vs PS (LeNet-5, 100 Mbit/s), ring and gloo on star:9; checks the speed targets.

Targets live here, not in the tests: a busy 2-core machine may miss them and the report says so.
Usage: .venv/bin/python scripts/benchmark.py [--out results/benchmark] [--iters 12] [--bw 100]
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from emulation.orchestration.experiment import RunConfig, run  # noqa: E402

TARGETS = {"bml_gst_ratio_max": 1.15, "ps_gst_ratio_max": 1.15, "bml_over_ps_gst": (0.45, 0.6)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="results/benchmark")
    ap.add_argument("--iters", type=int, default=12)
    ap.add_argument("--bw", default="100")
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    runs = {"bml": ("bcube:3,2", "bml"), "ps": ("star:9", "ps"), "ring": ("star:9", "ring"),
            "gloo": ("star:9", "gloo")}
    summaries = {}
    for key, (topo, algo) in runs.items():
        cfg = RunConfig(topology=topo, algo=algo, model="lenet5", batch=args.batch, iters=args.iters, bw=args.bw,
                        out=os.path.join(args.out, key))
        summaries[key] = run(cfg, log=lambda m: print(f"[benchmark] {m}", file=sys.stderr), progress=True)
    bml, ps = summaries["bml"], summaries["ps"]
    report = {
        "bw_mbps": args.bw, "batch": args.batch, "iterations": args.iters,
        "gst_median_s": {k: s["gst_median_s"] for k, s in summaries.items()},
        "gst_theory_s": {k: s["gst_theory_s"] for k, s in summaries.items()},
        "gst_ratio": {k: s["gst_ratio"] for k, s in summaries.items()},
        "correct": {k: s["correct"] for k, s in summaries.items()},
        "bml_over_ps_gst": bml["gst_median_s"] / ps["gst_median_s"],
        "bml_jct_reduction_vs_ps": 1 - bml["jct_s"] / ps["jct_s"],
        "ring_over_gloo_gst": summaries["ring"]["gst_median_s"] / summaries["gloo"]["gst_median_s"],
    }
    lo, hi = TARGETS["bml_over_ps_gst"]
    report["targets"] = {
        "bml_gst_ratio<=1.15": bml["gst_ratio"] <= TARGETS["bml_gst_ratio_max"],
        "ps_gst_ratio<=1.15": ps["gst_ratio"] <= TARGETS["ps_gst_ratio_max"],
        "0.45<=bml/ps<=0.6": lo <= report["bml_over_ps_gst"] <= hi,
        "all_correct": all(report["correct"].values()),
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "report.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
