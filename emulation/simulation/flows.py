"""Run one synchronization of a Plan as flows: the engine's execution rules, max-min fair links.

A message is everything rank src sends to dst in one step of one stream (the engine carries it on one
connection, chunk after chunk). The unit that moves is the message itself, or (chunk granularity) each of
the engine's chunks, consecutive small ones joined. Each unit has a send side (at src) and a receive side (at
dst), and each side starts under the engine's rules (workloads/engine.py):
- a rank's connection carries its units in plan order (one after the other);
- a side waits until this rank finished every earlier-step operation on the data it carries;
- a send waits until this rank's earlier-step sends on the same link level are out (any stream);
- in a plan with step barriers (meta["barriers"]), a side waits until this rank finished every earlier step of
  its stream.
A send side starts its flow; the flow shares every directed link of its path max-min fairly with the other
flows and arrives `latency_s` after its last byte left. A receive side ends when it is ready and its flow
arrived; a send side when its flow arrived.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from emulation.simulation.fairshare import max_min_rates
from emulation.simulation.gcpause import cycle_collection_paused
from emulation.simulation.flow_graph import WireBits, build, gather_index
from emulation.simulation.routes import Router
from workloads.plan import Plan

TIME_TOLERANCE = 1e-9
GRANULARITIES = ("chunk", "message")
TRACE_UNITS = 200_000  # a simulation keeps its transfers for a timeline up to this many
Step = Tuple[int, int]  # (stream, step) of a plan


@dataclass
class FlowResult:
    """What one simulated synchronization did."""

    gst_s: float
    messages: int
    link_bytes: Dict[Tuple[str, str], float]  # payload bytes per directed link
    link_busy_s: Dict[Tuple[str, str], float]  # time with at least one flow on the link
    host_tx_bytes: Dict[Tuple[int, int], float]  # (rank, interface level) -> payload bytes sent
    rank_done_s: List[float]
    events: int
    # per unit, for timelines (None past TRACE_UNITS): stream, step, src, dst, bytes, first byte sent,
    # last byte left, link level
    units: Optional[List[Tuple[int, int, int, int, float, float, float, int]]] = None
    background_bytes: Optional[List[float]] = None  # per background flow: bytes it moved while the plan ran
    arrived_s: Optional[List[float]] = None  # per unit (beside units): when its last byte landed


@dataclass(frozen=True)
class Persistent:
    """A flow that never ends (background traffic): its directed links, a rate cap in bytes/s (None: as fast as
    its share) and the (start, end) seconds it sends in, on the run's clock (None: always)."""

    hops: Tuple[Tuple[str, str], ...]
    cap: Optional[float] = None
    intervals: Optional[Tuple[Tuple[float, float], ...]] = None

    def sending(self, t: float) -> bool:
        """Whether it sends at run time t."""
        return self.intervals is None or any(a <= t < b for a, b in self.intervals)

    def next_change(self, t: float) -> float:
        """The first run time after t at which it starts or stops sending (inf: never)."""
        if self.intervals is None:
            return float("inf")
        return min((x for a, b in self.intervals for x in (a, b) if x > t + TIME_TOLERANCE), default=float("inf"))


def simulate_plan(plan: Plan, piece_bytes: Sequence[int], router: Router, rates: Dict[int, float],
                  latency_s: Union[float, Dict[int, float]] = 0.0, chunk_bytes: Optional[int] = None,
                  link_delay_s: Optional[Dict[int, float]] = None,
                  wire_bits: Optional[WireBits] = None, background: Sequence[Persistent] = (),
                  start_s: float = 0.0, step_delays: Optional[Dict[Tuple[int, int], float]] = None,
                  keep_units: bool = False, step_gates: Optional[Dict[Step, List[Tuple[Step, float]]]] = None
                  ) -> FlowResult:
    """One synchronization of `plan`; rates: payload bytes/s of a directed link per link level; latency_s: one
    value, or per link level (a unit takes the latency of the highest level its path crosses); link_delay_s:
    propagation delay of a directed link per level, added for every link a unit's path crosses; chunk_bytes:
    move data in the engine's chunks (a chunk goes on once its own earlier steps are done), else in whole
    messages (a step's message waits for all its pieces, as the closed forms assume); wire_bits: bits per value of
    each transfer, keyed (stream, step, src, dst, piece), when a codec packs them (else fp32); background: flows
    that share the links all along, each while it sends; start_s: the run time at which this synchronization
    starts (on the background flows' clock); step_delays: (stream, step) -> seconds every unit of that step takes
    on top of its latency (a compute phase as a delay); keep_units: keep every unit for the result, however many;
    step_gates: (stream, step) -> [((stream, step), lag)]: a unit of that step begins no earlier than each named
    step's first unit began plus its lag (a held offset between jobs)."""
    with cycle_collection_paused():
        return _simulate(plan, piece_bytes, router, rates, latency_s, chunk_bytes, link_delay_s, wire_bits,
                         background, start_s, step_delays or {}, keep_units, step_gates or {})


