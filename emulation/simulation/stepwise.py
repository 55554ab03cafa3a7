"""The flow model a step at a time, for plans whose flows never share a link (a ring, on most networks): each
message moves as one unit at its path's slowest link, and each rank's send and receive are done at the latest of
what they wait for under the engine's rules (flow_graph.py) plus their own time, computed for all ranks of a step
at once from a few arrays of state: per rank and piece when it was last touched, per rank and link level when its
previous step's sends arrived, per connection when its previous unit was done. Nothing grows with the plan's
length but that state, so a ring over 10,000 ranks (2x10^8 transfers) is 2x10^4 steps of 10^4 messages; a step
with the same messages as the one before reuses its paths and rates (solved once per distinct step).

It answers exactly what the event model answers (tests check it), and declines (returns None) where it cannot:
a message larger than a chunk (its chunks would pipeline), packed wire bits, a link two ranks' sends (or two
connections of one rank in a step) can use at once, a level a later message pins, or state larger than the memory
it may take. The data chain is kept per piece for a plan whose pieces move as tokens (a ring: per piece its holder),
else per rank and piece."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from emulation.simulation.flow_graph import first_of_each
from emulation.simulation.routes import Router
from workloads.plan import Plan

STATE_BYTES = 4 << 30  # the per-rank, per-piece state may take this much memory; a larger plan goes to the graph


@dataclass
class StepResult:
    """What the stepwise model gives flows.py to report."""

    gst_s: float
    units: int
    link_bytes: np.ndarray
    busy: np.ndarray
    hops: List[Tuple[str, str]]
    rank_done: np.ndarray
    steps: int
    distinct_steps: int
    rows: Optional[List[tuple]]  # per unit for a timeline (None past the trace limit)
    landed: Optional[List[float]]
    tokens: bool = False  # the data chain was kept per piece (its pieces moved as tokens)


class Declined(Exception):
    """The plan needs the graph or the event model; the message says why."""


class NotTokens(Declined):
    """A step broke the token discipline: the whole data chain is needed."""


def shares_an_end(src: np.ndarray, dst: np.ndarray, level: np.ndarray) -> None:
    """Declined, before any path is looked up, where two messages of a step leave one rank, or reach one, on one
    level (a parameter server's step: each rank to every other): they cross that rank's link there together."""
    moving = src != dst
    levels = int(level.max()) + 1 if len(level) else 1
    for end in (src[moving], dst[moving]):
        if len(end) and np.bincount(end * levels + level[moving]).max() > 1:
            raise Declined("several messages of a step leave or reach one rank on one level (they share its link)")


class Paths:
    """Each distinct step's messages' paths, rates and latencies, solved once; every link's owner (a rank's sends on
    one level) and the last step and connection that used it, to see that no link is ever shared."""

    def __init__(self, router: Router, rates: Dict[int, float], unit_latency, levels: int):
        self.router, self.rates, self.unit_latency, self.levels = router, rates, unit_latency, levels
        self.ids: Dict[Tuple[str, str], int] = {}
        self.hops: List[Tuple[str, str]] = []
        self.memo: Dict[bytes, tuple] = {}
        self.capacity: List[float] = []
        self.owner = np.zeros(0, dtype=np.int64)
        self.last_step = np.zeros(0, dtype=np.int64)
        self.last_connection = np.zeros(0, dtype=np.int64)

    def of(self, src: np.ndarray, dst: np.ndarray, level: np.ndarray, stream: int):
        """(per message: link ids as CSR (lengths, flat), rate, latency), memoized by the step's messages."""
        key = np.stack([src, dst, level]).tobytes() + bytes([stream % 256])
        found = self.memo.get(key)
        if found is None:
            shares_an_end(src, dst, level)
            lengths, flat, hops = self.router.paths(src, dst, level, np.full(len(src), stream, dtype=np.int64))
            here = np.array([self.link_id(h) for h in hops], dtype=np.int64)
            self.grow()
            flat = here[flat] if len(flat) else flat.astype(np.int64)
            capacity = np.asarray(self.capacity)
            rate = np.full(len(src), np.inf)
            has = lengths > 0
            if has.any():
                rate[has] = np.minimum.reduceat(capacity[flat], (np.cumsum(lengths) - lengths)[has])
            latency = self.unit_latency(self.hops, lengths, flat)
            if len(flat) and np.bincount(flat).max() > 1:
                raise Declined("several flows of one step cross one link")
            found = self.memo[key] = (lengths, flat, rate, latency)
        return found

    def link_id(self, hop: Tuple[str, str]) -> int:
        """A link's id (a new link gets the next, with its capacity)."""
        n = self.ids.get(hop)
        if n is None:
            n = self.ids[hop] = len(self.ids)
            self.hops.append(hop)
            self.capacity.append(self.router.capacity(hop, self.rates))
        return n

    def grow(self) -> None:
        """Room for every link known so far in the ownership arrays."""
        extra = len(self.ids) - len(self.owner)
        if extra > 0:
            self.owner = np.concatenate([self.owner, np.full(extra, -1, dtype=np.int64)])
            self.last_step = np.concatenate([self.last_step, np.full(extra, -1, dtype=np.int64)])
            self.last_connection = np.concatenate([self.last_connection, np.full(extra, -1, dtype=np.int64)])

    def claim(self, lengths: np.ndarray, flat: np.ndarray, owner: np.ndarray, step: int,
              connection: np.ndarray) -> None:
        """The links these messages cross become their senders' (Declined where another sender has one, or where
        another connection uses one in the same step)."""
        unit = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        mine = owner[unit]
        seen = self.owner[flat]
        if np.any((seen >= 0) & (seen != mine)):
            raise Declined("two ranks' sends (or one rank's on two link levels) cross one link")
        same_step = self.last_step[flat] == step
        if np.any(same_step & (self.last_connection[flat] != connection[unit])):
            raise Declined("two connections of one rank cross one link in one step")
        self.owner[flat], self.last_step[flat], self.last_connection[flat] = mine, step, connection[unit]


