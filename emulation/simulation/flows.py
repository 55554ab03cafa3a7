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

from emulation.simulation.fairshare import TIME_TOLERANCE, finishing, max_min_rates
from emulation.simulation.gcpause import cycle_collection_paused
from emulation.simulation.flow_graph import FlowGraph, WireBits, build, gather_index
from emulation.simulation.recurrence import durations, links_unshared, longest_paths, unfinished, unit_rates
from emulation.simulation.stepwise import Declined, simulate_stepwise
from emulation.simulation.routes import Router
from workloads.plan import Plan

GRANULARITIES = ("chunk", "message")
FLOW_METHODS = ("auto", "events")
TRACE_UNITS = 200_000  # a simulation keeps its transfers for a timeline up to this many
GRAPH_ROWS = 40_000_000  # transfers the graph of the event model (about 450 bytes each) may hold: 18 GB
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
    method: str = "events"  # how it was answered: "stepwise" (steps apart on links), "recurrence" (no link ever
    # shared) or "events"
    distinct_steps: Optional[int] = None  # stepwise: the steps of distinct shape, each solved once
    shared_steps: Optional[int] = None  # stepwise: the steps whose messages shared a link (by their fair shares)

    def answered(self) -> Dict[str, object]:
        """How it was answered, in words and counts, for the summary."""
        words = {"stepwise": "by steps: no message meets another step's on a link, so every message runs at its "
                             "path's slowest link or, sharing links within its step, at the max-min shares "
                             "recomputed as each starts or finishes (exact); a step like an earlier one reuses its "
                             "paths, rates and shares",
                 "recurrence": "by the recurrence over the plan's graph: no link is ever shared, so every flow runs at "
                               "its path's slowest link (exact)",
                 "events": "by events: flows share links max-min fairly, the shares recomputed whenever a flow starts "
                           "or finishes"}
        out: Dict[str, object] = {"method": self.method, "how": "; then ".join(words.get(m, m) for m in
                                                                              self.method.split("+")),
                                  "messages": self.messages}
        out["steps" if self.method == "stepwise" else "events"] = self.events
        if self.distinct_steps is not None:
            out["distinct_steps"] = self.distinct_steps
        if self.shared_steps is not None:
            out["shared_steps"] = self.shared_steps
        return out


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
                  keep_units: bool = False, step_gates: Optional[Dict[Step, List[Tuple[Step, float]]]] = None,
                  method: str = "auto") -> FlowResult:
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
    step's first unit began plus its lag (a held offset between jobs); method: "auto" (the recurrence where no link
    can be shared, else events), or "events" (the event model whatever the plan)."""
    with cycle_collection_paused():
        return _simulate(plan, piece_bytes, router, rates, latency_s, chunk_bytes, link_delay_s, wire_bits,
                         background, start_s, step_delays or {}, keep_units, step_gates or {}, method)


def _simulate(plan: Plan, piece_bytes: Sequence[int], router: Router, rates: Dict[int, float],
              latency_s: Union[float, Dict[int, float]], chunk_bytes: Optional[int],
              link_delay_s: Optional[Dict[int, float]], wire_bits: Optional[WireBits],
              background: Sequence[Persistent] = (), start_s: float = 0.0,
              step_delays: Optional[Dict[Tuple[int, int], float]] = None, keep_units: bool = False,
              step_gates: Optional[Dict[Step, List[Tuple[Step, float]]]] = None, method: str = "auto") -> FlowResult:
    """simulate_plan's work: the graph and its paths, then the recurrence where no link can be shared (and nothing
    beside the plan shares one), else the events."""
    if method == "auto" and not background and not step_gates and not wire_bits:
        try:
            return by_steps(plan, piece_bytes, router, rates, latency_s, link_delay_s, chunk_bytes, step_delays or {},
                            keep_units)
        except Declined as why:
            declined = f"it cannot be answered by steps ({why})"
    else:
        declined = "events were asked for" if method == "events" else "something beside the plan shares its links"
    rows = sum(len(step) for stream in plan.streams for step in stream)
    if rows > GRAPH_ROWS:
        raise RuntimeError(f"{plan.name}: {declined}, and its {rows:.2e} transfers are too many for the event model "
                           f"(at most {GRAPH_ROWS:.0e})")
    g = build(plan, piece_bytes, chunk_bytes, wire_bits)
    net = Network(g, plan, router, rates, latency_s, link_delay_s, background, step_delays)
    if method == "auto" and not background and not step_gates and \
            links_unshared(g, net.lengths, net.flat_links, net.plan_link_count):
        return by_recurrence(g, plan, net, keep_units)
    return EventRun(g, plan, net, start_s, step_gates or {}).run(keep_units)


class Network:
    """What the plan's units meet: their paths (as link ids), every link's capacity, each unit's latency, and the
    background flows' links (a capped one with a link of its own at its cap)."""

    def __init__(self, g: FlowGraph, plan: Plan, router: Router, rates: Dict[int, float],
                 latency_s: Union[float, Dict[int, float]], link_delay_s: Optional[Dict[int, float]],
                 background: Sequence[Persistent], step_delays: Optional[Dict[Tuple[int, int], float]]):
        self.router, self.background = router, background
        self.lengths, self.flat_links, hops_by_id = router.paths(g.src, g.dst, g.level, g.stream)
        self.path_start = np.cumsum(self.lengths) - self.lengths  # unit m's links: flat_links[path_start[m]:][:len]
        self.plan_link_count = len(hops_by_id)
        link_ids = {h: n for n, h in enumerate(hops_by_id)}
        self.bg_links = [[link_ids.setdefault(h, len(link_ids)) for h in b.hops] for b in background]
        self.hops_by_id = list(link_ids)
        orders = [(s, n) for s, stream in enumerate(plan.streams) for n in range(len(stream))]
        self.latency = unit_latency(router, self.hops_by_id, self.lengths, self.flat_links, latency_s, link_delay_s)
        if step_delays:
            self.latency = self.latency + np.array([step_delays.get(k, 0.0) for k in orders])[g.order]
        self.capacity = np.array([router.capacity(h, rates) for h in self.hops_by_id], dtype=float)
        for n, b in enumerate(background):  # a capped flow crosses a link of its own at its cap
            if b.cap is not None:
                self.bg_links[n] = self.bg_links[n] + [len(self.capacity)]
                self.capacity = np.append(self.capacity, b.cap)

    def result(self, g: FlowGraph, plan: Plan, gst: float, link_bytes: np.ndarray, busy: np.ndarray,
               rank_done: np.ndarray, events: int, units, landed, background_bytes) -> FlowResult:
        """The synchronization's result: the plan's own links only (background flows' links are not the plan's)."""
        plan_hops = self.hops_by_id[:self.plan_link_count]
        moved = link_bytes[:self.plan_link_count].tolist()
        return FlowResult(gst, len(g.src), dict(zip(plan_hops, moved)), dict(zip(plan_hops, busy.tolist())),
                          host_bytes(self.router, plan_hops, moved), rank_done.tolist(), events, units,
                          background_bytes, landed)


