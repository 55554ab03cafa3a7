"""Two jobs sharing a network, measured three ways (emulated, simulated and in closed form), each job's compute set
from its communication time measured alone first (so the cases cannot be a static config yet; stragglers, uneven
links and background traffic are configs/bench/shared.yaml's); JSON report, exit 1 when a target is missed.

Usage: .venv/bin/python scripts/shared_networks.py [--out results/shared] [--quick] [--only KEY,...]
"""

import argparse
import json
import os
import sys
import time

from case_runs import dmlbed, write_report


WORKERS = ("--batch", "8")  # a small real compute
# Two 4-rank rings on tree:4,2 (two edge switches under one root, every link 100 Mbit/s), each job's compute equal to
# its communication time alone (measured first: its iteration less its compute, the time its synchronization holds
# the network from the first rank's first byte to the last rank's last; its GST, from the last rank's start, is
# 5-10% shorter, and a compute equal to the GST leaves two offset jobs no room at all): in phase their rings share
# both uplinks; offset by half an iteration they do not meet; placed apart (one edge switch each) they share no link.
# A 4 MB model keeps the GST bandwidth-bound (a 1 MB one loses a fifth of it to the ring steps' latency through the
# emulated switches and to the steps falling out of step). Ten iterations (jobs.json has the overlap per iteration).
# An offset left alone at compute = communication has no slack: the jobs drift into phase within a few iterations,
# which the fluid flow model (no jitter, no loss where they meet) cannot show; so that case is measured and reported
# but not held to the range, and the same offset is measured held (a scheduler's time shift kept at every iteration),
# held apart (the shift widened where the synchronizations would meet) and left alone with 20% more compute (slack).
JOBS_NET = ("--topo", "tree:4,2", "--algo", "ring", "--model", "mlp:4MB", "--bw", "100")
CROSSING = ("--job", "name=a hosts=h0,h1,h4,h5", "--job", "name=b hosts=h2,h3,h6,h7")
OFFSET = ("--job", "name=a hosts=h0,h1,h4,h5", "--job", "name=b hosts=h2,h3,h6,h7 start=0.5it")
HELD = ("--job", "name=a hosts=h0,h1,h4,h5", "--job", "name=b hosts=h2,h3,h6,h7 start=0.5it hold=yes")
APART = ("--job", "name=a hosts=h0,h1,h4,h5", "--job", "name=b hosts=h2,h3,h6,h7 start=0.5it hold=apart")
ZERO_SLACK = ("no slack at compute = communication: left alone, offset jobs drift into phase (the fluid flow model "
              "keeps them apart); reported, not held to the range")
KNIFE_EDGE = ("no slack at compute = communication: the offset held exactly leaves the two synchronizations a few ms "
              "apart or a few ms over each other, as the communication time measured alone comes out, and the "
              "slowdown with it (run the case twice to see); reported, not held to the range (held apart is)")
JOB_CASES = {  # key: (jobs, iterations, emulated slowdown range, compute over communication, why not held to it)
    "jobs-in-phase": (CROSSING, 10, (1.4, 1.6), 1.0, None),
    "jobs-offset": (OFFSET, 10, (0.0, 1.15), 1.0, ZERO_SLACK),
    "jobs-offset-held": (HELD, 10, (0.0, 1.15), 1.0, KNIFE_EDGE),
    "jobs-offset-apart": (APART, 10, (0.0, 1.15), 1.0, None),
    "jobs-offset-slack": (OFFSET, 10, (0.0, 1.15), 1.2, None),
    "jobs-apart": (("--job", "name=a hosts=h0..h3", "--job", "name=b hosts=h4..h7"), 10, (0.0, 1.05), 1.0, None),
}
SIMULATED_WITHIN = 0.10  # simulated GST of a ratio case against the emulated one