class State:
    """When each rank's sends on each level of its latest and previous steps arrived, and when each connection's
    last send and receive were done."""

    def __init__(self, ranks: int, levels: int):
        self.ranks, self.levels = ranks, levels
        self.level_step = np.full(ranks * levels, -1, dtype=np.int64)
        self.level_last = np.zeros(ranks * levels)
        self.level_before = np.zeros(ranks * levels)
        self.keys = np.zeros(0, dtype=np.int64)  # connection ids, sorted
        self.slot_of = np.zeros(0, dtype=np.int64)  # beside keys: each one's slot
        self.done = np.zeros(0)  # per slot: when the connection's last unit (its send or receive side) was done

    def slots(self, keys: np.ndarray) -> np.ndarray:
        """Each connection side's slot (new ones get one)."""
        at = np.searchsorted(self.keys, keys)
        known = at < len(self.keys)
        known[known] = self.keys[at[known]] == keys[known]
        if not known.all():
            new = np.unique(keys[~known])
            slots = np.arange(len(self.done), len(self.done) + len(new), dtype=np.int64)
            self.done = np.concatenate([self.done, np.zeros(len(new))])
            keys_all = np.concatenate([self.keys, new])
            order = np.argsort(keys_all, kind="stable")
            self.keys, self.slot_of = keys_all[order], np.concatenate([self.slot_of, slots])[order]
            at = np.searchsorted(self.keys, keys)
        return self.slot_of[at]

    def level_ready(self, key: np.ndarray, step: int) -> np.ndarray:
        """When the sends of each key's latest earlier step arrived."""
        return np.where(self.level_step[key] == step, self.level_before[key], self.level_last[key])

    def level_update(self, key: np.ndarray, touched: np.ndarray, step: int, done: np.ndarray) -> None:
        """These sends (keys: key, each once in touched) of this step arrived at done."""
        group = np.full(len(self.level_last), -np.inf)
        if len(key) == len(touched):  # one send a key
            group[key] = done
        else:
            np.maximum.at(group, key, done)
        fresh = touched[self.level_step[touched] != step]
        self.level_before[fresh] = self.level_last[fresh]
        self.level_last[fresh] = group[fresh]
        old = touched[self.level_step[touched] == step]
        self.level_last[old] = np.maximum(self.level_last[old], group[old])
        self.level_step[touched] = step


def region_ready(touched: np.ndarray, rank: np.ndarray, ptr: np.ndarray, regions: np.ndarray,
                 single: bool) -> np.ndarray:
    """Per message (its regions: regions[ptr[m]:ptr[m+1]]), the latest completion of what its rank last did on
    them."""
    if single:  # one region a message
        return touched[rank, regions]
    counts = np.diff(ptr)
    values = touched[np.repeat(rank, counts), regions]
    out = np.zeros(len(rank))
    has = counts > 0
    if has.any():
        out[has] = np.maximum.reduceat(values, ptr[:-1][has])
    return out


