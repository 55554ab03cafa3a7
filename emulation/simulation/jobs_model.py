"""Several jobs in one flow model over time: each job's iterations as one plan (compute as a delay on each rank, then
its synchronization), all jobs' plans merged on the network's hosts, so their flows share links max-min fairly
whenever their synchronizations meet, and each job's compute and synchronizations follow from its own ranks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from emulation.core.job_specs import Hold
from emulation.simulation.flows import Persistent, simulate_plan
from emulation.simulation.routes import Router
from workloads.plan import COPY, Plan, PlanError, Transfer


@dataclass(frozen=True)
class TimedJob:
    """One job for the timeline: its plan on its own ranks, the network host each rank is, the bytes of each of its
    pieces, its compute per iteration (seconds) and when it starts."""

    name: str
    plan: Plan
    hosts: Tuple[int, ...]       # rank -> the network's host index
    piece_bytes: Tuple[int, ...]
    compute_s: float
    start_s: float = 0.0
    sync_starts: Tuple[float, ...] = ()  # replaying a measured run: when each iteration's synchronization began


@dataclass
class JobTimeline:
    """Per job and iteration: when its synchronization started (its first byte) and ended (its last byte landed)."""

    syncs: Dict[str, List[Tuple[float, float]]]

    def iterations(self, job: TimedJob) -> List[float]:
        """Each iteration's time: from the previous synchronization's end (the start, for the first) to its end."""
        ends = [e for _, e in self.syncs[job.name]]
        return [b - a for a, b in zip([job.start_s] + ends, ends)]

    def gsts(self, name: str) -> List[float]:
        """Each iteration's synchronization time."""
        return [e - s for s, e in self.syncs[name]]


def merged_plan(jobs: Sequence[TimedJob], iterations: int, hosts: int):
    """One plan of every job's iterations on the network's hosts: stream j is job j, each iteration a compute step
    (every rank to itself, carrying all its pieces, no bytes: a delay of its compute) then the job's steps. Returns
    the plan, its pieces' bytes, the zero-bit wire map of the compute steps and each compute step's delay."""
    streams, piece_bytes, zero_bits, delays, first_steps = [], [], {}, {}, []
    for s, job in enumerate(jobs):
        if len(job.plan.streams) != 1:
            raise PlanError(f"job {job.name}: {job.plan.name} runs {len(job.plan.streams)} streams; the jobs' flow "
                            f"model times single-stream plans")
        offset = len(piece_bytes)
        piece_bytes += list(job.piece_bytes)
        sync = [tuple(Transfer(job.hosts[t.src], job.hosts[t.dst], offset + t.piece, t.op, t.level) for t in step)
                for step in job.plan.streams[0]]
        pieces = range(offset, offset + job.plan.pieces)
        steps, starts = [], []
        for i in range(iterations):
            compute = tuple(Transfer(h, h, p, COPY) for h in job.hosts for p in pieces)
            n = len(steps)
            if job.sync_starts:  # the measured start stands for the compute and any wait before it
                delays[(s, n)] = job.sync_starts[0] if i == 0 else 0.0
            else:
                delays[(s, n)] = job.compute_s + (job.start_s if i == 0 else 0.0)
            zero_bits.update({(s, n, h, h, p): 0 for h in job.hosts for p in pieces})
            steps.append(compute)
            starts.append(len(steps))
            steps += sync
        streams.append(tuple(steps))
        first_steps.append(starts)
    plan = Plan("jobs", hosts, len(piece_bytes), tuple(streams), tuple(range(hosts)))
    return plan, piece_bytes, zero_bits, delays, first_steps


def hold_gates(jobs: Sequence[TimedJob], iterations: int, first_steps: List[List[int]],
               holds: Dict[str, List[Hold]]) -> Dict[Tuple[int, int], List[Tuple[Tuple[int, int], float]]]:
    """Held offsets as step gates: a job's compute step of iteration k begins no earlier than the other job's of
    iteration k + shift began plus the lag (from iteration 1 on, as the emulated jobs meet at a gate after their
    first)."""
    stream = {job.name: s for s, job in enumerate(jobs)}
    gates: Dict[Tuple[int, int], List[Tuple[Tuple[int, int], float]]] = {}
    for s, job in enumerate(jobs):
        for hold in holds.get(job.name, ()):
            other = stream[hold.job]
            for k in range(1, iterations):
                if 1 <= k + hold.shift < iterations:
                    gates.setdefault((s, first_steps[s][k] - 1), []).append(
                        ((other, first_steps[other][k + hold.shift] - 1), hold.lag_s))
    return gates


def replay_gates(jobs: Sequence[TimedJob], iterations: int,
                 first_steps: List[List[int]]) -> Dict[Tuple[int, int], List[Tuple[Tuple[int, int], float]]]:
    """A replayed job's synchronization of iteration k begins no earlier than its measured start: its compute step
    is gated on the job's first step (which begins at time 0) by that start."""
    gates: Dict[Tuple[int, int], List[Tuple[Tuple[int, int], float]]] = {}
    for s, job in enumerate(jobs):
        for k in range(1, min(iterations, len(job.sync_starts))):
            gates[(s, first_steps[s][k] - 1)] = [((s, 0), job.sync_starts[k])]
    return gates


def simulate_jobs(jobs: Sequence[TimedJob], iterations: int, router: Router, rates: Dict[int, float],
                  latency_s: float = 0.0, background: Sequence[Persistent] = (),
                  holds: Optional[Dict[str, List[Hold]]] = None) -> JobTimeline:
    """Every job's iterations at once on one network (rates: payload bytes/s per link level; holds: each job's
    waits for the others, where offsets are held; a job with sync_starts replays them instead of its compute)."""
    plan, piece_bytes, zero_bits, delays, first_steps = merged_plan(jobs, iterations, len(router.topo.hosts))
    gates = hold_gates(jobs, iterations, first_steps, holds or {})
    for step, more in replay_gates(jobs, iterations, first_steps).items():
        gates.setdefault(step, []).extend(more)
    result = simulate_plan(plan, piece_bytes, router, rates, latency_s=latency_s, wire_bits=zero_bits,
                           background=background, step_delays=delays, keep_units=True,
                           step_gates=gates)
    syncs: Dict[str, List[Tuple[float, float]]] = {}
    per_step: Dict[Tuple[int, int], Tuple[float, float]] = {}
    for (stream, step, src, dst, size, start, sent, level), landed in zip(result.units, result.arrived_s):
        lo, hi = per_step.get((stream, step), (float("inf"), 0.0))
        per_step[(stream, step)] = (min(lo, start), max(hi, landed))
    for s, job in enumerate(jobs):
        steps = len(job.plan.streams[0])
        out = []
        for first in first_steps[s]:
            spans = [per_step[(s, n)] for n in range(first, first + steps) if (s, n) in per_step]
            out.append((min(a for a, _ in spans), max(b for _, b in spans)) if spans else (0.0, 0.0))
        syncs[job.name] = out
    return JobTimeline(syncs)


def others_syncs(timeline: JobTimeline, name: str) -> List[Tuple[float, float]]:
    """Every other job's synchronizations."""
    return [iv for other, spans in timeline.syncs.items() if other != name for iv in spans]
