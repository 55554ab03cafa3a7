"""What every mode of the jobs back end says about a job: as given, when it starts, its timings past warm-up."""

from __future__ import annotations

import statistics
from typing import List, Optional, Sequence, Tuple

from emulation.core.job_specs import JobSpec, gaps, overlap_share
from emulation.run.resolution import Checked
from emulation.results.iterations import after_warmup, mean_after_warmup, median_after_warmup


def job_row(spec: JobSpec, checked: Checked, hosts: Tuple[str, ...]) -> dict:
    """What every mode says about a job as given."""
    return {"name": spec.name, "algo": checked.cfg.algo, "model": checked.cfg.model, "hosts": list(hosts),
            "ranks": len(hosts), "start": spec.start, "hold": spec.hold, "compute_s": checked.compute.mean}


def start_s(spec: JobSpec, alone_iteration_s: float) -> float:
    """When a job starts, seconds after the first: its delay, or its share of its own iteration alone."""
    return spec.start_s + spec.start_iterations * alone_iteration_s


def timing(iterations: List[float], gsts: List[float]) -> dict:
    """Mean and median iteration and median GST past warm-up, and every iteration."""
    return {"iteration_mean_s": mean_after_warmup(iterations), "iteration_median_s": median_after_warmup(iterations),
            "gst_median_s": median_after_warmup(gsts), "iterations_s": [round(x, 6) for x in iterations]}


# Synchronizations closer than this share of an iteration are a knife edge off the fluid model: emulated ring jobs
# offset by half an iteration drifted into phase with about 1% of an iteration between them and held with about 5%
# (configs/bench/jobs.yaml, the offset cases).
THIN_GAP = 0.03


def thin_gap_note(gap_s: Optional[float], iteration_s: float, model: str) -> Optional[str]:
    """What a model that keeps jobs apart exactly cannot say when little slack separates them (None otherwise)."""
    if gap_s is None or not iteration_s or gap_s >= THIN_GAP * iteration_s:
        return None
    return (f"{model} keeps these jobs apart with {gap_s:.3g} s between their synchronizations "
            f"({gap_s / iteration_s:.1%} of an iteration); on TCP so little slack may not hold: a few ms of jitter "
            f"and the losses where two synchronizations meet can push them into phase (--mode emulate measures it)")


def overlap_fields(mine: Sequence[Tuple[float, float]], theirs: Sequence[Tuple[float, float]]) -> dict:
    """A job's synchronizations against the other jobs': per iteration the share another job's covered and the gap
    to the nearest (0 when they meet); the median share and the smallest gap past warm-up."""
    rounded = [None if v is None else round(v, 4) for v in overlap_share(mine, theirs)]
    kept = [v for v in after_warmup(rounded) if v is not None]
    apart = [g for g in after_warmup(gaps(mine, theirs)) if g is not None]
    return {"overlap": rounded, "overlap_median": statistics.median(kept) if kept else None,
            "gap_min_s": round(min(apart), 6) if apart else None}