def by_steps(plan: Plan, piece_bytes: Sequence[int], router: Router, rates: Dict[int, float],
             latency_s: Union[float, Dict[int, float]], link_delay_s: Optional[Dict[int, float]],
             chunk_bytes: Optional[int], step_delays: Dict[Tuple[int, int], float], keep_units: bool) -> FlowResult:
    """The synchronization step by step, where no message meets another step's on a link (stepwise.py; Declined where
    it cannot)."""
    def latency(hops, lengths, flat):
        return unit_latency(router, hops, lengths, flat, latency_s, link_delay_s)
    r = simulate_stepwise(plan, piece_bytes, router, rates, latency, chunk_bytes, step_delays, True,
                          1 << 62 if keep_units else TRACE_UNITS)
    moved = r.link_bytes.tolist()
    return FlowResult(r.gst_s, r.units, dict(zip(r.hops, moved)), dict(zip(r.hops, r.busy.tolist())),
                      host_bytes(router, r.hops, moved), r.rank_done.tolist(), r.steps, r.rows, None, r.landed,
                      method="stepwise", distinct_steps=r.distinct_steps, shared_steps=r.shared_steps)


def unit_rows(g: FlowGraph, started: np.ndarray, sent: np.ndarray):
    """Every unit for a timeline: stream, step, src, dst, bytes, first byte sent, last byte left, link level."""
    return list(zip(g.stream.tolist(), g.step.tolist(), g.src.tolist(), g.dst.tolist(), g.bytes.tolist(),
                    started.tolist(), sent.tolist(), g.level.tolist()))


