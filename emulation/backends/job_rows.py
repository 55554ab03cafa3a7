"""What every mode of the jobs back end says about a job: as given, when it starts, its timings past warm-up."""

from __future__ import annotations

import statistics
from typing import List, Optional, Sequence, Tuple

from emulation.core.job_specs import JobSpec
from emulation.run.resolution import Checked
from emulation.run.results import after_warmup, mean_after_warmup, median_after_warmup


def job_row(spec: JobSpec, checked: Checked, hosts: Tuple[str, ...]) -> dict:
    """What every mode says about a job as given."""
    return {"name": spec.name, "algo": checked.cfg.algo, "model": checked.cfg.model, "hosts": list(hosts),
            "ranks": len(hosts), "start": spec.start, "compute_s": checked.compute.mean}


def start_s(spec: JobSpec, alone_iteration_s: float) -> float:
    """When a job starts, seconds after the first: its delay, or its share of its own iteration alone."""
    return spec.start_s + spec.start_iterations * alone_iteration_s


def timing(iterations: List[float], gsts: List[float]) -> dict:
    """Mean and median iteration and median GST past warm-up, and every iteration."""
    return {"iteration_mean_s": mean_after_warmup(iterations), "iteration_median_s": median_after_warmup(iterations),
            "gst_median_s": median_after_warmup(gsts), "iterations_s": [round(x, 6) for x in iterations]}


def overlap_fields(overlap: Sequence[Optional[float]]) -> dict:
    """A job's overlap with the others per iteration, and its median past warm-up."""
    rounded = [None if v is None else round(v, 4) for v in overlap]
    kept = [v for v in after_warmup(rounded) if v is not None]
    return {"overlap": rounded, "overlap_median": statistics.median(kept) if kept else None}
