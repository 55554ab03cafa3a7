"""The fidelity verdict of one benchmarked collective, judged from outside its ranks: the CPU and the switch thread
while its timed repetitions ran, its hosts' TCP counters and the switches' drops over its run, how steady its
repetitions were, and whether it moved data faster than the shaped links carry. Bench ranks time repetitions, not
transfers, so a link's rate while it had data to send (the run's decomposition) is not judged here."""

from __future__ import annotations

import statistics
from typing import Callable, Dict, List, Optional, Tuple

from emulation.results.fidelity import verdict_and_cause
from workloads.netstats import tcp_counters

TCP_TOTALS = ("retrans_segs", "rto_timeouts", "loss_probes", "dsack_received", "out_segs")
SCOPE = ("timed repetitions judged from outside the ranks: CPU, switch thread, TCP counters, switch drops, the "
         "repetitions' spread and the time against the links' bound (no per-transfer link rates)")


def host_tcp(pids: Dict[str, int]) -> Dict[str, Dict[str, int]]:
    """Each host's TCP counters now (its namespace's, through a process in it)."""
    return {host: tcp_counters(f"/proc/{pid}") for host, pid in pids.items()}


def timed_window(records: List[dict]) -> Optional[Tuple[float, float]]:
    """Wall-clock span of the timed (not warm-up) repetitions."""
    timed = [r for r in records if not r["warmup"]]
    return (min(r["start"] for r in timed), max(r["end"] for r in timed)) if timed else None


def judge(rows: List[dict], times: Dict[int, List[float]], records: List[dict],
          cpu: Callable[[Optional[Tuple[float, float]]], Dict[str, object]],
          tcp: Dict[str, Dict[str, int]], port_drops: Dict[str, int], emulated: bool) -> Dict[str, object]:
    """The verdict of one (op, algorithm): rows are its table rows, times its repetitions' times per size. Its
    time against theory and its spread are read at the largest size, where the links, not latency, set it."""
    largest = max(rows, key=lambda r: r["size_bytes"]) if rows else None
    reps = times.get(largest["size_bytes"], []) if largest else []
    fid: Dict[str, object] = {
        "scope": SCOPE, "cpu": cpu(timed_window(records)),
        "gst_ratio": largest["ratio"] if largest else None,
        "gst_cv": statistics.pstdev(reps) / statistics.mean(reps) if len(reps) > 1 and statistics.mean(reps) else None}
    if not emulated:
        fid.update(verdict="not measured", cause="loopback run: no emulated network")
        return fid
    if not rows:
        fid.update(verdict="not measured", cause="no repetition finished: nothing was measured")
        return fid
    fid.update(hosts=tcp, switch_port_drops=port_drops, levels={},
               tcp_totals={k: sum(h.get(k, 0) for h in tcp.values()) for k in TCP_TOTALS})
    fid.update(verdict_and_cause(fid, len(reps), largest["theory_s"] or 0.0))
    fast = [r for r in rows if r.get("faster_than_links")]
    if fast:  # a time below what the shaped links can carry: the shaping did not hold
        sizes = f"{len(fast)} size{'s' if len(fast) > 1 else ''}"
        fid.update(verdict="not faithful", cause=f"{sizes} ran faster than the shaped links carry (faster_than_links): "
                                                 f"the shaping did not hold")
    return fid