def _simulate(plan: Plan, piece_bytes: Sequence[int], router: Router, rates: Dict[int, float],
              latency_s: Union[float, Dict[int, float]], chunk_bytes: Optional[int],
              link_delay_s: Optional[Dict[int, float]], wire_bits: Optional[WireBits],
              background: Sequence[Persistent] = (), start_s: float = 0.0,
              step_delays: Optional[Dict[Tuple[int, int], float]] = None, keep_units: bool = False,
              step_gates: Optional[Dict[Step, List[Tuple[Step, float]]]] = None) -> FlowResult:
    """simulate_plan's work: every node that becomes ready at one time is handled with the others (arrays)."""
    g = build(plan, piece_bytes, chunk_bytes, wire_bits)
    count, sides = len(g.src), g.sides
    lengths, flat_links, hops_by_id = router.paths(g.src, g.dst, g.level, g.stream)
    path_start = np.cumsum(lengths) - lengths  # unit m's links: flat_links[path_start[m]:][:lengths[m]]
    plan_link_count = len(hops_by_id)
    link_ids = {h: n for n, h in enumerate(hops_by_id)}
    bg_links = [[link_ids.setdefault(h, len(link_ids)) for h in b.hops] for b in background]
    hops_by_id = list(link_ids)
    orders = [(s, n) for s, stream in enumerate(plan.streams) for n in range(len(stream))]
    latency = unit_latency(router, hops_by_id, lengths, flat_links, latency_s, link_delay_s)
    if step_delays:
        latency = latency + np.array([step_delays.get(k, 0.0) for k in orders])[g.order]
    capacity = np.array([router.capacity(h, rates) for h in hops_by_id], dtype=float)
    for n, b in enumerate(background):  # a capped flow crosses a link of its own at its cap
        if b.cap is not None:
            bg_links[n] = bg_links[n] + [len(capacity)]
            capacity = np.append(capacity, b.cap)
    bg_bytes = [0.0] * len(background)
    idx = np.zeros(0, dtype=np.int64)  # the units sending, ascending
    started: List[np.ndarray] = []  # units that began sending since idx was last brought up to date
    link_bytes = np.zeros(len(hops_by_id))
    busy = np.zeros(len(hops_by_id))
    remaining = g.bytes.astype(float).copy()
    pending = g.pending
    side_rank = np.empty(sides, dtype=np.int64)
    side_rank[0::2], side_rank[1::2] = g.src, g.dst
    arrived = np.zeros(count, dtype=bool)
    recv_ready = np.zeros(count, dtype=bool)
    rank_done = np.zeros(plan.ranks)
    arrivals: List[Tuple[float, int, np.ndarray]] = []  # (time, tie-break, units landing then)
    tie = itertools.count()
    started_at = np.zeros(count)
    sent_at = np.zeros(count)
    landed_at = np.zeros(count)
    none = np.zeros(0, dtype=np.int64)
    now = 0.0
    events = 0
    place = {k: n for n, k in enumerate(orders)}  # a gate on a step this plan lacks waits for ever (a cycle)
    gates = {place[k]: [(place.get(k2, -1), lag) for k2, lag in v] for k, v in (step_gates or {}).items()
             if k in place}
    gated = np.zeros(len(orders), dtype=bool)
    gated[list(gates)] = True
    step_began: Dict[int, float] = {}
    parked: Dict[int, List[int]] = {}   # gated units waiting for a step to begin
    wakeups: List[Tuple[float, int]] = []  # (time, unit) of gated units waiting out their lag

    def complete(nodes: np.ndarray, t: float) -> None:
        """These nodes are done at t: so is every node whose last dependency they were, and so on."""
        while len(nodes):
            done_sides = nodes[nodes < sides]
            if len(done_sides):
                np.maximum.at(rank_done, side_rank[done_sides], t)
            waiting = g.dependents_of(nodes)
            if not len(waiting):
                return
            np.subtract.at(pending, waiting, 1)
            nodes = ready(distinct(waiting[pending[waiting] == 0]), t)

    def landed(units: np.ndarray) -> np.ndarray:
        """These units arrived: their send sides are done, and their receive sides that were waiting for them."""
        arrived[units] = True
        return np.concatenate([2 * units, 2 * units[recv_ready[units]] + 1])

    def transmitted(units: np.ndarray, t: float) -> np.ndarray:
        """These units' last bytes left at t: each lands its latency later (now when it has none)."""
        sent_at[units] = t
        late = latency[units] > 0
        if late.any():
            at = t + latency[units[late]]
            for when in np.unique(at):
                heapq.heappush(arrivals, (float(when), next(tie), units[late][at == when]))
        now_in = units[~late]
        landed_at[now_in] = t
        return landed(now_in)

    def ready(nodes: np.ndarray, t: float) -> np.ndarray:
        """Start what these nodes can start once their dependencies are done; returns the nodes completed now."""
        joins = nodes[nodes >= sides]
        recv = nodes[(nodes < sides) & (nodes % 2 == 1)]
        send = nodes[(nodes < sides) & (nodes % 2 == 0)] >> 1
        here = arrived[recv >> 1]
        recv_ready[recv[~here] >> 1] = True
        done = [joins, recv[here]]
        if gates and len(send):
            held = gated[g.order[send]]
            for m in send[held].tolist():
                done.append(gated_ready(m, t))
            send = send[~held]
        done.append(begin(send, t))
        return np.concatenate(done)

    def gated_ready(m: int, t: float) -> np.ndarray:
        """A gated unit begins no earlier than each step it is gated on began, plus its lag."""
        waiting = [g2 for g2, _ in gates[int(g.order[m])] if g2 not in step_began]
        if waiting:
            parked.setdefault(waiting[0], []).append(m)
            return none
        start = max(step_began[g2] + lag for g2, lag in gates[int(g.order[m])])
        if start > t + TIME_TOLERANCE:
            heapq.heappush(wakeups, (start, m))
            return none
        return begin(np.array([m], dtype=np.int64), t)

    def begin(units: np.ndarray, t: float) -> np.ndarray:
        """These units begin at t (a step begins with its first unit, releasing what waits for that)."""
        if not len(units):
            return none
        started_at[units] = t
        done = []
        if gates:
            for step in np.unique(g.order[units]).tolist():
                if step not in step_began:
                    step_began[step] = t
                    for m in parked.pop(step, ()):
                        done.append(gated_ready(m, t))
        empty = remaining[units] <= 0
        done.append(transmitted(units[empty], t))
        started.append(units[~empty])
        return np.concatenate(done)

    complete(ready(np.flatnonzero(pending == 0), 0.0), 0.0)
    while started or len(idx) or arrivals or wakeups:
        events += 1
        if started:
            idx = np.sort(np.concatenate([idx, *started]))  # a unit starts once: none is in idx already
            started.clear()
        if len(idx):  # the sending units' links, gathered from their paths (work in what sends, not in all)
            lens = lengths[idx]
            flow_of = np.repeat(np.arange(len(idx), dtype=np.int32), lens)
            link_of = flat_links[gather_index(path_start, lens, idx)]
            active = [n for n, b in enumerate(background) if b.sending(start_s + now)]
            if active:  # background flows take their max-min share beside the plan's
                extra_links = [l for n in active for l in bg_links[n]]
                extra_flows = [len(idx) + k for k, n in enumerate(active) for _ in bg_links[n]]
                both = max_min_rates(np.concatenate([flow_of, np.array(extra_flows, dtype=np.int64)]),
                                     np.concatenate([link_of, np.array(extra_links, dtype=np.int64)]), capacity,
                                     len(idx) + len(active))
                rate, bg_rate = both[:len(idx)], both[len(idx):]
            else:
                rate = max_min_rates(flow_of, link_of, capacity, len(idx))
            left = remaining[idx]
            finish = left / rate
            dt = float(finish.min())
        else:
            dt = float("inf")
        if arrivals and arrivals[0][0] - now < dt:
            dt = arrivals[0][0] - now
        if wakeups and wakeups[0][0] - now < dt:
            dt = wakeups[0][0] - now
        if background:  # a background flow starting or stopping changes every share
            change = min(b.next_change(start_s + now) for b in background) - start_s - now
            if change < dt:
                dt = change
        finished = idx
        if len(idx) and active:
            for k, n in enumerate(active):
                bg_bytes[n] += float(bg_rate[k]) * dt
        if len(idx):
            moved = np.minimum(rate * dt, left)
            remaining[idx] = left - moved
            link_bytes += np.bincount(link_of, weights=moved[flow_of], minlength=len(hops_by_id))
            busy[np.bincount(link_of, minlength=len(hops_by_id)) > 0] += dt
            done_now = finish <= dt * (1 + 1e-9) + TIME_TOLERANCE
            finished = idx[done_now]
            remaining[finished] = 0.0
            idx = idx[~done_now]
        now += dt
        completed = [transmitted(finished, now)]
        while arrivals and arrivals[0][0] <= now + TIME_TOLERANCE:
            at, _, units = heapq.heappop(arrivals)
            landed_at[units] = at
            completed.append(landed(units))
        while wakeups and wakeups[0][0] <= now + TIME_TOLERANCE:
            _, m = heapq.heappop(wakeups)
            completed.append(begin(np.array([m], dtype=np.int64), now))
        complete(np.concatenate(completed), now)
    unfinished = int((pending > 0).sum())
    if unfinished:
        raise RuntimeError(f"{plan.name}: {unfinished} operations never became ready (a dependency cycle)")
    kept = count <= TRACE_UNITS or keep_units
    units = list(zip(g.stream.tolist(), g.step.tolist(), g.src.tolist(), g.dst.tolist(), g.bytes.tolist(),
                     started_at.tolist(), sent_at.tolist(), g.level.tolist())) if kept else None
    plan_hops = hops_by_id[:plan_link_count]  # background flows' own links are not the plan's
    moved = link_bytes[:plan_link_count].tolist()
    return FlowResult(now, count, dict(zip(plan_hops, moved)), dict(zip(plan_hops, busy.tolist())),
                      host_bytes(router, plan_hops, moved), rank_done.tolist(), events,
                      units, bg_bytes if background else None, landed_at.tolist() if kept else None)


