"""A pipeline's timeline: each stage runs its passes in its schedule's order, a forward waiting for the previous
stage's activation, a backward for the next stage's gradient (each after its send time); per stage its lanes and
its bubble, the idle share of the pipeline's span."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence

from workloads.pipeline_schedule import stage_ops


@dataclass(frozen=True)
class Span:
    """One stretch of a stage's lane: a pass ('F'/'B'), a send ('send-F'/'send-B') or the data-parallel sum ('dp')."""
    stage: int
    kind: str
    micro_batch: int
    start: float
    end: float


@dataclass(frozen=True)
class Timeline:
    """Every stage's spans, when each finished its passes, and the iteration's end."""
    spans: List[Span]
    finished: List[float]
    iteration: float

    def busy(self, stage: int) -> float:
        """Seconds a stage spent in its passes."""
        return sum(s.end - s.start for s in self.spans if s.stage == stage and s.kind in ("F", "B"))

    def bubble(self, stage: int) -> float:
        """A stage's idle share of the span from the first pass to the last stage's last pass."""
        span = max(self.finished)
        return 1.0 - self.busy(stage) / span if span > 0 else 0.0

    def bubbles(self) -> List[float]:
        """Every stage's bubble share."""
        return [self.bubble(s) for s in range(len(self.finished))]


def pipeline_timeline(schedule: str, micro_batches: int, forward_s: Sequence[float], backward_s: Sequence[float],
                      send_s: Sequence[float] = (), dp_s: Sequence[float] = ()) -> Timeline:
    """The timeline of len(forward_s) stages (forward_s[s], backward_s[s]: a micro-batch's passes on stage s;
    send_s[s]: sending between stages s and s+1, either way; dp_s[s]: stage s's gradient sum after its last pass)."""
    stages = len(forward_s)
    send = list(send_s) or [0.0] * max(stages - 1, 0)
    orders = [stage_ops(schedule, s, stages, micro_batches) for s in range(stages)]
    done: Dict[tuple, float] = {}
    free, nxt, spans = [0.0] * stages, [0] * stages, []
    while any(nxt[s] < len(orders[s]) for s in range(stages)):
        moved = False
        for s in range(stages):
            while nxt[s] < len(orders[s]):
                kind, i = orders[s][nxt[s]]
                ready = ready_at(kind, s, i, stages, done, send)
                if ready is None:
                    break
                start = max(free[s], ready)
                free[s] = start + (forward_s[s] if kind == "F" else backward_s[s])
                done[(kind, s, i)] = free[s]
                spans.append(Span(s, kind, i, start, free[s]))
                if kind == "F" and s < stages - 1 or kind == "B" and s > 0:
                    hop = send[s] if kind == "F" else send[s - 1]
                    spans.append(Span(s, "send-" + kind, i, free[s], free[s] + hop))
                nxt[s] += 1
                moved = True
        if not moved:
            raise RuntimeError(f"{schedule} pipeline of {stages} stages deadlocked")  # a schedule's bug, not input
    finished = list(free)
    ends = []
    for s in range(stages):
        took = dp_s[s] if s < len(dp_s) else 0.0
        if took:
            spans.append(Span(s, "dp", -1, finished[s], finished[s] + took))
        ends.append(finished[s] + took)
    return Timeline(spans, finished, max(ends) if ends else 0.0)


def ready_at(kind: str, stage: int, micro_batch: int, stages: int, done: Dict[tuple, float], send: List[float]):
    """When a pass's input has arrived (None: its producer has not run yet)."""
    if kind == "F":
        if stage == 0:
            return 0.0
        got = done.get(("F", stage - 1, micro_batch))
        return None if got is None else got + send[stage - 1]
    if stage == stages - 1:
        return done.get(("F", stage, micro_batch))
    got = done.get(("B", stage + 1, micro_batch))
    return None if got is None else got + send[stage]
