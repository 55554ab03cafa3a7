"""Shared and uneven networks, measured three ways: each case emulated, simulated and in closed form, with its target;
JSON report, exit 1 when a target is missed. The cases so far are issue 37's stragglers (BSP under exponential
compute at 16 and 8 ranks, a persistent slow rank), uneven links (one host's link at half the rate) and background
traffic (a saturating flow along a ring's transfer), and two jobs sharing a network (in phase, offset by half an
iteration, placed apart).

Usage: .venv/bin/python scripts/shared_networks.py [--out results/shared] [--quick] [--only KEY,...]
"""

import argparse
import csv
import json
import os
import sys
import time

from case_runs import dmlbed, write_report
from emulation.results.iterations import WARMUP


# Stragglers: a model whose synchronization is mostly bandwidth (1 MB at 100 Mbit/s: 0.15 s of link time at 8 ranks,
# against about 3 ms per ring step that the emulated switch adds), so the verdict judges links, not only latency;
# BSP's wait for the slowest rank is the mean iteration less the GST, iteration by iteration. A 4 MB model adds
# ranks' CPU work on 2 cores (reducing and copying its chunks) that starts the slowest rank's iteration up to 55 ms
# after the first rank's at 8 ranks: 10.2% over the closed form (measured 2026-11-26), the emulator's, not BSP's.
STRAGGLERS = ("--algo", "ring", "--model", "mlp:1MB", "--bw", "100")
# Uneven links and background traffic: the ring's GST against the same run with every link at its level's rate and
# nothing beside it. The flow h0-h1 takes the path of the ring's h0->h1 transfer: max-min leaves the ring half of it.
SLOW_LINK = ("--algo", "ring", "--model", "mlp:6MB", "--bw", "100")
BESIDE = ("--algo", "ring", "--model", "mlp:4MB", "--bw", "100")
WORKERS = ("--batch", "8")  # a small real compute, below the smallest draws
CASES = {  # key: (topology, iterations, common options, the case's own options, what is checked)
    "exp-16": ("star:16", 200, STRAGGLERS, ("--compute-time", "exp:0.2"), "wait"),
    "exp-8": ("star:8", 200, STRAGGLERS, ("--compute-time", "exp:0.2"), "wait"),
    "slow-rank": ("star:8", 20, STRAGGLERS, ("--compute-time", "0.2", "--slow", "h3:2x"), "slow"),
    "slow-link": ("star:8", 10, SLOW_LINK, ("--link-rate", "h3=50"), "ratio"),
    "background": ("star:4", 20, BESIDE, ("--background", "h0-h1", "--share-hosts"), "ratio"),
}
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
WAIT_TOLERANCE = 0.10    # emulated wait for the slowest rank against the closed form (H_n x mean)
MODEL_TOLERANCE = 0.05   # simulated wait against the closed form
SLOW_SHARE = 0.90        # a persistent slow rank is the one waited for in at least this share of iterations
RATIO_RANGE = (1.8, 2.2)  # a link at half rate, or a saturating flow beside the ring: GST over the uniform run's
SIMULATED_WITHIN = 0.10  # simulated GST of a ratio case against the emulated one


def three_ways(common, out: str, label: str) -> dict:
    """theory, simulate and emulate of one configuration."""
    return {"theory": dmlbed("theory", *common),
            "simulate": dmlbed("simulate", *common, "--out", os.path.join(out, label, "simulate"), "--force"),
            "emulate": dmlbed("run", *common, *WORKERS, "--out", os.path.join(out, label, "emulate"), "--force",
                              "--wait")}


def brief(s: dict) -> dict:
    """What the report keeps of a summary."""
    row = {k: s.get(k) for k in ("iteration_mean_s", "iteration_median_s", "gst_median_s", "gst_theory_s",
                                 "compute_median_s", "correct", "error", "background")}
    row["fidelity"] = {k: (s.get("fidelity") or {}).get(k) for k in ("verdict", "cause", "scenario_note")}
    row["stragglers"] = {k: (s.get("stragglers") or {}).get(k) for k in ("most_waited_for", "most_waited_for_share")}
    return row


