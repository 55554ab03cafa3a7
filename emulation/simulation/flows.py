"""Run one synchronization of a Plan as flows: the engine's execution rules, max-min fair links.

A message is everything rank src sends to dst in one step of one stream (the engine carries it on one
connection, chunk after chunk). The unit that moves is the message itself, or (chunk granularity) each of
the engine's chunks, consecutive small ones joined. Each unit has a send side (at src) and a receive side (at
dst), and each side starts under the engine's rules (workloads/engine.py):
- a rank's connection carries its units in plan order (one after the other);
- a side waits until this rank finished every earlier-step operation on the data it carries;
- a send waits until this rank's earlier-step sends on the same link level are out (any stream).
A send side starts its flow; the flow shares every directed link of its path max-min fairly with the other
flows and arrives `latency_s` after its last byte left. A receive side ends when it is ready and its flow
arrived; a send side when its flow arrived.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from emulation.simulation.fairshare import max_min_rates
from emulation.simulation.gcpause import cycle_collection_paused
from emulation.simulation.routes import Router
from workloads.plan import Plan

TIME_TOLERANCE = 1e-9
GRANULARITIES = ("chunk", "message")
TRACE_UNITS = 200_000  # a simulation keeps its transfers for a timeline up to this many
WireBits = Dict[Tuple[int, int, int, int, int], int]
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


def _messages(plan: Plan, piece_bytes: Sequence[int], wire_bits: Optional[WireBits] = None):
    """Aggregate the plan's transfers per (stream, step, src, dst): wire bytes, pieces (in wire order), level, fp32
    bytes (wire_bits: bits per value of each transfer when a codec packs them; else 32)."""
    msgs: Dict[Tuple[int, int, int, int], list] = {}
    for s, stream in enumerate(plan.streams):
        for n, step in enumerate(stream):
            for t in step:
                fp32 = piece_bytes[t.piece]
                wire = fp32 * wire_bits.get((s, n, t.src, t.dst, t.piece), 32) / 32 if wire_bits else fp32
                m = msgs.get((s, n, t.src, t.dst))
                if m is None:
                    msgs[(s, n, t.src, t.dst)] = [wire, [t.piece], t.level, fp32]
                else:
                    m[0] += wire
                    m[3] += fp32
                    m[1].append(t.piece)
                    if m[2] is None:
                        m[2] = t.level
    for m in msgs.values():
        if len(m[1]) > 1:
            m[1].sort()  # the engine sends a message's chunks in piece order
    return msgs


def _units(pieces: List[int], piece_bytes: Sequence[int], chunk_bytes: Optional[int]):
    """A message as the units that move as a whole: [(bytes, regions)]. Without chunk_bytes, the message itself
    (every piece a region); with it, the engine's chunks (each piece cut every chunk_bytes: region (piece, j),
    or the piece itself when it is one chunk), consecutive chunks joined up to chunk_bytes so tiny pieces cost
    no extra events."""
    total = sum(piece_bytes[p] for p in pieces)
    if not chunk_bytes or total <= chunk_bytes:  # one unit either way: the message's own piece list
        return [(total, pieces)]
    units: List[Tuple[float, list]] = []
    size, regions = 0, []
    for p in pieces:
        b = piece_bytes[p]
        chunks = max(1, -(-b // chunk_bytes))
        for j in range(chunks):
            c = min(chunk_bytes, b - j * chunk_bytes) if b else 0
            if regions and size + c > chunk_bytes:
                units.append((size, regions))
                size, regions = 0, []
            size += c
            regions.append(p if chunks == 1 else (p, j))
    units.append((size, regions))
    return units


class _Graph:
    """Nodes and their dependencies: two sides per message (send 2m, receive 2m+1), then join nodes that stand
    for a group of sides (all receives of a piece in one step), so a wide step costs edges, not their square."""

    def __init__(self, plan: Plan, piece_bytes: Sequence[int], chunk_bytes: Optional[int] = None,
                 wire_bits: Optional[WireBits] = None):
        msgs = _messages(plan, piece_bytes, wire_bits)
        pinned: Dict[Tuple[int, int, int], int] = {}  # (rank, peer, stream) -> level pinned by any transfer
        for (s, n, src, dst), m in msgs.items():
            if m[2] is not None:
                pinned.setdefault((src, dst, s), m[2])
                pinned.setdefault((dst, src, s), m[2])
        self.keys: List[Tuple[int, int, int, int]] = []  # unit id -> (stream, step, src, dst) of its message
        self.bytes: List[float] = []
        regions_of: List[list] = []
        for key, m in msgs.items():
            packed = m[0] / m[3] if m[3] else 1.0  # the engine chunks fp32 arrays, then encodes each chunk
            for size, regions in _units(m[1], piece_bytes, chunk_bytes):
                self.keys.append(key)
                self.bytes.append(size * packed)
                regions_of.append(regions)
        self.sides = 2 * len(self.keys)
        self.level = [pinned.get((k[2], k[3], k[0]), 0) for k in self.keys]
        self.deps: List[list] = [[] for _ in range(self.sides)]
        self.joins: Dict[Tuple[int, ...], int] = {}
        by_step: Dict[Tuple[int, int], List[int]] = {}
        for m, (s, n, _, _) in enumerate(self.keys):
            by_step.setdefault((s, n), []).append(m)
        last: Dict[Tuple[int, object], int] = {}  # (rank, region) -> node that says its latest step is done
        for s in range(len(plan.streams)):
            for n in range(len(plan.streams[s])):
                touched: Dict[Tuple[int, int], List[int]] = {}
                for m in by_step.get((s, n), ()):
                    _, _, src, dst = self.keys[m]
                    for side, rank in ((2 * m, src), (2 * m + 1, dst)):
                        d = self.deps[side]
                        for region in regions_of[m]:
                            before = last.get((rank, region))
                            if before is not None and (not d or d[-1] != before):
                                d.append(before)
                            touched.setdefault((rank, region), []).append(side)
                for key, sides in touched.items():
                    last[key] = self.join(sides)
        sends: Dict[Tuple[int, int], Dict[int, List[int]]] = {}
        queues: Dict[Tuple[int, int, int, int], List[Tuple[int, int]]] = {}  # (dir, rank, peer, stream)
        for m, (s, n, src, dst) in enumerate(self.keys):
            sends.setdefault((src, self.level[m]), {}).setdefault(n, []).append(2 * m)
            queues.setdefault((0, src, dst, s), []).append((n, 2 * m))
            queues.setdefault((1, dst, src, s), []).append((n, 2 * m + 1))
        for steps in sends.values():  # link order: after this rank's sends of the latest earlier step
            order = sorted(steps)
            for a, b in zip(order, order[1:]):
                done = self.join(steps[a])
                for side in steps[b]:
                    self.deps[side].append(done)
        for sides in queues.values():  # a connection carries its messages one after the other
            sides.sort()
            for (_, a), (_, b) in zip(sides, sides[1:]):
                self.deps[b].append(a)
        self.pending = [len(d) for d in self.deps]
        self.dependents: List[List[int]] = [[] for _ in self.deps]
        for node, d in enumerate(self.deps):
            for x in d:
                self.dependents[x].append(node)
        self.deps = None

    def join(self, members: List[int]) -> int:
        """A node done when every member is (the member itself when there is one)."""
        if len(members) == 1:
            return members[0]
        key = tuple(members)
        node = self.joins.get(key)
        if node is None:
            node = self.joins[key] = len(self.deps)
            self.deps.append(list(members))
        return node


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
    """simulate_plan's work."""
    g = _Graph(plan, piece_bytes, chunk_bytes, wire_bits)
    count = len(g.keys)
    link_ids: Dict[Tuple[str, str], int] = {}
    path_ids: List[Tuple[int, ...]] = []
    for m, (s, _, src, dst) in enumerate(g.keys):
        hops = router.path(src, dst, g.level[m], key=s)
        path_ids.append(tuple([link_ids.setdefault(h, len(link_ids)) for h in hops]))
    plan_link_count = len(link_ids)
    bg_links = [[link_ids.setdefault(h, len(link_ids)) for h in b.hops] for b in background]
    hops_by_id = list(link_ids)
    if isinstance(latency_s, dict):
        top = [max((router.level_of[hops_by_id[l]] for l in p), default=0) for p in path_ids]
        latency = [latency_s.get(level, max(latency_s.values())) for level in top]
    else:
        latency = [latency_s] * count
    if link_delay_s:
        latency = [lat + sum(link_delay_s.get(router.level_of[hops_by_id[l]], 0.0) for l in p)
                   for lat, p in zip(latency, path_ids)]
    if step_delays:
        latency = [lat + step_delays.get(key[:2], 0.0) for lat, key in zip(latency, g.keys)]
    capacity = np.array([router.capacity(h, rates) for h in hops_by_id], dtype=float)
    for n, b in enumerate(background):  # a capped flow crosses a link of its own at its cap
        if b.cap is not None:
            bg_links[n] = bg_links[n] + [len(capacity)]
            capacity = np.append(capacity, b.cap)
    bg_bytes = [0.0] * len(background)
    lengths = np.fromiter((len(p) for p in path_ids), dtype=np.int64, count=count)
    flat_links = np.fromiter((l for p in path_ids for l in p), dtype=np.int64, count=int(lengths.sum()))
    path_start = np.cumsum(lengths) - lengths  # unit m's links: flat_links[path_start[m]:][:lengths[m]]
    idx = np.zeros(0, dtype=np.int64)  # the units sending, ascending
    started: List[int] = []  # units that began sending since idx was last brought up to date
    link_bytes = np.zeros(len(hops_by_id))
    busy = np.zeros(len(hops_by_id))
    remaining = np.array(g.bytes, dtype=float)
    pending, dependents = g.pending, g.dependents
    arrived = [False] * count
    recv_ready = [False] * count
    rank_done = [0.0] * plan.ranks
    arrivals: List[Tuple[float, int]] = []
    started_at = np.zeros(count)
    sent_at = np.zeros(count)
    landed_at = np.zeros(count)
    now = 0.0
    events = 0
    step_began: Dict[Step, float] = {}
    parked: Dict[Step, List[int]] = {}   # gated send sides waiting for a step to begin
    wakeups: List[Tuple[float, int]] = []  # (time, send side) of gated units waiting out their lag

    def complete(node: int, t: float) -> None:
        stack = [node]
        while stack:
            x = stack.pop()
            if x < g.sides:
                m = x >> 1
                rank = g.keys[m][3] if x & 1 else g.keys[m][2]
                if t > rank_done[rank]:
                    rank_done[rank] = t
            for y in dependents[x]:
                pending[y] -= 1
                if pending[y] == 0:
                    stack.extend(ready(y, t))

    def landed(m: int) -> List[int]:
        """Message m arrived: its send side is done, and its receive side if that was waiting for it."""
        arrived[m] = True
        return [2 * m] + ([2 * m + 1] if recv_ready[m] else [])

    def transmitted(m: int, t: float) -> List[int]:
        """Message m's last byte left at t: it lands its latency later (now when there is none)."""
        sent_at[m] = t
        if latency[m] > 0:
            heapq.heappush(arrivals, (t + latency[m], m))
            return []
        landed_at[m] = t
        return landed(m)

    def ready(side: int, t: float) -> List[int]:
        """Start what a node can start once its dependencies are done; returns the nodes completed now."""
        if side >= g.sides:
            return [side]
        m = side >> 1
        if side & 1:
            if arrived[m]:
                return [side]
            recv_ready[m] = True
            return []
        gates = step_gates.get(g.keys[m][:2]) if step_gates else None
        if gates:
            waiting = [g2 for g2, _ in gates if g2 not in step_began]
            if waiting:
                parked.setdefault(waiting[0], []).append(side)
                return []
            begin = max(step_began[g2] + lag for g2, lag in gates)
            if begin > t + TIME_TOLERANCE:
                heapq.heappush(wakeups, (begin, side))
                return []
        return begin_unit(m, t)

    def begin_unit(m: int, t: float) -> List[int]:
        """Unit m begins at t (its step begins with its first unit, releasing what waits for that)."""
        started_at[m] = t
        step = g.keys[m][:2]
        done: List[int] = []
        if step not in step_began:
            step_began[step] = t
            for side in parked.pop(step, ()):
                done += ready(side, t)
        if remaining[m] <= 0:
            return done + transmitted(m, t)
        started.append(m)
        return done

    for side in range(len(pending)):
        if pending[side] == 0:
            for x in ready(side, 0.0):
                complete(x, 0.0)
    while started or len(idx) or arrivals or wakeups:
        events += 1
        if started:
            idx = np.union1d(idx, np.array(started, dtype=np.int64))
            started.clear()
        if len(idx):  # the sending units' links, gathered from their paths (work in what sends, not in all)
            lens = lengths[idx]
            flow_of = np.repeat(np.arange(len(idx), dtype=np.int64), lens)
            link_of = flat_links[np.arange(len(flow_of), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
                                 + np.repeat(path_start[idx], lens)]
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
        completed: List[int] = []
        for m in finished.tolist():
            completed += transmitted(m, now)
        while arrivals and arrivals[0][0] <= now + TIME_TOLERANCE:
            at, m = heapq.heappop(arrivals)
            landed_at[m] = at
            completed += landed(m)
        while wakeups and wakeups[0][0] <= now + TIME_TOLERANCE:
            _, side = heapq.heappop(wakeups)
            completed += begin_unit(side >> 1, now)
        for x in completed:
            complete(x, now)
    host_tx: Dict[Tuple[int, int], float] = {}
    names = {h.name: h.index for h in router.topo.hosts}
    for m in range(count):
        for lid in path_ids[m]:
            a, b = hops_by_id[lid]
            if a in names:
                key = (names[a], router.level_of[(a, b)])
                host_tx[key] = host_tx.get(key, 0.0) + g.bytes[m]
    unfinished = sum(1 for p in pending if p > 0)
    if unfinished:
        raise RuntimeError(f"{plan.name}: {unfinished} operations never became ready (a dependency cycle)")
    kept = count <= TRACE_UNITS or keep_units
    units = [(*g.keys[m], g.bytes[m], float(started_at[m]), float(sent_at[m]), g.level[m]) for m in range(count)] \
        if kept else None
    plan_hops = hops_by_id[:plan_link_count]  # background flows' own links are not the plan's
    return FlowResult(now, count, dict(zip(plan_hops, link_bytes)), dict(zip(plan_hops, busy)), host_tx, rank_done,
                      events, units, bg_bytes if background else None, landed_at.tolist() if kept else None)



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
