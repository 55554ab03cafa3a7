"""Turn the ranks' records into results: per-iteration rows, iterations.csv, workers.csv and the summary numbers
of a run; per-repetition times of a bench or calibration."""

from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Sequence, Tuple

from emulation.core.topology import Topology

WARMUP = 2  # iterations the medians leave out (start-up: connections, first-touch allocations)


def interface_level(topo: Optional[Topology], name: str) -> str:
    """'L<level>' for an emulated host interface, else the interface name (loopback runs)."""
    if topo is not None:
        host, _, port = name.partition("-eth")
        if port.isdigit() and topo.is_host(host):
            return f"L{topo.node(host).interfaces[int(port)].level}"
    return name


def _window(rows: List[dict], name: str) -> Optional[Tuple[float, float]]:
    """Global window of a named mark: (the last rank to start, the last rank to end)."""
    starts = [r["marks"][name][0] for r in rows if name in r.get("marks", {}) and r["marks"][name][0] is not None]
    ends = [r["marks"][name][1] for r in rows if name in r.get("marks", {}) and r["marks"][name][1] is not None]
    return (max(starts), max(ends)) if starts and ends else None


def _span(rows: List[dict], name: str) -> Optional[float]:
    """Global span of a named mark: the last rank to end minus the last rank to start."""
    window = _window(rows, name)
    return window[1] - window[0] if window else None


SYNC_MARK = "sync:"  # a mark of synchronization outside the window (expert parallelism's all-to-alls in forward)


def sync_marks(rows: List[dict]) -> List[Tuple[float, float]]:
    """The global window of every 'sync:' mark of an iteration's records."""
    names = sorted({k for r in rows for k in r.get("marks", {}) if k.startswith(SYNC_MARK)})
    return [w for w in (_window(rows, name) for name in names) if w]


def per_iteration(rows: Dict[int, List[dict]], contributors, topo: Optional[Topology]) -> List[dict]:
    """Global view of each iteration every rank finished: GST from the last rank to start syncing to the
    last to finish (all hosts share one clock), plus each 'sync:' mark's span the same way (synchronization during
    forward and backward; `windows` lists them all), mean compute, wall iteration time, bytes per level."""
    done = min((len(v) for v in rows.values()), default=0)
    out = []
    for i in range(done):
        its = [rows[r][i] for r in rows]
        workers = [rows[r][i] for r in rows if r in contributors]
        by_level: Dict[str, int] = {}
        frames: Dict[str, int] = {}
        for row in its:
            for intf, n in row["tx_bytes"].items():
                key = interface_level(topo, intf)
                by_level[key] = by_level.get(key, 0) + n
                frames[key] = frames.get(key, 0) + row.get("tx_frames", {}).get(intf, 0)
        losses = [w["loss"] for w in workers if w["loss"] is not None]
        phases: Dict[str, List[int]] = {}
        for row in its:
            for phase, (raw, sent) in row.get("payload", {}).items():
                acc = phases.setdefault(phase, [0, 0])
                acc[0] += raw
                acc[1] += sent
        split = {}
        for key in sorted({k for r in its for k in r.get("split", {})}):
            values = [r["split"][key] for r in its if key in r.get("split", {})]
            split[key] = statistics.mean(values)
        for name in sorted({k for r in its for k in r.get("marks", {})}):
            span = _span(its, name)
            if span is not None:
                split[f"{name}_s"] = span
        window = (max(r["sync_start"] for r in its), max(r["sync_end"] for r in its))
        elsewhere = sync_marks(its)
        out.append({"iteration": i,
                    "gst_s": window[1] - window[0] + sum(b - a for a, b in elsewhere),
                    "windows": sorted([window] + elsewhere),
                    "compute_s": statistics.mean(w["compute_s"] for w in workers) if workers else 0.0,
                    "compute_real_s": statistics.mean(w.get("compute_real_s", 0.0) for w in workers)
                    if workers else 0.0,
                    "compute_cpu_s": statistics.mean(w.get("compute_cpu_s", 0.0) for w in workers)
                    if workers else 0.0,
                    "compute_over_budget": sum(bool(w.get("compute_over_budget")) for w in workers),
                    "workers": len(workers),
                    "iteration_s": max(r["end"] for r in its) - min(r["start"] for r in its),
                    "loss": statistics.mean(losses) if losses else None,
                    "accuracy": next((w["accuracy"] for w in workers if w.get("accuracy") is not None), None),
                    "start": min(r["start"] for r in its), "end": max(r["end"] for r in its),
                    "sync_start": max(r["sync_start"] for r in its), "sync_end": max(r["sync_end"] for r in its),
                    "tx_bytes_by_level": dict(sorted(by_level.items())),
                    "tx_frames_by_level": dict(sorted(frames.items())),
                    "payload_by_phase": dict(sorted(phases.items())), "split": split})
    return out


