"""Which rank each synchronous iteration waited for: per rank its compute and its wait at the synchronization (from
its compute's end to the last rank's), and per iteration the rank whose compute ended last."""

from __future__ import annotations

import statistics
from typing import Dict, List, Sequence


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
