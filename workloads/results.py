"""Turn the workers' per-iteration records into iterations.csv, workers.csv and summary numbers (pure)."""

from __future__ import annotations

import csv
import json
import os
import statistics
from typing import Dict, List, Optional

from emulation.topology import Topology

WARMUP = 2
SPLIT_KEYS = ("forward_phase_s", "overlapped_s", "comm_exposed_s", "compute_exposed_s")


def read_rows(out_dir: str, ranks: int) -> Dict[int, List[dict]]:
    """Every complete JSON line each rank wrote so far."""
    rows = {}
    for r in range(ranks):
        path = os.path.join(out_dir, f"rank-{r}.jsonl")
        rows[r] = []
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    if line.endswith("\n"):
                        rows[r].append(json.loads(line))
    return rows


def read_finals(out_dir: str, ranks: int) -> Dict[int, dict]:
    """The end-of-run record of each rank that finished."""
    finals = {}
    for r in range(ranks):
        path = os.path.join(out_dir, f"rank-{r}.final.json")
        if os.path.exists(path):
            with open(path) as f:
                finals[r] = json.load(f)
    return finals


def interface_level(topo: Optional[Topology], name: str) -> str:
    """'L<level>' for an emulated host interface, else the interface name (loopback runs)."""
    if topo is not None:
        host, _, port = name.partition("-eth")
        if port.isdigit() and topo.is_host(host):
            return f"L{topo.node(host).interfaces[int(port)].level}"
    return name


def per_iteration(rows: Dict[int, List[dict]], contributors, topo: Optional[Topology]) -> List[dict]:
    """Global view of each iteration every rank finished: GST from the last rank to start syncing to the
    last to finish (all hosts share one clock), mean compute, wall iteration time, bytes per level."""
    done = min((len(v) for v in rows.values()), default=0)
    out = []
    for i in range(done):
        its = [rows[r][i] for r in rows]
        workers = [rows[r][i] for r in rows if r in contributors]
        by_level: Dict[str, int] = {}
        for row in its:
            for intf, n in row["tx_bytes"].items():
                key = interface_level(topo, intf)
                by_level[key] = by_level.get(key, 0) + n
        losses = [w["loss"] for w in workers if w["loss"] is not None]
        payload = [r.get("payload", {}) for r in its]
        first = [p.get("0.0", [0, 0]) for p in payload]
        split = {k: statistics.mean(w[k] for w in workers) for k in SPLIT_KEYS
                 if workers and all(k in w for w in workers)}
        if any("bcast_start" in r for r in its) and any("bcast_end" in r for r in its):
            split["broadcast_s"] = (max(r["bcast_end"] for r in its if "bcast_end" in r) -
                                    max(r["bcast_start"] for r in its if "bcast_start" in r))
        if any("dropped" in r for r in its):
            split["dropped"] = statistics.mean(r["dropped"] for r in its if "dropped" in r)
        out.append({"iteration": i,
                    "gst_s": max(r["sync_end"] for r in its) - max(r["sync_start"] for r in its),
                    "compute_s": statistics.mean(w["compute_s"] for w in workers),
                    "iteration_s": max(r["end"] for r in its) - min(r["start"] for r in its),
                    "loss": statistics.mean(losses) if losses else None,
                    "start": min(r["start"] for r in its), "end": max(r["end"] for r in its),
                    "payload_fp32": sum(v[0] for p in payload for v in p.values()),
                    "payload_sent": sum(v[1] for p in payload for v in p.values()),
                    "first_step": (sum(f[0] for f in first), sum(f[1] for f in first)),
                    "tx_bytes_by_level": dict(sorted(by_level.items())),
                    "split": split, "payload_by_phase": {k: [sum(p.get(k, [0, 0])[0] for p in payload),
                                                             sum(p.get(k, [0, 0])[1] for p in payload)]
                                                         for k in sorted({k for p in payload for k in p})}})
    return out


def phase_ratios(iterations: List[dict]) -> Dict[str, dict]:
    """Bytes sent against fp32 bytes per phase key (e.g. push, broadcast) over the run."""
    out: Dict[str, list] = {}
    for it in iterations:
        for k, (raw, enc) in it.get("payload_by_phase", {}).items():
            acc = out.setdefault(k, [0, 0])
            acc[0] += raw
            acc[1] += enc
    return {k: {"fp32_bytes": raw, "sent_bytes": enc, "ratio": enc / raw if raw else None}
            for k, (raw, enc) in out.items() if "." not in k}