def by_recurrence(g: FlowGraph, plan: Plan, net: Network, keep_units: bool) -> FlowResult:
    """The synchronization where no link is ever shared: every flow at its path's slowest link (recurrence.py)."""
    rate = unit_rates(net.lengths, net.flat_links, net.capacity)
    duration = durations(g, rate)
    times = longest_paths(g, duration, net.latency)
    missing = unfinished(times)
    if missing:
        raise RuntimeError(f"{plan.name}: {missing} operations never became ready (a dependency cycle)")
    unit_of_link = np.repeat(np.arange(len(g.src), dtype=np.int64), net.lengths)
    links = len(net.hops_by_id)
    moving = g.bytes[unit_of_link] > 0
    link_bytes = np.bincount(net.flat_links, weights=g.bytes[unit_of_link], minlength=links)
    busy = np.bincount(net.flat_links[moving], weights=duration[unit_of_link][moving], minlength=links)
    rank_done = np.zeros(plan.ranks)
    sides = g.sides
    np.maximum.at(rank_done, g.src, times.done[0:sides:2])
    np.maximum.at(rank_done, g.dst, times.done[1:sides:2])
    gst = float(times.done.max(initial=0.0))
    kept = len(g.src) <= TRACE_UNITS or keep_units
    result = net.result(g, plan, gst, link_bytes, busy, rank_done, times.rounds,
                        unit_rows(g, times.started, times.sent) if kept else None,
                        times.landed.tolist() if kept else None, None)
    result.method = "recurrence"
    return result


