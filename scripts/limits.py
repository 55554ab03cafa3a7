"""The table the pre-flight check reads (emulation/run/measured_limits.json), written from runs of the limits benchmark
configs (configs/bench/limits.yaml and limits-demo.yaml, `dmlbed reproduce --bench limits --out results/bench`): per
topology family, the largest size whose `net --check` was faithful, the first that was not (and what limited it), and
the training runs, each with its own date and commit. A family's net checks are replaced by a folder that checked the
family; runs are replaced one by one (same network, algorithm, rate and dilation); the rest of the table is kept.
scripts/docs.py writes docs/reference/limits.md from the table.

Usage: .venv/bin/python scripts/limits.py [FOLDER ...]   (default results/bench/limits results/bench/limits-demo)
"""

import argparse
import json
import os
import sys

from emulation.results.files import read_json, write_atomic

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TABLE = os.path.join(ROOT, "emulation", "run", "measured_limits.json")
CAUSES = (("memory", "memory"), ("CPU or switch", "CPU or switch thread"), ("switch", "switch thread"), ("CPU", "CPU"),
          ("retransmission", "queues"), ("queue", "queues"), ("not programmed", "switch programming"))


def bottleneck(cause: str) -> str:
    """What limited a check or run that was not faithful, named from its own cause."""
    return next((name for word, name in CAUSES if word in (cause or "")), (cause or "")[:80] or "-")


def family_of(spec: str) -> str:
    """The topology family of a spec ('fattree:6' -> 'fattree')."""
    return spec.split(":")[0]


def net_row(r: dict) -> dict:
    """One `net --check` row of the config's folder, as the table keeps it."""
    faithful = r.get("fidelity") == "faithful" and r.get("exit_code") == 0
    return {"spec": r.get("topology") or r["label"].split(" ", 1)[1], "hosts": r.get("hosts"),
            "bring_up_s": r.get("bring_up_s"), "fidelity_min": r.get("fidelity_min"), "rate_mbps": r.get("shaped_mbps"),
            "verdict": r.get("fidelity"), "error": r.get("error"), "faithful": faithful,
            "bottleneck": None if faithful else bottleneck(r.get("fidelity_cause") or r.get("error"))}


def run_row(r: dict, prov: dict) -> dict:
    """One training run (a `run` command row: its summary's figures under dotted keys), as the table keeps it."""
    verdict = r.get("fidelity.verdict") or r.get("fidelity")
    faithful = verdict == "faithful" and r.get("correct") is True
    cause = r.get("fidelity.cause") or r.get("error")
    return {"spec": r.get("topology") or r["label"].split(" ", 1)[1], "algo": r.get("algo"),
            "dilation": r.get("config.dilation"), "rate_mbps": r.get("bw_mbps"), "hosts": r.get("workers"),
            "verdict": verdict, "correct": r.get("correct"), "gst_ratio": r.get("gst_ratio"),
            "pss_mib_per_rank": r.get("rank_start.memory.pss_mib_per_rank"),
            "bottleneck": None if faithful else bottleneck(cause), "error": r.get("error"),
            "measured": str(prov.get("date"))[:10], "commit": str(prov.get("commit") or "?")[:12]}


def table_of(rows: list, prov: dict) -> dict:
    """Per family measured: its largest faithful net check, its first not faithful (when it checked any), the runs."""
    nets = [net_row(r) for r in rows if r["label"].startswith("net ")]
    runs = [run_row(r, prov) for r in rows if r["label"].startswith("run ")]
    out = {}
    for family in dict.fromkeys(family_of(n["spec"]) for n in nets + runs):
        out[family] = {"runs": [r for r in runs if family_of(r["spec"]) == family]}
        mine = [n for n in nets if family_of(n["spec"]) == family]
        if mine:
            good = [n for n in mine if n["faithful"]]
            bad = [n for n in mine if not n["faithful"]]
            largest = max(good, key=lambda n: n["hosts"] or 0) if good else None
            first_bad = min(bad, key=lambda n: n["hosts"] or 0) if bad else None
            out[family]["net"] = {"largest_faithful": largest and {k: largest[k] for k in (
                                      "spec", "hosts", "bring_up_s", "fidelity_min", "rate_mbps")},
                                  "first_not_faithful": first_bad and {k: first_bad[k] for k in (
                                      "spec", "hosts", "rate_mbps", "verdict", "bottleneck", "error")},
                                  "checked": [n["spec"] for n in mine]}
            out[family]["measured"] = {k: prov.get(k) for k in ("command", "date", "commit", "cpus", "kernel")}
    return out


def run_key(run: dict) -> tuple:
    return run["spec"], run["algo"], run["rate_mbps"], run.get("dilation") or 1.0


def merged(kept: dict, new: dict) -> dict:
    """The table with a folder's families merged in: its net checks replace the family's, its runs replace the runs
    of the same network, algorithm, rate and dilation."""
    out = dict(kept)
    for family, entry in new.items():
        old = dict(out.get(family) or {"runs": []})
        if "net" in entry:
            old["net"], old["measured"] = entry["net"], entry["measured"]
        runs = {run_key(r): r for r in old.get("runs", [])}
        runs.update({run_key(r): r for r in entry["runs"]})
        old["runs"] = list(runs.values())
        out[family] = old
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="*", default=["results/bench/limits", "results/bench/limits-demo"])
    args = ap.parse_args()
    table = (read_json(TABLE) or {}).get("families", {})
    for folder in args.folders:
        rows, prov = read_json(os.path.join(folder, "comparison.json")), read_json(
            os.path.join(folder, "provenance.json"))
        if rows is None or prov is None:
            print(f"limits: {folder} holds no comparison.json and provenance.json: run `dmlbed reproduce --bench "
                  f"{os.path.basename(folder.rstrip('/'))} --out {os.path.dirname(folder.rstrip('/')) or '.'}` first",
                  file=sys.stderr)
            return 2
        new = table_of(rows, prov)
        table = merged(table, new)
        print(json.dumps(new, indent=1))
    write_atomic(TABLE, json.dumps({"generated_by": "scripts/limits.py", "families": table}, indent=1,
                                   sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