def median_after_warmup(values: List[float]) -> Optional[float]:
    """Median leaving out the first WARMUP values (all of them if there are too few)."""
    kept = values[WARMUP:] if len(values) > WARMUP else values
    return statistics.median(kept) if kept else None


def write_csvs(out_dir: str, rows: Dict[int, List[dict]], iterations: List[dict], topo: Optional[Topology]) -> None:
    """iterations.csv (one global row per iteration) and workers.csv (one row per rank and iteration)."""
    levels = sorted({k for it in iterations for k in it["tx_bytes_by_level"]})
    with open(os.path.join(out_dir, "iterations.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["iteration", "gst_s", "compute_s", "iteration_s", "loss"] + [f"tx_bytes_{l}" for l in levels])
        for it in iterations:
            w.writerow([it["iteration"], f"{it['gst_s']:.6f}", f"{it['compute_s']:.6f}", f"{it['iteration_s']:.6f}",
                        "" if it["loss"] is None else f"{it['loss']:.6f}"] +
                       [it["tx_bytes_by_level"].get(l, 0) for l in levels])
    with open(os.path.join(out_dir, "workers.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rank", "host", "iteration", "compute_s", "gst_s", "iteration_s", "loss", "tx_bytes", "rx_bytes"])
        for r, rank_rows in sorted(rows.items()):
            host = topo.hosts[r].name if topo is not None else f"rank{r}"
            for row in rank_rows:
                w.writerow([r, host, row["iteration"], f"{row['compute_s']:.6f}", f"{row['gst_s']:.6f}",
                            f"{row['iteration_s']:.6f}", "" if row["loss"] is None else f"{row['loss']:.6f}",
                            sum(row["tx_bytes"].values()), sum(row["rx_bytes"].values())])


def summarize(iterations: List[dict], finals: Dict[int, dict], contributors, sum_verified: Optional[bool],
              error: Optional[str]) -> dict:
    """The measured part of summary.json."""
    checksums = {finals[r]["checksum"] for r in contributors if r in finals}
    identical = len(checksums) == 1 and all(r in finals for r in contributors)
    by_level: Dict[str, int] = {}
    for it in iterations:
        for k, v in it["tx_bytes_by_level"].items():
            by_level[k] = by_level.get(k, 0) + v
    accuracy = next((f["accuracy"] for f in finals.values() if f.get("accuracy") is not None), None)
    raw = sum(it["payload_fp32"] for it in iterations)
    sent = sum(it["payload_sent"] for it in iterations)
    first_raw = sum(it["first_step"][0] for it in iterations)
    first_sent = sum(it["first_step"][1] for it in iterations)
    losses = [it["loss"] for it in iterations if it["loss"] is not None]
    return {
        "iterations": len(iterations),
        "gst_median_s": median_after_warmup([it["gst_s"] for it in iterations]),
        "compute_median_s": median_after_warmup([it["compute_s"] for it in iterations]),
        "iteration_median_s": median_after_warmup([it["iteration_s"] for it in iterations]),
        "jct_s": (iterations[-1]["end"] - iterations[0]["start"]) if iterations else None,
        "bytes_by_level": by_level,
        "payload_fp32_bytes": raw, "payload_sent_bytes": sent,
        "wire_ratio": sent / raw if raw else None,
        "first_step_wire_ratio": first_sent / first_raw if first_raw else None,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "accuracy": accuracy,
        "replicas_identical": identical,
        "sum_verified": sum_verified,
        "correct": bool(identical and sum_verified is not False and error is None),
        "split_median_s": {k: median_after_warmup([it["split"][k] for it in iterations if k in it["split"]])
                           for k in SPLIT_KEYS + ("broadcast_s", "dropped")
                           if any(k in it["split"] for it in iterations)},
        "wire_by_phase": phase_ratios(iterations),
        "ibatch": next((f["ibatch"] for r, f in sorted(finals.items()) if "ibatch" in f and r in contributors),
                       None),
        "pflow": next((f["pflow"] for f in finals.values() if "pflow" in f), None),
        "error": error,
    }