class EventRun:
    """The event model: every node that becomes ready at one time is handled with the others (arrays); between two
    events the flows that send share their links max-min fairly."""

    def __init__(self, g: FlowGraph, plan: Plan, net: Network, start_s: float,
                 step_gates: Dict[Step, List[Tuple[Step, float]]]):
        self.g, self.plan, self.net, self.start_s = g, plan, net, start_s
        count, links = len(g.src), len(net.hops_by_id)
        self.bg_bytes = [0.0] * len(net.background)
        self.idx = np.zeros(0, dtype=np.int64)  # the units sending, ascending
        self.started: List[np.ndarray] = []  # units that began sending since idx was last brought up to date
        self.link_bytes, self.busy = np.zeros(links), np.zeros(links)
        self.remaining = g.bytes.astype(float).copy()
        self.pending = g.pending
        self.side_rank = np.empty(g.sides, dtype=np.int64)
        self.side_rank[0::2], self.side_rank[1::2] = g.src, g.dst
        self.arrived, self.recv_ready = np.zeros(count, dtype=bool), np.zeros(count, dtype=bool)
        self.rank_done = np.zeros(plan.ranks)
        self.arrivals: List[Tuple[float, int, np.ndarray]] = []  # (time, tie-break, units landing then)
        self.tie = itertools.count()
        self.started_at, self.sent_at, self.landed_at = np.zeros(count), np.zeros(count), np.zeros(count)
        self.none = np.zeros(0, dtype=np.int64)
        self.now, self.events = 0.0, 0
        orders = [(s, n) for s, stream in enumerate(plan.streams) for n in range(len(stream))]
        place = {k: n for n, k in enumerate(orders)}  # a gate on a step this plan lacks waits for ever (a cycle)
        self.gates = {place[k]: [(place.get(k2, -1), lag) for k2, lag in v] for k, v in step_gates.items()
                      if k in place}
        self.gated = np.zeros(len(orders), dtype=bool)
        self.gated[list(self.gates)] = True
        self.step_began: Dict[int, float] = {}
        self.parked: Dict[int, List[int]] = {}   # gated units waiting for a step to begin
        self.wakeups: List[Tuple[float, int]] = []  # (time, unit) of gated units waiting out their lag

    def complete(self, nodes: np.ndarray, t: float) -> None:
        """These nodes are done at t: so is every node whose last dependency they were, and so on."""
        g = self.g
        while len(nodes):
            done_sides = nodes[nodes < g.sides]
            if len(done_sides):
                np.maximum.at(self.rank_done, self.side_rank[done_sides], t)
            waiting = g.dependents_of(nodes)
            if not len(waiting):
                return
            np.subtract.at(self.pending, waiting, 1)
            nodes = self.ready(distinct(waiting[self.pending[waiting] == 0]), t)

    def landed(self, units: np.ndarray) -> np.ndarray:
        """These units arrived: their send sides are done, and their receive sides that were waiting for them."""
        self.arrived[units] = True
        return np.concatenate([2 * units, 2 * units[self.recv_ready[units]] + 1])

    def transmitted(self, units: np.ndarray, t: float) -> np.ndarray:
        """These units' last bytes left at t: each lands its latency later (now when it has none)."""
        self.sent_at[units] = t
        late = self.net.latency[units] > 0
        if late.any():
            at = t + self.net.latency[units[late]]
            for when in np.unique(at):
                heapq.heappush(self.arrivals, (float(when), next(self.tie), units[late][at == when]))
        now_in = units[~late]
        self.landed_at[now_in] = t
        return self.landed(now_in)

    def ready(self, nodes: np.ndarray, t: float) -> np.ndarray:
        """Start what these nodes can start once their dependencies are done; returns the nodes completed now."""
        sides = self.g.sides
        joins = nodes[nodes >= sides]
        recv = nodes[(nodes < sides) & (nodes % 2 == 1)]
        send = nodes[(nodes < sides) & (nodes % 2 == 0)] >> 1
        here = self.arrived[recv >> 1]
        self.recv_ready[recv[~here] >> 1] = True
        done = [joins, recv[here]]
        if self.gates and len(send):
            held = self.gated[self.g.order[send]]
            for m in send[held].tolist():
                done.append(self.gated_ready(m, t))
            send = send[~held]
        done.append(self.begin(send, t))
        return np.concatenate(done)

    def gated_ready(self, m: int, t: float) -> np.ndarray:
        """A gated unit begins no earlier than each step it is gated on began, plus its lag."""
        gates = self.gates[int(self.g.order[m])]
        waiting = [g2 for g2, _ in gates if g2 not in self.step_began]
        if waiting:
            self.parked.setdefault(waiting[0], []).append(m)
            return self.none
        start = max(self.step_began[g2] + lag for g2, lag in gates)
        if start > t + TIME_TOLERANCE:
            heapq.heappush(self.wakeups, (start, m))
            return self.none
        return self.begin(np.array([m], dtype=np.int64), t)

    def begin(self, units: np.ndarray, t: float) -> np.ndarray:
        """These units begin at t (a step begins with its first unit, releasing what waits for that)."""
        if not len(units):
            return self.none
        self.started_at[units] = t
        done = []
        if self.gates:
            for step in np.unique(self.g.order[units]).tolist():
                if step not in self.step_began:
                    self.step_began[step] = t
                    for m in self.parked.pop(step, ()):
                        done.append(self.gated_ready(m, t))
        empty = self.remaining[units] <= 0
        done.append(self.transmitted(units[empty], t))
        self.started.append(units[~empty])
        return np.concatenate(done)

    def shares(self):
        """The sending units' links, and their max-min rates beside the background flows sending now (with theirs)."""
        net, idx = self.net, self.idx
        lens = net.lengths[idx]
        flow_of = np.repeat(np.arange(len(idx), dtype=np.int32), lens)
        link_of = net.flat_links[gather_index(net.path_start, lens, idx)]
        active = [n for n, b in enumerate(net.background) if b.sending(self.start_s + self.now)]
        if not active:
            return flow_of, link_of, max_min_rates(flow_of, link_of, net.capacity, len(idx)), active, None
        extra_links = [l for n in active for l in net.bg_links[n]]
        extra_flows = [len(idx) + k for k, n in enumerate(active) for _ in net.bg_links[n]]
        both = max_min_rates(np.concatenate([flow_of, np.array(extra_flows, dtype=np.int64)]),
                             np.concatenate([link_of, np.array(extra_links, dtype=np.int64)]), net.capacity,
                             len(idx) + len(active))
        return flow_of, link_of, both[:len(idx)], active, both[len(idx):]

    def next_event(self, finish: Optional[np.ndarray]) -> float:
        """The time to the next event: a flow finishing, a unit arriving, a gated unit waking, a background flow
        starting or stopping."""
        dt = float(finish.min()) if finish is not None else float("inf")
        if self.arrivals and self.arrivals[0][0] - self.now < dt:
            dt = self.arrivals[0][0] - self.now
        if self.wakeups and self.wakeups[0][0] - self.now < dt:
            dt = self.wakeups[0][0] - self.now
        if self.net.background:  # a background flow starting or stopping changes every share
            change = min(b.next_change(self.start_s + self.now) for b in self.net.background) - self.start_s - self.now
            dt = min(dt, change)
        return dt

    def step(self) -> None:
        """One event: the flows move at their shares until the next, then what finished, landed or woke goes on."""
        self.events += 1
        if self.started:
            self.idx = np.sort(np.concatenate([self.idx, *self.started]))  # a unit starts once: none is in idx
            self.started.clear()
        finished = self.idx
        if len(self.idx):  # the sending units' links, gathered from their paths (work in what sends, not in all)
            flow_of, link_of, rate, active, bg_rate = self.shares()
            left = self.remaining[self.idx]
            finish = left / rate
            dt = self.next_event(finish)
            for k, n in enumerate(active):
                self.bg_bytes[n] += float(bg_rate[k]) * dt
            moved = np.minimum(rate * dt, left)
            self.remaining[self.idx] = left - moved
            self.link_bytes += np.bincount(link_of, weights=moved[flow_of], minlength=len(self.link_bytes))
            self.busy[np.bincount(link_of, minlength=len(self.busy)) > 0] += dt
            done_now = finishing(finish, dt)
            finished = self.idx[done_now]
            self.remaining[finished] = 0.0
            self.idx = self.idx[~done_now]
        else:
            dt = self.next_event(None)
        self.now += dt
        completed = [self.transmitted(finished, self.now)]
        while self.arrivals and self.arrivals[0][0] <= self.now + TIME_TOLERANCE:
            at, _, units = heapq.heappop(self.arrivals)
            self.landed_at[units] = at
            completed.append(self.landed(units))
        while self.wakeups and self.wakeups[0][0] <= self.now + TIME_TOLERANCE:
            _, m = heapq.heappop(self.wakeups)
            completed.append(self.begin(np.array([m], dtype=np.int64), self.now))
        self.complete(np.concatenate(completed), self.now)

    def run(self, keep_units: bool) -> FlowResult:
        """Every event until nothing sends, lands or waits."""
        self.complete(self.ready(np.flatnonzero(self.pending == 0), 0.0), 0.0)
        while self.started or len(self.idx) or self.arrivals or self.wakeups:
            self.step()
        unfinished_nodes = int((self.pending > 0).sum())
        if unfinished_nodes:
            raise RuntimeError(f"{self.plan.name}: {unfinished_nodes} operations never became ready (a dependency "
                               f"cycle)")
        g = self.g
        kept = len(g.src) <= TRACE_UNITS or keep_units
        return self.net.result(g, self.plan, self.now, self.link_bytes, self.busy, self.rank_done, self.events,
                               unit_rows(g, self.started_at, self.sent_at) if kept else None,
                               self.landed_at.tolist() if kept else None,
                               self.bg_bytes if self.net.background else None)