@dataclass
class Shape:
    """What a step's messages are whatever pieces they carry (solved once per distinct step): who sends to whom
    on which level, the transfers of each (order, ptr), their paths, rates and latencies, their connections' and
    level keys' slots, and whether each rank sends (receives) at most one of them."""

    src: np.ndarray
    dst: np.ndarray
    tag: np.ndarray
    order: np.ndarray  # the step's transfers message by message
    ptr: np.ndarray
    single: bool  # every message one transfer
    distinct: bool  # no rank sends two messages, none receives two
    level: Optional[np.ndarray] = None
    lengths: Optional[np.ndarray] = None
    flat: Optional[np.ndarray] = None
    rate: Optional[np.ndarray] = None
    latency: Optional[np.ndarray] = None
    unit: Optional[np.ndarray] = None  # per link crossing: its message
    conn_send: Optional[np.ndarray] = None
    conn_recv: Optional[np.ndarray] = None
    key: Optional[np.ndarray] = None  # the level chain's key of each message
    keys: Optional[np.ndarray] = None  # the distinct level keys
    claimed: bool = False  # its links were claimed for its senders (a one-stream plan need not again)
    moved: Optional[np.ndarray] = None  # per message, the bytes it moved in every step of this shape so far
    sending: Optional[np.ndarray] = None  # per message, the seconds it sent in them


def shape_of(src: np.ndarray, dst: np.ndarray, tags: np.ndarray, ranks: int) -> Shape:
    """A step's messages (everything src sends dst): their src, dst, tag level, and transfers (CSR)."""
    msg, first = first_of_each(src * ranks + dst)
    order = np.argsort(msg, kind="stable")
    ptr = np.searchsorted(msg[order], np.arange(len(first) + 1))
    tagged = tags >= 0
    tag = np.full(len(first), -1, dtype=np.int64)
    if tagged.any():
        tag_msg, where = np.unique(msg[tagged], return_index=True)
        tag[tag_msg] = tags[tagged][where]
    m_src, m_dst = src[first], dst[first]
    distinct = len(np.unique(m_src)) == len(m_src) and len(np.unique(m_dst)) == len(m_dst)
    return Shape(m_src, m_dst, tag, order, ptr, len(first) == len(src), distinct)


class Touches:
    """The data chain kept whole: when each rank last touched each piece (its group's completion)."""

    def __init__(self, ranks: int, regions: int, barriers: bool):
        self.touched = np.zeros((ranks, regions))
        self.barriers = barriers  # a plan with step barriers: a rank's whole stream is one region

    def regions(self, pieces: np.ndarray, stream: int) -> np.ndarray:
        return np.full(len(pieces), stream) if self.barriers else pieces

    def ready_send(self, sh: "Shape", pieces: np.ndarray, stream: int) -> np.ndarray:
        """When each message's sender last finished with its pieces."""
        return region_ready(self.touched, sh.src, sh.ptr, self.regions(pieces, stream), sh.single and not self.barriers)

    def ready_recv(self, sh: "Shape", pieces: np.ndarray, stream: int) -> np.ndarray:
        """When each message's receiver last finished with its pieces."""
        return region_ready(self.touched, sh.dst, sh.ptr, self.regions(pieces, stream), sh.single and not self.barriers)

    def update(self, sh: "Shape", pieces: np.ndarray, stream: int, send_done: np.ndarray,
               recv_done: np.ndarray) -> None:
        """This step's sides touched their pieces."""
        regions = self.regions(pieces, stream)
        if sh.single and sh.distinct and not self.barriers:
            self.touched[sh.src, regions] = send_done
            self.touched[sh.dst, regions] = recv_done
        else:
            touch(self.touched, sh.src, sh.dst, sh.ptr, regions, send_done, recv_done)