def job_communication(out: str) -> float:
    """One job's communication time alone on its hosts, emulated (its iteration less its compute, medians): the
    compute time the jobs cases give every job (times a case's factor)."""
    alone = dmlbed("run", *JOBS_NET, "--hosts", "h0,h1,h4,h5", "--iters", "10", *WORKERS, "--out",
                   os.path.join(out, "jobs-compute"), "--force", "--wait")
    if alone.get("error"):
        raise RuntimeError(f"measuring the jobs' communication time: {alone['error']}")
    return round(alone["iteration_median_s"] - alone["compute_median_s"], 4)


def jobs_case(key: str, out: str, communication_s: float, quick: bool) -> dict:
    """Two jobs sharing the network, emulated, simulated and in theory: each job's slowdown against itself alone."""
    jobs, iterations, (low, high), factor, not_held = JOB_CASES[key]
    iterations = min(iterations, 10) if quick else iterations
    compute_s = round(communication_s * factor, 4)
    common = ("jobs", *JOBS_NET, "--compute-time", str(compute_s), "--iters", str(iterations), *jobs)
    t0 = time.time()
    runs = {"theory": dmlbed(*common, "--mode", "theory"),
            "simulate": dmlbed(*common, "--mode", "simulate", "--out", os.path.join(out, key, "simulate"), "--force"),
            "emulate": dmlbed(*common, *WORKERS, "--mode", "emulate", "--out", os.path.join(out, key, "emulate"),
                              "--force", "--wait", timeout=3600)}
    row = {"case": key, "topology": JOBS_NET[1], "options": list(JOBS_NET[2:]) + list(jobs), "iterations": iterations,
           "communication_s": communication_s, "compute_s": compute_s, "seconds": round(time.time() - t0, 1),
           "range": [low, high]}
    if any(r.get("error") for r in runs.values()):
        row.update(ok=False, errors={m: r.get("error") for m, r in runs.items() if r.get("error")})
        return row
    row["slowdown"] = {m: {j["name"]: j["slowdown"] for j in r["jobs"]} for m, r in runs.items()}
    row["overlap_median"] = {m: {j["name"]: j.get("overlap_median") for j in r["jobs"]} for m in ("simulate", "emulate")
                             for r in [runs[m]]}
    row["overlap"] = {j["name"]: j.get("overlap") for j in runs["emulate"]["jobs"]}  # per iteration: the drift
    row["verdicts"] = {j["name"]: (j["together"].get("fidelity") or {}).get("verdict") for j in runs["emulate"]["jobs"]}
    row["formulas"] = {j["name"]: j["together"].get("formula") for j in runs["theory"]["jobs"]}
    emulated = row["slowdown"]["emulate"]
    row["simulate_over_emulate"] = {n: row["slowdown"]["simulate"][n] / emulated[n] for n in emulated}
    correct = all(j["alone"]["correct"] and j["together"]["correct"] for j in runs["emulate"]["jobs"])
    row["met"] = all(low <= v <= high for v in emulated.values()) and \
        all(abs(v - 1) <= SIMULATED_WITHIN for v in row["simulate_over_emulate"].values())
    if not_held:
        row["not_held_to_range"] = not_held
    row["ok"] = correct and (row["met"] or bool(not_held))
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/shared")
    ap.add_argument("--quick", action="store_true", help="20 iterations per case (a smoke test, not the targets)")
    ap.add_argument("--only", help=f"comma-separated cases: {', '.join(JOB_CASES)}")
    args = ap.parse_args()
    every = list(JOB_CASES)
    keys = args.only.split(",") if args.only else every
    unknown = [k for k in keys if k not in every]
    if unknown:
        print(f"shared_networks: unknown case {unknown[0]}: valid are {', '.join(every)}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    rows, communication_s = [], None
    for key in keys:
        communication_s = communication_s or job_communication(args.out)
        rows.append(jobs_case(key, args.out, communication_s, args.quick))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return write_report(os.path.join(args.out, "shared.json"),
                        {"jobs_slowdown": {k: v[2] for k, v in JOB_CASES.items()},
                         "simulated_slowdown_within": SIMULATED_WITHIN}, rows)


if __name__ == "__main__":
    sys.exit(main())
