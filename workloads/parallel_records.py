"""A launched parallel job's ranks read back (the files `workloads.parallel_train` writes, without importing torch):
per kind the bytes all ranks delivered per iteration, the slowest rank's median iteration, each stage's bubble and
the first replica's pipeline as a timeline."""

from __future__ import annotations

import glob
import json
import os
import statistics
from typing import Dict, List

from workloads.parallel_layout import parse_layout

OUT_NAME = "parallel-rank-{rank}.json"
PASSES = ("F", "B")


def read_ranks(folder: str) -> List[dict]:
    """Every rank's record under folder (ValueError when there is none)."""
    ranks = []
    for path in sorted(glob.glob(os.path.join(folder, "**", OUT_NAME.format(rank="*")), recursive=True)):
        with open(path) as f:
            ranks.append(json.load(f))
    if not ranks:
        raise ValueError(f"{folder} holds no {OUT_NAME.format(rank='N')} (run the job under dmlbed launch first)")
    return ranks


def collect(folder: str) -> dict:
    """A launched job's ranks read back: per kind the bytes all ranks delivered per iteration, the slowest rank's
    median iteration, per stage the median over iterations of its idle share of the pipeline's span (from its
    first forward to its last backward on any stage of the first replica's pipeline, tensor-parallel rank 0; the
    spans' clock is the machine's monotonic one, shared by every rank), that span's median, and the last measured
    iteration of that pipeline as [stage, kind, micro-batch, start_s, end_s] from its first pass."""
    ranks = read_ranks(folder)
    layout = parse_layout(ranks[0]["parallel"])
    per_kind: Dict[str, float] = {}
    for d in ranks:
        for kind, sent in d["bytes_per_iteration_by_kind"].items():
            per_kind[kind] = per_kind.get(kind, 0) + sent
    first = {d["coords"]["pp"]: d for d in ranks if d["coords"]["tp"] == 0 and d["coords"]["dp"] == 0}
    bubbles: List[List[float]] = [[] for _ in range(layout.pp)]
    spans, began = [], 0.0
    iterations = sorted({s[0] for d in first.values() for s in d["spans"]})
    for it in iterations:
        passes = [s for d in first.values() for s in d["spans"] if s[0] == it and s[1] in PASSES]
        began = min(s[3] for s in passes)
        spans.append(max(s[4] for s in passes) - began)
        for stage, d in first.items():
            busy = sum(s[4] - s[3] for s in d["spans"] if s[0] == it and s[1] in PASSES)
            bubbles[stage].append(1 - busy / spans[-1])
    timeline = [[stage, s[1], s[2], round(s[3] - began, 9), round(s[4] - began, 9)]
                for stage, d in sorted(first.items()) for s in d["spans"] if iterations and s[0] == iterations[-1]]
    warm = ranks[0]["warmup"]
    checked = [d["max_weight_difference"] for d in ranks if d["max_weight_difference"] is not None]
    return {"parallel": layout.label, "ranks": len(ranks), "bytes_per_iteration_by_kind": per_kind,
            "iteration_median_s": max(statistics.median(d["iterations_s"][warm:] or d["iterations_s"])
                                      for d in ranks),
            "pipeline_median_s": statistics.median(spans) if spans else None,
            "bubble_per_stage": [statistics.median(b) for b in bubbles],
            "max_weight_difference": max(checked) if len(checked) == len(ranks) else None,
            "timeline": timeline}