class Tokens:
    """The data chain of a plan whose pieces move as tokens (a ring's): every step moves each piece at most once,
    from the rank that received it last (or from anywhere, the first time) to the next. Every earlier touch of a
    piece is then a hop of its one journey, so a sender's last touch is its own receipt of it, and a receiver's
    earlier touches come before the flow that brings the piece back: per piece, its holder and when the holder was
    done receiving it is the whole state (Declined when a step breaks the discipline)."""

    def __init__(self, pieces: int, checked: bool = True):
        self.checked = checked  # False: the plan declares it (a generated table that says so; tested apart)
        self.holder = np.full(pieces, -1, dtype=np.int64)
        self.held_since = np.zeros(pieces)
        self.stamp = np.full(pieces, -1, dtype=np.int64)

    def ready_send(self, sh: "Shape", pieces: np.ndarray, stream: int) -> np.ndarray:
        """When each message's sender received its pieces (checking that it holds them, each moved once)."""
        if not self.checked:
            return self.held_since[pieces] if sh.single else \
                region_ready(self.held_since[None, :], np.zeros(len(sh.src), dtype=np.int64), sh.ptr, pieces, False)
        at = np.arange(len(pieces), dtype=np.int64)
        self.stamp[pieces] = at
        if np.any(self.stamp[pieces] != at):
            raise NotTokens("a piece moves twice in one step")
        senders = sh.src if sh.single else np.repeat(sh.src, np.diff(sh.ptr))
        holder = self.holder[pieces]
        if np.any((holder >= 0) & (holder != senders)):
            raise NotTokens("a piece sent by a rank that does not hold it")
        return region_ready(self.held_since[None, :], np.zeros(len(sh.src), dtype=np.int64), sh.ptr, pieces,
                            sh.single)

    def ready_recv(self, sh: "Shape", pieces: np.ndarray, stream: int) -> np.ndarray:
        """Nothing beyond the flow's own arrival: the receiver's earlier touches are earlier hops of the pieces."""
        return np.zeros(len(sh.src))

    def update(self, sh: "Shape", pieces: np.ndarray, stream: int, send_done: np.ndarray,
               recv_done: np.ndarray) -> None:
        """The pieces' new holders, and when they were done receiving them."""
        if not self.checked and sh.single:
            self.held_since[pieces] = recv_done
        elif sh.single:
            self.holder[pieces], self.held_since[pieces] = sh.dst, recv_done
        else:
            counts = np.diff(sh.ptr)
            self.holder[pieces], self.held_since[pieces] = np.repeat(sh.dst, counts), np.repeat(recv_done, counts)


class Pins:
    """Each message's link level: the level the first tagged message between its two ranks (either way) in its
    stream pinned, else 0 (Declined where a later message pins a pair an earlier one used untagged)."""

    def __init__(self):
        self.known: Dict[Tuple[int, int, int], int] = {}
        self.untagged: set = set()
        self.unpinned_before = False  # messages went untagged while nothing was pinned (their pairs not kept)

    def levels(self, stream: int, src: np.ndarray, dst: np.ndarray, tag: np.ndarray) -> np.ndarray:
        """The step's messages' levels."""
        if not self.known and (tag < 0).all():  # the common case: nothing pinned anywhere (yet)
            self.unpinned_before = True
            return np.zeros(len(src), dtype=np.int64)
        if self.unpinned_before:
            raise Declined("a level pinned after untagged messages")
        out = np.zeros(len(src), dtype=np.int64)
        for n, (a, b, t) in enumerate(zip(src.tolist(), dst.tolist(), tag.tolist())):
            pair = (stream, min(a, b), max(a, b))
            if t >= 0 and pair not in self.known:
                if pair in self.untagged:
                    raise Declined("a level pinned after its pair sent untagged")
                self.known[pair] = t
            if pair in self.known:
                out[n] = self.known[pair]
            else:
                self.untagged.add(pair)
        return out


def simulate_stepwise(plan: Plan, piece_bytes: Sequence[int], router: Router, rates: Dict[int, float],
                      unit_latency, chunk_bytes: Optional[int], step_delays: Dict[Tuple[int, int], float],
                      keep_units: bool, trace_units: int, check_tokens: bool = False) -> StepResult:
    """One synchronization, step by step (Declined where the plan needs the graph or the event model);
    check_tokens: check every step of a plan that declares its pieces move as tokens (tests do)."""
    ranks = max(plan.ranks, 1)
    regions = len(plan.streams) if plan.meta.get("barriers") else max(plan.pieces, 1)
    tokens = not plan.meta.get("barriers")
    while True:
        run = Stepper(plan, np.asarray(piece_bytes, dtype=float), router, rates, unit_latency, chunk_bytes, regions,
                      keep_units, trace_units, tokens, check_tokens)
        try:
            for n, stream, src, dst, piece, tags, step_delay in step_order(plan, step_delays):
                run.step(n, stream, src, dst, piece, tags, step_delay)
            break
        except NotTokens:
            tokens = False  # the whole data chain then, from the start
            if ranks * regions * 8 > STATE_BYTES:
                raise Declined(f"not a token plan, and its state would take {ranks * regions * 8 / 2**30:.1f} GiB")
    for sh in run.shapes.values():
        if sh.moved is not None:
            run.flush(sh)
    kept = run.rows is not None and run.units <= trace_units
    rank_done = run.rank_done()
    return StepResult(float(rank_done.max(initial=0.0)), run.units, run.link_bytes, run.busy, list(run.paths.hops),
                      rank_done, run.steps, len(run.shapes), run.rows if kept else None,
                      run.landed if kept else None, tokens)