def wait_of(s: dict) -> float:
    """BSP's wait for the slowest rank: the mean over the iterations past warm-up of the iteration less its GST
    (iterations.csv of the run or simulation; the closed form's mean iteration less its GST)."""
    path = os.path.join((s.get("config") or {}).get("out") or "", "iterations.csv")
    if not os.path.exists(path):
        return s["iteration_mean_s"] - s["gst_median_s"]
    with open(path) as f:
        rows = list(csv.DictReader(f))[WARMUP:]
    return sum(float(r["iteration_s"]) - float(r["gst_s"]) for r in rows) / len(rows)


def case(key: str, out: str, iterations: int) -> dict:
    """One case three ways (and its uniform baseline for a ratio), and its verdicts."""
    topo, _, common_opts, extra, check = CASES[key]
    common = ("--topo", topo, *common_opts, "--iters", str(iterations))
    t0 = time.time()
    runs = three_ways((*common, *extra), out, key)
    base = three_ways(common, out, key + "-uniform") if check == "ratio" else {}
    row = {"case": key, "topology": topo, "options": list(common_opts) + list(extra), "iterations": iterations}
    row.update({mode: brief(s) for mode, s in runs.items()})
    if base:
        row["uniform"] = {mode: brief(s) for mode, s in base.items()}
    row["seconds"] = round(time.time() - t0, 1)
    if any(s.get("error") for s in [*runs.values(), *base.values()]):
        row["ok"] = False
        return row
    theory, simulated, emulated = runs["theory"], runs["simulate"], runs["emulate"]
    ok = emulated["correct"] is True
    if check == "wait":
        closed = wait_of(theory)
        row["theory_formula"] = theory["compute"]["formula"]
        row["wait_s"] = {"theory": closed, "simulate": wait_of(simulated), "emulate": wait_of(emulated)}
        row["emulate_over_theory"] = wait_of(emulated) / closed
        row["simulate_over_theory"] = wait_of(simulated) / closed
        ok = ok and abs(row["emulate_over_theory"] - 1) <= WAIT_TOLERANCE and \
            abs(row["simulate_over_theory"] - 1) <= MODEL_TOLERANCE
    elif check == "slow":
        slow_host = extra[extra.index("--slow") + 1].split(":")[0]
        for mode in (simulated, emulated):
            ok = ok and (mode.get("stragglers") or {}).get("most_waited_for") == slow_host and \
                mode["stragglers"]["most_waited_for_share"] >= SLOW_SHARE
    else:
        row["gst_ratio"] = {mode: runs[mode]["gst_median_s"] / base[mode]["gst_median_s"] for mode in runs}
        row["simulate_over_emulate"] = simulated["gst_median_s"] / emulated["gst_median_s"]
        ok = ok and base["emulate"]["correct"] is True and \
            RATIO_RANGE[0] <= row["gst_ratio"]["emulate"] <= RATIO_RANGE[1] and \
            abs(row["simulate_over_emulate"] - 1) <= SIMULATED_WITHIN
        if "--background" in extra:  # the verdict names the injected flow and does not blame the emulator for it
            verdict = emulated.get("fidelity") or {}
            row["background"] = emulated.get("background")
            ok = ok and "traffic beside the job" in (verdict.get("scenario_note") or "") and \
                verdict.get("verdict") != "not faithful"
    row["ok"] = ok
    return row


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
    ap.add_argument("--only", help=f"comma-separated cases: {', '.join(CASES)}")
    args = ap.parse_args()
    every = list(CASES) + list(JOB_CASES)
    keys = args.only.split(",") if args.only else every
    unknown = [k for k in keys if k not in every]
    if unknown:
        print(f"shared_networks: unknown case {unknown[0]}: valid are {', '.join(every)}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    rows, communication_s = [], None
    for key in keys:
        if key in JOB_CASES:
            communication_s = communication_s or job_communication(args.out)
            rows.append(jobs_case(key, args.out, communication_s, args.quick))
        else:
            rows.append(case(key, args.out, min(20, CASES[key][1]) if args.quick else CASES[key][1]))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return write_report(os.path.join(args.out, "shared.json"),
                        {"emulated_wait_within": WAIT_TOLERANCE, "simulated_wait_within": MODEL_TOLERANCE,
                         "slow_rank_share_at_least": SLOW_SHARE, "gst_ratio_range": list(RATIO_RANGE),
                         "simulated_gst_within": SIMULATED_WITHIN,
                         "jobs_slowdown": {k: v[2] for k, v in JOB_CASES.items()},
                         "simulated_slowdown_within": SIMULATED_WITHIN}, rows)


if __name__ == "__main__":
    sys.exit(main())