def unit_latency(router: Router, hops: List[Tuple[str, str]], lengths: np.ndarray, flat_links: np.ndarray,
                 latency_s: Union[float, Dict[int, float]], link_delay_s: Optional[Dict[int, float]]) -> np.ndarray:
    """Each unit's latency: one value, or its path's highest level's; plus the delay of every link it crosses."""
    count = len(lengths)
    if not isinstance(latency_s, dict) and not link_delay_s:
        return np.full(count, float(latency_s))
    link_level = np.array([router.level_of[h] for h in hops], dtype=np.int64)
    unit_of_link = np.repeat(np.arange(count, dtype=np.int32), lengths)
    if isinstance(latency_s, dict):
        top = np.zeros(count, dtype=np.int64)
        np.maximum.at(top, unit_of_link, link_level[flat_links])
        fallback = max(latency_s.values())
        latency = np.array([latency_s.get(level, fallback) for level in range(int(top.max(initial=0)) + 1)])[top]
    else:
        latency = np.full(count, float(latency_s))
    if link_delay_s:
        delay = np.array([link_delay_s.get(level, 0.0) for level in range(int(link_level.max(initial=0)) + 1)])
        latency = latency + np.bincount(unit_of_link, weights=delay[link_level[flat_links]], minlength=count)
    return latency


