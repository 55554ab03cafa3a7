"""Turn the ranks' records into results: per-iteration rows, iterations.csv, workers.csv and the summary numbers
of a run; per-repetition times of a bench or calibration."""

from __future__ import annotations

import statistics
from typing import Dict, List, Optional, Tuple

from emulation.run.outputs import write_atomic_csv
from emulation.core.topology import Topology
from workloads.runfolder import RunFolder

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


def mean_after_warmup(values: List[float]) -> Optional[float]:
    """Mean leaving out the first WARMUP values (all of them if there are too few)."""
    kept = after_warmup(values)
    return statistics.mean(kept) if kept else None


def write_csvs(out_dir: str, rows: Dict[int, List[dict]], iterations: List[dict], topo: Optional[Topology]) -> None:
    """iterations.csv (one global row per iteration) and workers.csv (one row per rank and iteration)."""
    levels = sorted({k for it in iterations for k in it["tx_bytes_by_level"]})
    folder = RunFolder(out_dir)
    write_atomic_csv(folder.file(RunFolder.ITERATIONS),
                     ["iteration", "gst_s", "compute_s", "compute_real_s", "compute_cpu_s", "iteration_s", "loss"]
                     + [f"tx_bytes_{l}" for l in levels],
                     ([it["iteration"], f"{it['gst_s']:.6f}", f"{it['compute_s']:.6f}", f"{it['compute_real_s']:.6f}",
                       f"{it['compute_cpu_s']:.6f}", f"{it['iteration_s']:.6f}",
                       "" if it["loss"] is None else f"{it['loss']:.6f}"] +
                      [it["tx_bytes_by_level"].get(l, 0) for l in levels] for it in iterations))
    write_atomic_csv(folder.file(RunFolder.WORKERS_CSV),
                     ["rank", "host", "role", "iteration", "compute_s", "compute_real_s", "compute_cpu_s", "gst_s",
                      "iteration_s", "loss", "tx_bytes", "rx_bytes"],
                     ([r, topo.hosts[r].name if topo is not None else f"rank{r}", row["role"], row["iteration"],
                       f"{row['compute_s']:.6f}", f"{row['compute_real_s']:.6f}", f"{row['compute_cpu_s']:.6f}",
                       f"{row['gst_s']:.6f}", f"{row['iteration_s']:.6f}",
                       "" if row["loss"] is None else f"{row['loss']:.6f}",
                       sum(row["tx_bytes"].values()), sum(row["rx_bytes"].values())]
                      for r, rank_rows in sorted(rows.items()) for row in rank_rows))


def extras(finals: Dict[int, dict], contributors) -> Dict[str, object]:
    """Strategy extras of the final records (e.g. the iBatch schedule, the PF overlay): a worker's when it has one."""
    out: Dict[str, object] = {}
    for r, final in sorted(finals.items(), key=lambda kv: (kv[0] not in contributors, kv[0])):
        for key, value in (final.get("extras") or {}).items():
            out.setdefault(key, value)
    return out


def summarize(iterations: List[dict], finals: Dict[int, dict], contributors, checks: Dict[str, Optional[bool]],
              error: Optional[str], dilation: float = 1.0) -> dict:
    """The measured part of summary.json."""
    from workloads.verify import overall
    checksums = {finals[r]["checksum"] for r in contributors if r in finals}
    identical = len(checksums) == 1 and all(r in finals for r in contributors)
    by_level: Dict[str, int] = {}
    frames: Dict[str, int] = {}
    for it in iterations:
        for k, v in it["tx_bytes_by_level"].items():
            by_level[k] = by_level.get(k, 0) + v
        for k, v in it.get("tx_frames_by_level", {}).items():
            frames[k] = frames.get(k, 0) + v
    accuracy = next((f["accuracy"] for f in finals.values() if f.get("accuracy") is not None), None)
    phases = phase_ratios(iterations)
    raw = sum(p["fp32_bytes"] for p in phases.values())
    sent = sum(p["sent_bytes"] for p in phases.values())
    first = phases.get("first_step")
    losses = [it["loss"] for it in iterations if it["loss"] is not None]
    verified = overall(checks)
    return {
        "iterations": len(iterations),
        "gst_median_s": median_after_warmup([it["gst_s"] for it in iterations]),
        "compute_median_s": median_after_warmup([it["compute_s"] for it in iterations]),
        "compute_real_median_s": median_after_warmup([it["compute_real_s"] for it in iterations]),
        "compute_cpu_median_s": median_after_warmup([it["compute_cpu_s"] for it in iterations]),
        "compute_over_budget": sum(it["compute_over_budget"] for it in iterations),
        "iteration_median_s": median_after_warmup([it["iteration_s"] for it in iterations]),
        "jct_s": (iterations[-1]["end"] - iterations[0]["start"]) / dilation if iterations else None,
        "bytes_by_level": by_level,
        "frames_by_level": frames,
        "payload_fp32_bytes": raw, "payload_sent_bytes": sent,
        "wire_ratio": sent / raw if raw else None,
        "first_step_wire_ratio": first["ratio"] if first else None,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "accuracy": accuracy,
        "accuracy_curve": [[it["iteration"] + 1, it["accuracy"]] for it in iterations if it["accuracy"] is not None],
        "replicas_identical": identical,
        "checks": checks,
        "sum_verified": verified,
        "correct": bool(identical and verified is not False and error is None),
        "split_median_s": {k: median_after_warmup([it["split"][k] for it in iterations if k in it["split"]])
                           for k in sorted({k for it in iterations for k in it["split"]})},
        "wire_by_phase": phases,
        **extras(finals, contributors),
        "error": error,
    }


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
