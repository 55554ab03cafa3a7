"""Soak test: many mixed emulated runs back to back; after each, nothing may be left behind, and the software
switch's resident memory must not grow. Writes a JSON report; exit 1 when anything leaked.

Usage: .venv/bin/python scripts/soak.py [--runs 20] [--out results/soak]
"""

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

from emulation.net.runstate import STATE_ROOT, list_bridges
from emulation.backends.emulator import run
from emulation.run.sampling import switch_pid
from emulation.run.options import RunConfig
from emulation.results.provenance import provenance

MIX = [  # small runs that cover every kind of topology and strategy
    ("star:3", "ring", "50", {}),
    ("star:3", "ps", "50", {}),
    ("bcube:2,2", "bml", "50", {}),
    ("tree:2,2", "blueconnect", "100,50", {}),
    ("star:3", "ibatch", "50", {}),
    ("star:4", "pflow", "50", {}),
    ("fattree:4", "hier", "50", {}),
    ("star:3", "ring", "50", {"codec": "terngrad"}),
]
GROWTH_LIMIT = 0.10


def rss_kb(pid):
    """Resident memory of a process in kB (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None


def processes_of_runs():
    """Workers, controllers and Mininet host shells still running."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "workloads.worker" in cmd or "workloads.forkserver" in cmd or "ryu-manager" in cmd or "controllers/ryu_manager.py" in cmd or "mininet:" in cmd:
            found.append(f"{pid}: {cmd[:80]}")
    return found


def leftovers(baseline_interfaces):
    """What a finished run left on the machine."""
    out = [f"bridge {b}" for b in list_bridges()]
    out += [f"interface {i}" for i in sorted(set(os.listdir("/sys/class/net")) - baseline_interfaces)]
    out += [f"process {p}" for p in processes_of_runs()]
    if os.path.isdir(STATE_ROOT):
        out += [f"run record {d}" for d in os.listdir(STATE_ROOT) if d.isdigit()]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--out", default="results/soak")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    baseline = set(os.listdir("/sys/class/net"))
    before = leftovers(baseline)
    if before:
        print(f"soak: the machine is not clean before the soak: {before}", file=sys.stderr)
        return 2
    rows, started = [], time.time()
    for n in range(args.runs):
        topo, algo, bw, extra = MIX[n % len(MIX)]
        cfg = RunConfig(topology=topo, algo=algo, model="mlp:100K", batch=8, iters=3, bw=bw, timeout=60,
                        out=os.path.join(args.out, f"run-{n:02d}"), force=True, **extra)
        t0 = time.time()
        try:
            summary = run(cfg)
        except Exception as exc:  # noqa: BLE001  (a failed run is a soak finding, not the end of the soak)
            summary = {"correct": False, "error": f"{type(exc).__name__}: {exc}"}
        left = leftovers(baseline)
        pid = switch_pid()
        rows.append({"run": n, "topology": topo, "algo": algo, "correct": summary["correct"],
                     "completed": summary.get("completed"), "error": summary["error"], "seconds": time.time() - t0,
                     "switch_pid": pid, "switch_rss_kb": rss_kb(pid) if pid else None, "leftovers": left})
        print(f"soak {n + 1}/{args.runs}: {algo} on {topo}: correct {summary['correct']}, "
              f"switch RSS {rows[-1]['switch_rss_kb']} kB, leftovers {len(left)}", file=sys.stderr, flush=True)
    # The first run warms the switch up (its pools grow once); growth is measured from there.
    rss = [r["switch_rss_kb"] for r in rows if r["switch_rss_kb"]]
    same_switch = len({r["switch_pid"] for r in rows}) == 1
    growth = (rss[-1] / rss[0] - 1) if len(rss) > 1 else 0.0
    report = {"runs": rows, "duration_s": time.time() - started, "switch_rss_first_kb": rss[0] if rss else None,
              "switch_rss_last_kb": rss[-1] if rss else None, "switch_rss_max_kb": max(rss) if rss else None,
              "switch_rss_growth": growth, "switch_restarted": not same_switch,
              "leftovers": sorted({x for r in rows for x in r["leftovers"]}),
              "all_correct": all(r["correct"] for r in rows)}
    report["provenance"] = provenance()
    report["ok"] = report["all_correct"] and not report["leftovers"] and same_switch and growth < GROWTH_LIMIT
    with open(os.path.join(args.out, "soak.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: v for k, v in report.items() if k != "runs"}, indent=1))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
