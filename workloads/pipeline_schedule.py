"""The order a pipeline stage runs its micro-batches' forward and backward passes in: GPipe (every forward, then
every backward) or 1F1B (PipeDream-Flush: p-s-1 forwards to fill, then one forward and one backward in turn)."""

from __future__ import annotations

from typing import List, Tuple

SCHEDULES = ("gpipe", "1f1b")
Op = Tuple[str, int]  # ("F" | "B", micro-batch)


class ScheduleError(ValueError):
    """An unknown schedule or a pipeline it cannot run."""


def check_schedule(name: str, micro_batches: int) -> str:
    """The schedule's name if it is known and there is at least one micro-batch (ScheduleError otherwise)."""
    if name not in SCHEDULES:
        raise ScheduleError(f"--schedule {name} is unknown: give one of {', '.join(SCHEDULES)}")
    if micro_batches < 1:
        raise ScheduleError(f"--micro-batches {micro_batches}: give a positive number of micro-batches")
    return name


def stage_ops(schedule: str, stage: int, stages: int, micro_batches: int) -> List[Op]:
    """Stage `stage` of `stages`' passes in the order it runs them."""
    m = micro_batches
    if schedule == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    check_schedule(schedule, m)
    warmup = min(stages - stage - 1, m)
    ops: List[Op] = [("F", i) for i in range(warmup)]
    for i in range(m - warmup):
        ops += [("F", warmup + i), ("B", i)]
    return ops + [("B", i) for i in range(m - warmup, m)]


def in_flight(ops: List[Op]) -> int:
    """The most micro-batches whose activations a stage holds at once under this order (its memory bound)."""
    held = peak = 0
    for kind, _ in ops:
        held += 1 if kind == "F" else -1
        peak = max(peak, held)
    return peak
