"""How large a network this machine emulates faithfully: per topology family, `dmlbed net --check` at growing sizes
(bring-up time, the flows' fidelity verdict and what limited it) and ring training runs of LeNet-5 (BML on BCube) at
a dilation; writes OUT/limits.json and the table the pre-flight check reads (emulation/run/measured_limits.json, the
families measured replacing theirs), from which `scripts/docs.py` writes docs/reference/limits.md.

Usage (root): .venv/bin/python scripts/limits.py [--families star,fattree] [--no-runs] [--out results/limits]
"""

import argparse
import json
import os
import sys

from case_runs import ROOT, chosen, dmlbed, provenance

TABLE = os.path.join(ROOT, "emulation", "run", "measured_limits.json")
NET_RATE = 10  # Mbit/s: bcube:8,2 and tree:8,8 were faithful here at 10, not at 50
SIZES = {"star": ["star:16", "star:32", "star:48", "star:64"],
         "fattree": ["fattree:4", "fattree:6"],
         "bcube": ["bcube:4,2", "bcube:8,2"],
         "tree": ["tree:4,4", "tree:8,8"]}
# (spec, algorithm, dilation, rate): a training run of LeNet-5 at the size the issue asks for
RUNS = {"star": [("star:32", "ring", 4, 50)],
        "fattree": [("fattree:6", "ring", 4, 10)],
        "bcube": [("bcube:8,2", "bml", 2, 10)],  # at dilation 4 (2.5 Mbit/s shaped) links reached 0.72 of it
        "tree": []}
ITERS = 4


def bottleneck(report: dict) -> str:
    """What limited a check or run that was not faithful, from its own cause (CPU, switch thread, memory, ...)."""
    cause = report.get("cause") or (report.get("fidelity") or {}).get("cause") or report.get("error") or ""
    for word, name in (("memory", "memory"), ("switch", "switch thread"), ("CPU", "CPU"), ("retransmission", "queues"),
                       ("not programmed", "switch programming")):
        if word in cause:
            return name
    return cause[:80] or "-"


def net_case(spec: str, out: str) -> dict:
    """One `net --check` at NET_RATE."""
    r = dmlbed("net", spec, "--check", "--bw", str(NET_RATE), "--duration", "3", "--out", os.path.join(out, spec.replace(
        ":", "").replace(",", "_")), "--force", "--wait", timeout=1800)
    row = {"spec": spec, "kind": "net", "rate_mbps": NET_RATE, "hosts": r.get("hosts"), "error": r.get("error")}
    if not r.get("error"):
        row.update(bring_up_s=r.get("bring_up_s"), verdict=r.get("verdict"), fidelity_min=r.get("fidelity_min"),
                   reachable=r.get("pairs_reachable") == r.get("pairs_tested"),
                   cpu_saturated_share=(r.get("cpu") or {}).get("saturated_share"),
                   switch_saturated_share=(r.get("cpu") or {}).get("switch_saturated_share"))
    row["faithful"] = row.get("verdict") == "faithful" and row.get("reachable", False)
    row["bottleneck"] = None if row["faithful"] else bottleneck(r)
    return row


def run_case(spec: str, algo: str, dilation: float, rate: float, out: str) -> dict:
    """One training run of LeNet-5."""
    r = dmlbed("run", "--topo", spec, "--algo", algo, "--model", "lenet5", "--bw", str(rate), "--dilation",
               str(dilation), "--iters", str(ITERS), "--out", os.path.join(out, f"run-{algo}-" + spec.replace(
                   ":", "").replace(",", "_")), "--force", "--wait", timeout=3600)
    fid = r.get("fidelity") or {}
    row = {"spec": spec, "kind": "run", "algo": algo, "model": "lenet5", "dilation": dilation, "rate_mbps": rate,
           "hosts": r.get("workers"), "error": r.get("error"), "correct": r.get("correct"),
           "iterations": r.get("iterations"), "verdict": fid.get("verdict"), "gst_ratio": r.get("gst_ratio"),
           "pss_mib_per_rank": ((r.get("rank_start") or {}).get("memory") or {}).get("pss_mib_per_rank")}
    row["faithful"] = row["verdict"] == "faithful" and row["correct"] is True
    row["bottleneck"] = None if row["faithful"] else bottleneck(r)
    return row


def table_of(rows: list, families: list, prov: dict) -> dict:
    """Per family: the largest size whose net check was faithful, the first that was not (and why), and the runs."""
    out = {}
    for family in families:
        nets = [r for r in rows if r["kind"] == "net" and r["spec"].startswith(family + ":")]
        good = [r for r in nets if r["faithful"]]
        bad = [r for r in nets if not r["faithful"]]
        largest = max(good, key=lambda r: r["hosts"] or 0) if good else None
        first_bad = min(bad, key=lambda r: r["hosts"] or 0) if bad else None
        out[family] = {"net": {"largest_faithful": largest and {k: largest[k] for k in ("spec", "hosts", "bring_up_s",
                                                                                         "fidelity_min", "rate_mbps")},
                               "first_not_faithful": first_bad and {k: first_bad.get(k) for k in (
                                   "spec", "hosts", "verdict", "bottleneck", "error")},
                               "checked": [r["spec"] for r in nets]},
                       "runs": [dict({k: r.get(k) for k in ("spec", "algo", "dilation", "rate_mbps", "hosts", "verdict",
                                                            "correct", "gst_ratio", "pss_mib_per_rank", "bottleneck",
                                                            "error")}, measured=str(prov.get("date"))[:10])
                                for r in rows if r["kind"] == "run" and r["spec"].startswith(family + ":")],
                       "measured": {k: prov.get(k) for k in ("command", "date", "commit", "cpus", "kernel")}}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default=",".join(SIZES), help=f"comma-separated: {', '.join(SIZES)}")
    ap.add_argument("--no-runs", action="store_true", help="net checks only")
    ap.add_argument("--out", default="results/limits")
    args = ap.parse_args()
    families = chosen(args.families, SIZES, "family")
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for family in families:
        for spec in SIZES[family]:
            rows.append(net_case(spec, args.out))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        for spec, algo, dilation, rate in ([] if args.no_runs else RUNS[family]):
            rows.append(run_case(spec, algo, dilation, rate, args.out))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    prov = provenance()
    table = table_of(rows, families, prov)
    report = {"provenance": prov, "net_rate_mbps": NET_RATE, "cases": rows, "table": table}
    with open(os.path.join(args.out, "limits.json"), "w") as f:
        json.dump(report, f, indent=1)
    kept = {}
    if os.path.exists(TABLE):
        with open(TABLE) as f:
            kept = json.load(f).get("families", {})
    if args.no_runs:  # the runs measured before stay
        for family, entry in table.items():
            entry["runs"] = kept.get(family, {}).get("runs", [])
    with open(TABLE, "w") as f:
        json.dump({"generated_by": "scripts/limits.py", "families": dict(kept, **table)}, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