def distinct(values: np.ndarray) -> np.ndarray:
    """The values, each once, ascending (a sort: numpy's unique hashes, slower on millions)."""
    values = np.sort(values)
    keep = np.ones(len(values), dtype=bool)
    keep[1:] = values[1:] != values[:-1]
    return values[keep]


def host_bytes(router: Router, hops: Sequence[Tuple[str, str]], moved: Sequence[float]
               ) -> Dict[Tuple[int, int], float]:
    """Payload bytes each host sent on each of its interfaces' levels (relays too), keyed (host, level), from the
    bytes each of the plan's links carried."""
    names = {h.name: h.index for h in router.topo.hosts}
    sent: Dict[Tuple[int, int], float] = {}
    for (a, b), n in zip(hops, moved):
        if a in names:
            key = (names[a], router.level_of[(a, b)])
            sent[key] = sent.get(key, 0.0) + n
    return sent


def in_sequence(results: Sequence[FlowResult]) -> FlowResult:
    """Phases that run one after another (Parameter Flow's push, then its broadcast) as one synchronization: times
    add, bytes and busy times add per link, and each phase's units start where the previous phase ended."""
    offset, units, link_bytes, busy, host_tx = 0.0, [], {}, {}, {}
    for n, r in enumerate(results):
        for target, source in ((link_bytes, r.link_bytes), (busy, r.link_busy_s), (host_tx, r.host_tx_bytes)):
            for k, v in source.items():
                target[k] = target.get(k, 0.0) + v
        if units is not None and r.units is not None:
            units += [(n, step, src, dst, size, start + offset, end + offset, level)
                      for (_, step, src, dst, size, start, end, level) in r.units]
        else:
            units = None
        offset += r.gst_s
    last = results[-1]
    moved = [r.background_bytes for r in results if r.background_bytes is not None]
    return FlowResult(offset, sum(r.messages for r in results), link_bytes, busy, host_tx,
                      [offset - last.gst_s + t for t in last.rank_done_s], sum(r.events for r in results), units,
                      [sum(b) for b in zip(*moved)] if moved else None)
