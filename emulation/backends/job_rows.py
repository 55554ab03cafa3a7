"""What every mode of the jobs back end says about a job: as given, when it starts, its timings past warm-up."""

from __future__ import annotations

import statistics
from typing import List, Sequence, Tuple

from emulation.core.job_specs import JobSpec
from emulation.run.resolution import Checked
from emulation.run.results import WARMUP


def job_row(spec: JobSpec, checked: Checked, hosts: Tuple[str, ...]) -> dict:
    """What every mode says about a job as given."""
    return {"name": spec.name, "algo": checked.cfg.algo, "model": checked.cfg.model, "hosts": list(hosts),
            "ranks": len(hosts), "start": spec.start, "compute_s": checked.compute.mean}


def start_s(spec: JobSpec, alone_iteration_s: float) -> float:
    """When a job starts, seconds after the first: its delay, or its share of its own iteration alone."""
    return spec.start_s + spec.start_iterations * alone_iteration_s


def past_warmup(values: Sequence) -> List:
    """The values after the warm-up iterations (all of them when there are too few)."""
    return list(values[WARMUP:]) if len(values) > WARMUP else list(values)


def timing(iterations: Sequence[float], gsts: Sequence[float]) -> dict:
    """Mean and median iteration and median GST past warm-up, and every iteration."""
    kept = past_warmup(iterations)
    return {"iteration_mean_s": statistics.mean(kept), "iteration_median_s": statistics.median(kept),
            "gst_median_s": statistics.median(past_warmup(gsts)), "iterations_s": [round(x, 6) for x in iterations]}
