"""A queue's occupancy over time from repeated `tc -s qdisc show dev DEV` (each after a 'T <unix seconds>' line):
parsing and summary (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

LEAF_HANDLE = "10:"  # the leaf under a shaped end's HTB class (core/shaping.leaf_queue_command)
BLOCK = re.compile(r"\n(?=qdisc )")


@dataclass(frozen=True)
class QueueSample:
    """One look at a queue: when, what it held, and its counters so far."""

    t: float
    packets: int
    bytes: int
    marked: int
    dropped: int
    sent_bytes: int


def leaf_counters(tc_output: str) -> Optional[Dict[str, int]]:
    """Backlog, ECN marks, drops and bytes sent of the leaf qdisc (handle 10:) in one `tc -s qdisc show`."""
    for block in BLOCK.split(tc_output):
        head = block.split("\n", 1)[0].split()
        if len(head) >= 3 and head[0] == "qdisc" and head[2] == LEAF_HANDLE:
            backlog = re.search(r"backlog (\d+)b (\d+)p", block)
            sent = re.search(r"Sent (\d+) bytes", block)
            dropped = re.search(r"dropped (\d+)", block)
            marked = re.search(r"\bmarked (\d+)", block)
            return {"bytes": int(backlog.group(1)) if backlog else 0,
                    "packets": int(backlog.group(2)) if backlog else 0,
                    "marked": int(marked.group(1)) if marked else 0,
                    "dropped": int(dropped.group(1)) if dropped else 0,
                    "sent_bytes": int(sent.group(1)) if sent else 0}
    return None


def parse_samples(text: str) -> List[QueueSample]:
    """Every complete look in a sampler's log, in order (a look cut off at the end is left out)."""
    samples = []
    for chunk in re.split(r"^T ", text, flags=re.M)[1:]:
        stamp, _, body = chunk.partition("\n")
        counters = leaf_counters(body)
        try:
            t = float(stamp.strip())
        except ValueError:
            continue
        if counters is not None:
            samples.append(QueueSample(t, **counters))
    return samples


def summarize(samples: List[QueueSample], buffer_packets: int, start: float = float("-inf"),
              end: float = float("inf")) -> Dict[str, object]:
    """The queue between start and end (unix seconds): occupancy percentiles in packets, share of the buffer,
    ECN marks and drops in the window, the rate it sent at, and how often it was looked at."""
    inside = [s for s in samples if start <= s.t <= end]
    if len(inside) < 2:
        return {"samples": len(inside), "error": "fewer than two looks at the queue"}
    packets = np.array([s.packets for s in inside], dtype=float)
    span = inside[-1].t - inside[0].t
    gaps = np.diff([s.t for s in inside])
    p10, p50, p90 = (float(np.percentile(packets, q)) for q in (10, 50, 90))
    return {"samples": len(inside), "seconds": round(span, 3), "period_s_median": round(float(np.median(gaps)), 4),
            "median_packets": p50, "p10_packets": p10, "p90_packets": p90, "max_packets": int(packets.max()),
            "mean_packets": round(float(packets.mean()), 2), "buffer_packets": buffer_packets,
            "p90_of_buffer": round(p90 / buffer_packets, 3),
            "ecn_marks": inside[-1].marked - inside[0].marked, "drops": inside[-1].dropped - inside[0].dropped,
            "sent_mbps": round((inside[-1].sent_bytes - inside[0].sent_bytes) * 8 / span / 1e6, 3) if span else None}


def series_rows(samples: List[QueueSample], t0: float) -> List[Dict[str, object]]:
    """The samples as CSV rows, seconds from t0."""
    return [{"t_s": round(s.t - t0, 4), "packets": s.packets, "bytes": s.bytes, "ecn_marks": s.marked,
             "drops": s.dropped} for s in samples]