TIME_KEYS = ("gst_s", "compute_s", "compute_real_s", "compute_cpu_s", "iteration_s")


def dilate(iterations: List[dict], factor: float) -> List[dict]:
    """Iterations in the emulated time of a dilated run: every duration divided by the dilation factor
    (split entries ending in _s are seconds; the others, such as a dropped fraction, are not)."""
    if factor == 1:
        return iterations
    out = []
    for it in iterations:
        it = dict(it, **{k: it[k] / factor for k in TIME_KEYS})
        it["split"] = {k: (v / factor if k.endswith("_s") else v) for k, v in it["split"].items()}
        out.append(it)
    return out


def phase_ratios(iterations: List[dict]) -> Dict[str, dict]:
    """Bytes sent against fp32 bytes per payload phase over the run."""
    out: Dict[str, List[int]] = {}
    for it in iterations:
        for k, (raw, enc) in it["payload_by_phase"].items():
            acc = out.setdefault(k, [0, 0])
            acc[0] += raw
            acc[1] += enc
    return {k: {"fp32_bytes": raw, "sent_bytes": enc, "ratio": enc / raw if raw else None}
            for k, (raw, enc) in sorted(out.items())}


def after_warmup(values: List[float]) -> List[float]:
    """The values past the first WARMUP (all of them if there are too few)."""
    return values[WARMUP:] if len(values) > WARMUP else values


def median_after_warmup(values: List[float]) -> Optional[float]:
    """Median leaving out the first WARMUP values (all of them if there are too few)."""
    kept = after_warmup(values)
    return statistics.median(kept) if kept else None


def period_median(rows: Dict[int, List[dict]], ranks: Sequence[int], dilation: float = 1.0) -> Optional[float]:
    """The job's iteration period: per rank, the median after warm-up of the time between its consecutive iteration
    ends (the first iteration's from its own start), in emulated time; the slowest of these ranks'. Unlike an
    iteration's span (start to end), it counts a round once where iterations overlap (SSP's rounds queued ahead, a
    BSP iteration that waits for the previous round)."""
    medians = []
    for rank in ranks:
        its = rows.get(rank) or []
        if its:
            ends = [it["end"] for it in its]
            periods = [ends[0] - its[0]["start"]] + [b - a for a, b in zip(ends, ends[1:])]
            medians.append(median_after_warmup([p / dilation for p in periods]))
    return max(medians) if medians else None


def mean_after_warmup(values: List[float]) -> Optional[float]:
    """Mean leaving out the first WARMUP values (all of them if there are too few)."""
    kept = after_warmup(values)
    return statistics.mean(kept) if kept else None


def rep_times(records: List[dict], dilation: float = 1.0) -> Dict[int, List[float]]:
    """Per size, each timed repetition's time of a bench or calibration: from the last rank starting it to the
    last rank finishing it (in emulated time: divided by the time dilation)."""
    by_rep: Dict[tuple, List[dict]] = {}
    for r in records:
        if not r["warmup"]:
            by_rep.setdefault((r["size"], r["rep"]), []).append(r)
    out: Dict[int, List[float]] = {}
    for (size, _), rs in sorted(by_rep.items()):
        out.setdefault(size, []).append((max(r["end"] for r in rs) - max(r["start"] for r in rs)) / dilation)
    return out


def straggler_report(compute_end: Dict[int, Sequence[float]], compute_s: Dict[int, Sequence[float]],
                     names: Sequence[str], skip: int = 0) -> dict:
    """compute_end / compute_s: per training rank, each iteration's compute end (any common clock) and compute
    seconds; the first `skip` iterations (warm-up) are left out when there are more."""
    ranks = sorted(compute_end)
    count = min((len(compute_end[r]) for r in ranks), default=0)
    first = skip if count > skip else 0
    waited: Dict[int, int] = {r: 0 for r in ranks}
    waits: Dict[int, List[float]] = {r: [] for r in ranks}
    for i in range(first, count):
        last = max(ranks, key=lambda r: compute_end[r][i])
        waited[last] += 1
        for r in ranks:
            waits[r].append(compute_end[last][i] - compute_end[r][i])
    iterations = count - first
    if not ranks or iterations <= 0:
        return {}
    most = max(ranks, key=lambda r: waited[r])
    return {"iterations": iterations,
            "most_waited_for": names[most], "most_waited_for_share": waited[most] / iterations,
            "waited_for": {names[r]: waited[r] for r in ranks if waited[r]},
            "ranks": [{"host": names[r], "compute_mean_s": statistics.mean(compute_s[r][first:count]),
                       "wait_mean_s": statistics.mean(waits[r]), "waited_for": waited[r]} for r in ranks]}