class Stepper:
    """The stepwise model's state and its step."""

    def __init__(self, plan: Plan, sizes: np.ndarray, router: Router, rates: Dict[int, float], unit_latency,
                 chunk_bytes: Optional[int], regions: int, keep_units: bool, trace_units: int, tokens: bool,
                 check_tokens: bool = False):
        self.ranks, self.streams = max(plan.ranks, 1), len(plan.streams)
        self.barriers, self.sizes, self.chunk_bytes = bool(plan.meta.get("barriers")), sizes, chunk_bytes
        self.levels = router.topo.levels + 1
        self.paths = Paths(router, rates, unit_latency, self.levels)
        self.state, self.pins = State(self.ranks, self.levels), Pins()
        declared = getattr(plan.table, "tokens", False) and check_tokens is False
        self.data = Tokens(regions, not declared) if tokens else Touches(self.ranks, regions, self.barriers)
        self.shapes: Dict[bytes, Shape] = {}
        self.last: Optional[tuple] = None  # the step before's arrays and shape
        self.link_bytes, self.busy = np.zeros(0), np.zeros(0)
        self.rows, self.landed = ([], []) if keep_units else (None, None)
        self.trace_units = trace_units
        self.units, self.steps = 0, 0

    def shape(self, stream: int, src, dst, tags) -> Shape:
        """The step's shape, solved once per distinct step (the levels as pinned so far)."""
        last = self.last
        if last is not None and last[0] is src and last[1] is dst and last[2] is tags and last[3] == stream:
            sh = last[4]  # the very arrays of the step before (a generated plan's): its shape
        else:
            key = src.tobytes() + dst.tobytes() + tags.tobytes() + stream.to_bytes(4, "little")
            sh = self.shapes.get(key)
            if sh is None:
                sh = self.shapes[key] = shape_of(src, dst, tags, self.ranks)
            self.last = (src, dst, tags, stream, sh)
        level = self.pins.levels(stream, sh.src, sh.dst, sh.tag)
        if sh.level is None or not np.array_equal(level, sh.level):
            self.solve(sh, stream, level)
        return sh

    def solve(self, sh: Shape, stream: int, level: np.ndarray) -> None:
        """A shape's paths, rates, latencies, slots and keys at these levels."""
        if sh.moved is not None:  # what it moved at its earlier levels, on its earlier links
            self.flush(sh)
        sh.level = level
        sh.lengths, sh.flat, sh.rate, sh.latency = self.paths.of(sh.src, sh.dst, level, stream)
        sh.unit = np.repeat(np.arange(len(sh.src), dtype=np.int64), sh.lengths)
        sh.conn_send = self.state.slots((sh.src * self.ranks + sh.dst) * self.streams + stream)
        sh.conn_recv = self.state.slots(((self.ranks + sh.dst) * self.ranks + sh.src) * self.streams + stream)
        sh.key = sh.src * self.levels + level
        sh.keys = np.unique(sh.key)
        sh.claimed = False
        sh.moved, sh.sending = np.zeros(len(sh.src)), np.zeros(len(sh.src))

    def rank_done(self) -> np.ndarray:
        """When each rank was done: its latest sends' arrival on any level, its connections' latest receive (each
        rank's sends on a level, and each connection's receives, are done in order, so the latest are the last)."""
        st, out = self.state, np.zeros(self.ranks)
        np.maximum.at(out, np.arange(len(st.level_last)) // self.levels, st.level_last)
        receiving = st.keys >= self.ranks * self.ranks * self.streams
        dst = st.keys[receiving] // self.streams // self.ranks - self.ranks
        np.maximum.at(out, dst, st.done[st.slot_of[receiving]])
        return out

    def flush(self, sh: Shape) -> None:
        """A shape's bytes and sending time so far onto its links."""
        count = len(self.paths.ids)
        self.link_bytes = add(self.link_bytes, sh.flat, sh.moved[sh.unit], count)
        self.busy = add(self.busy, sh.flat, sh.sending[sh.unit], count)

    def step(self, n: int, stream: int, src, dst, piece, tags, step_delay: float) -> None:
        """One step's messages: when each is sent, arrives and is received; the state moved on."""
        self.steps += 1
        sh = self.shape(stream, src, dst, tags)
        pieces = piece[sh.order]
        if sh.single:
            fp32 = self.sizes[pieces]
        else:
            fp32 = np.add.reduceat(self.sizes[pieces], sh.ptr[:-1]) if len(pieces) else np.zeros(0)
        if self.chunk_bytes and np.any(fp32 > self.chunk_bytes):
            raise Declined("a message larger than a chunk (its chunks pipeline: the graph model)")
        if not sh.claimed or self.streams > 1:
            self.paths.claim(sh.lengths, sh.flat, sh.key, n, sh.dst * self.streams + stream)
            sh.claimed = True
        duration = fp32 / sh.rate  # nothing for an empty message, or one that crosses no link (infinite rate)
        st = self.state
        level_ready = st.level_last[sh.key] if self.streams == 1 else st.level_ready(sh.key, n)
        ready_send = np.maximum(np.maximum(self.data.ready_send(sh, pieces, stream), level_ready),
                                st.done[sh.conn_send])
        arrive = ready_send + duration + sh.latency + step_delay
        done_recv = np.maximum(np.maximum(self.data.ready_recv(sh, pieces, stream), st.done[sh.conn_recv]), arrive)
        self.data.update(sh, pieces, stream, arrive, done_recv)
        if self.streams == 1 and len(sh.key) == len(sh.keys):  # each key's one send: this step's group
            st.level_last[sh.key] = arrive
        else:
            st.level_update(sh.key, sh.keys, n, arrive)
        st.done[sh.conn_send], st.done[sh.conn_recv] = arrive, done_recv
        sh.moved += fp32
        sh.sending += duration
        self.units += len(sh.src)
        if self.rows is not None and self.units <= self.trace_units:
            self.rows.extend(zip([stream] * len(sh.src), [n] * len(sh.src), sh.src.tolist(), sh.dst.tolist(),
                                 fp32.tolist(), ready_send.tolist(), (ready_send + duration).tolist(),
                                 sh.level.tolist()))
            self.landed.extend(arrive.tolist())


def step_order(plan: Plan, step_delays: Dict[Tuple[int, int], float]):
    """Every step as arrays, by step index then stream (the order the engine's rules need: a rank's sends wait for
    its sends of earlier step indices of any stream): (step index, stream, src, dst, piece, level, its delay)."""
    longest = max((len(s) for s in plan.streams), default=0)
    for n in range(longest):
        for s, stream in enumerate(plan.streams):
            if n < len(stream):
                src, dst, piece, _, level = step_arrays(stream[n])
                yield n, s, src, dst, piece, level, step_delays.get((s, n), 0.0)


def step_arrays(step) -> Tuple[np.ndarray, ...]:
    """A step's transfers as arrays: src, dst, piece, copy, level (-1: none)."""
    if hasattr(step, "arrays"):
        return step.arrays()
    src = np.fromiter((t.src for t in step), np.int64, len(step))
    dst = np.fromiter((t.dst for t in step), np.int64, len(step))
    piece = np.fromiter((t.piece for t in step), np.int64, len(step))
    level = np.fromiter((-1 if t.level is None else t.level for t in step), np.int64, len(step))
    return src, dst, piece, np.zeros(len(step), dtype=bool), level


def touch(touched: np.ndarray, src, dst, ptr, regions, send_done, recv_done) -> None:
    """What this step's sides did to each (rank, region): the latest of its group, for the next step's sides (a
    step never sends and receives one piece at one rank: plans are validated so)."""
    counts = np.diff(ptr)
    key = np.concatenate([np.repeat(src, counts), np.repeat(dst, counts)]) * touched.shape[1] + \
        np.concatenate([regions, regions])
    done = np.concatenate([np.repeat(send_done, counts), np.repeat(recv_done, counts)])
    if not len(key):
        return
    order = np.argsort(key, kind="stable")
    key, done = key[order], done[order]
    first = np.ones(len(key), dtype=bool)
    first[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(first)
    touched.flat[key[starts]] = np.maximum.reduceat(done, starts)


def add(acc: np.ndarray, links: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    """acc with values summed in per link (grown to the links seen)."""
    if len(acc) < count:
        acc = np.concatenate([acc, np.zeros(count - len(acc))])
    if len(links):
        acc += np.bincount(links, weights=values, minlength=len(acc))
    return acc