def unit_latency(router: Router, hops: List[Tuple[str, str]], lengths: np.ndarray, flat_links: np.ndarray,
                 latency_s: Union[float, Dict[int, float]], link_delay_s: Optional[Dict[int, float]]) -> np.ndarray:
    """Each unit's latency: one value, or its path's highest level's; plus the delay of every link it crosses."""
    count = len(lengths)
    if isinstance(latency_s, dict) and len(set(latency_s.values())) == 1:  # the same at every level
        latency_s = next(iter(latency_s.values()))
    if not isinstance(latency_s, dict) and not any((link_delay_s or {}).values()):
        return np.full(count, float(latency_s))
    link_level = np.array([router.level_of[h] for h in hops], dtype=np.int64)
    unit_of_link = np.repeat(np.arange(count, dtype=np.int32), lengths)
    if isinstance(latency_s, dict):
        top = np.zeros(count, dtype=np.int64)
        has = lengths > 0  # a unit's links are consecutive in flat_links: its highest level by segments
        if has.any():
            top[has] = np.maximum.reduceat(link_level[flat_links], (np.cumsum(lengths) - lengths)[has])
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
                      [sum(b) for b in zip(*moved)] if moved else None,
                      method="+".join(dict.fromkeys(r.method for r in results)),
                      distinct_steps=sum(r.distinct_steps for r in results)
                      if all(r.distinct_steps is not None for r in results) else None,
                      shared_steps=sum(r.shared_steps for r in results)
                      if all(r.shared_steps is not None for r in results) else None)
