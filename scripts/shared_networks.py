"""Shared and uneven networks, measured three ways: each case emulated, simulated and in closed form, with its target;
JSON report, exit 1 when a target is missed. The cases so far are the stragglers of issue 37 (BSP under exponential
compute at 16 and 8 ranks, a persistent slow rank).

Usage: .venv/bin/python scripts/shared_networks.py [--out results/shared] [--quick] [--only KEY,...]
"""

import argparse
import json
import os
import subprocess
import sys
import time

from emulation.run.provenance import provenance

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# negligible communication: a 64 KB model at 1 Gbit/s synchronizes in about a millisecond of link time
NEGLIGIBLE = ("--algo", "ring", "--model", "mlp:64KB", "--bw", "1000")
WORKERS = ("--batch", "8")  # a small real compute, below the smallest draws
CASES = {  # key: (topology, iterations, extra options, what is checked)
    "exp-16": ("star:16", 200, ("--compute-time", "exp:0.2"), "mean"),
    "exp-8": ("star:8", 200, ("--compute-time", "exp:0.2"), "mean"),
    "slow-rank": ("star:8", 20, ("--compute-time", "0.2", "--slow", "h3:2x"), "slow"),
}
MEAN_TOLERANCE = 0.10    # emulated mean iteration against the closed form (H_n x mean + GST)
MODEL_TOLERANCE = 0.05   # simulated mean iteration against the closed form
SLOW_SHARE = 0.90        # a persistent slow rank is the one waited for in at least this share of iterations


def dmlbed(*args, timeout=1800) -> dict:
    """One `dmlbed ... --json` as a user runs it: its summary, or {'error': ...}."""
    r = subprocess.run([sys.executable, "-m", "emulation.commands.cli", *args, "--json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0 or not r.stdout.strip().startswith("{"):
        return {"error": (r.stderr.strip().splitlines() or ["no output"])[-1], "returncode": r.returncode}
    return json.loads(r.stdout)


def case(key: str, out: str, iterations: int) -> dict:
    """One case three ways, and its verdicts."""
    topo, _, extra, check = CASES[key]
    common = ("--topo", topo, *NEGLIGIBLE, *extra, "--iters", str(iterations))
    t0 = time.time()
    theory = dmlbed("theory", *common)
    simulated = dmlbed("simulate", *common, "--out", os.path.join(out, key, "simulate"), "--force")
    emulated = dmlbed("run", *common, *WORKERS, "--out", os.path.join(out, key, "emulate"), "--force", "--wait")
    row = {"case": key, "topology": topo, "options": list(extra), "iterations": iterations,
           "seconds": round(time.time() - t0, 1)}
    for mode, s in (("theory", theory), ("simulate", simulated), ("emulate", emulated)):
        row[mode] = {k: s.get(k) for k in ("iteration_mean_s", "iteration_median_s", "gst_median_s",
                                           "compute_median_s", "correct", "error")}
        row[mode]["fidelity"] = (s.get("fidelity") or {}).get("verdict")
        row[mode]["stragglers"] = {k: (s.get("stragglers") or {}).get(k)
                                   for k in ("most_waited_for", "most_waited_for_share")}
    if "error" in emulated or "error" in theory or "error" in simulated:
        row["ok"] = False
        return row
    mean_theory = theory["iteration_mean_s"]
    row["emulate_over_theory"] = emulated["iteration_mean_s"] / mean_theory
    row["simulate_over_theory"] = simulated["iteration_mean_s"] / mean_theory
    row["theory_formula"] = theory["compute"]["formula"]
    ok = emulated["correct"] is True and abs(row["simulate_over_theory"] - 1) <= MODEL_TOLERANCE
    if check == "mean":
        ok = ok and abs(row["emulate_over_theory"] - 1) <= MEAN_TOLERANCE
    else:
        slow_host = extra[extra.index("--slow") + 1].split(":")[0]
        for mode in (simulated, emulated):
            ok = ok and mode["stragglers"]["most_waited_for"] == slow_host and \
                mode["stragglers"]["most_waited_for_share"] >= SLOW_SHARE
    row["ok"] = ok
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/shared")
    ap.add_argument("--quick", action="store_true", help="20 iterations per case (a smoke test, not the targets)")
    ap.add_argument("--only", help=f"comma-separated cases: {', '.join(CASES)}")
    args = ap.parse_args()
    keys = args.only.split(",") if args.only else list(CASES)
    unknown = [k for k in keys if k not in CASES]
    if unknown:
        print(f"shared_networks: unknown case {unknown[0]}: valid are {', '.join(CASES)}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for key in keys:
        rows.append(case(key, args.out, 20 if args.quick else CASES[key][1]))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    report = {"provenance": provenance(), "targets": {"emulated_mean_within": MEAN_TOLERANCE,
                                                      "simulated_mean_within": MODEL_TOLERANCE,
                                                      "slow_rank_share_at_least": SLOW_SHARE},
              "cases": rows, "ok": all(r["ok"] for r in rows)}
    with open(os.path.join(args.out, "shared.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
