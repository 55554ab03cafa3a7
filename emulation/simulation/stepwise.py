"""The flow model a step at a time, for plans whose steps' messages run without other steps' messages on their links
(a ring, a hierarchy's rings, on most networks): each message moves as one unit at its path's slowest link, or, where
messages of one step share a link, at the max-min shares the event model gives them as each starts or finishes
(shared_step.py); each rank's send and receive are done at the latest of what they wait for under the engine's rules
(flow_graph.py) plus their own time, computed for all ranks of a step at once from a few arrays of state: per rank
and piece when it was last touched, per rank and link level when its previous step's sends arrived, per connection
when its previous unit was done. Nothing grows with the plan's length but that state, so a ring over 10,000 ranks
(2x10^8 transfers) is 2x10^4 steps of 10^4 messages; a step with the same messages as the one before reuses its
paths, rates and shares (solved once per distinct step and set of message sizes).

It answers exactly what the event model answers (tests check it), and declines where it cannot: a message larger
than a chunk (its chunks would pipeline), packed wire bits, a step of all to all (a parameter server's), a message
on a link two senders use that starts before the link's previous message of another step finished (checked per
step on such contested links only), two connections of one rank on a link in one step of two streams, a level a later
message pins, or state larger than the memory it may take. The data chain is kept per piece for a plan whose pieces
move as tokens (a ring: per piece its holder), else per rank and piece (step_state.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from emulation.simulation.allocator import keep_large_arrays_in_heap
from emulation.simulation.fairshare import TIME_TOLERANCE
from emulation.simulation.shared_step import Sharing
from emulation.simulation.step_state import Declined, NotTokens, Shape, Tokens, Touches, as_slice, shape_of
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
    shared_steps: int  # steps whose messages shared a link (moved by their fair shares)
    rows: Optional[List[tuple]]  # per unit for a timeline (None past the trace limit)
    landed: Optional[List[float]]
    tokens: bool = False  # the data chain was kept per piece (its pieces moved as tokens)


DENSE_MESSAGES_PER_RANK = 64  # a step with more (a parameter server's: each rank to every other) is the events'


def dense(src: np.ndarray, ranks: int) -> None:
    """Declined, before any path is looked up, where a step has more than a few messages a rank (all to all: every
    message shares its ends' links with many, which the event model answers in a few events)."""
    if len(src) > DENSE_MESSAGES_PER_RANK * max(ranks, 1):
        raise Declined(f"a step of {len(src)} messages over {ranks} ranks (more than {DENSE_MESSAGES_PER_RANK} a "
                       f"rank: all to all)")


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
        self.contested = np.zeros(0, dtype=bool)  # links two senders (or two messages of a step) cross
        self.free = np.zeros(0)  # per contested link: when the last message crossing it finished sending
        self.version = 0  # counts the times links became contested (a shape then finds its contested links again)
        self.least_latency = np.inf  # the least latency of any message: its send ended at least this before it landed

    def of(self, src: np.ndarray, dst: np.ndarray, level: np.ndarray, stream: int):
        """(per message: link ids as CSR (lengths, flat), rate, latency; the messages sharing a link), memoized by the
        step's messages."""
        key = np.stack([src, dst, level]).tobytes() + bytes([stream % 256])
        found = self.memo.get(key)
        if found is None:
            dense(src, len(self.router.topo.hosts))
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
            if len(latency):
                self.least_latency = min(self.least_latency, float(np.min(latency)))
            found = self.memo[key] = (lengths, flat, rate, latency, Sharing.of(lengths, flat, capacity))
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
            self.contested = np.concatenate([self.contested, np.zeros(extra, dtype=bool)])
            self.free = np.concatenate([self.free, np.zeros(extra)])

    def claim(self, lengths: np.ndarray, flat: np.ndarray, owner: np.ndarray, step: int, connection: np.ndarray,
              sharing: Optional[Sharing], sent_by: np.ndarray) -> None:
        """The links these messages cross become their senders', or contested where another sender has one or two
        of the step's messages cross one (Declined where another stream's connection uses one in the same step);
        sent_by: per sender, when its last message landed (a newly contested link was free the least latency
        before)."""
        unit = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        mine = owner[unit]
        seen = self.owner[flat]
        inside = np.zeros(len(flat), dtype=bool) if sharing is None else sharing.mask[unit]
        same_step = (self.last_step[flat] == step) & ~self.contested[flat] & ~inside
        if np.any(same_step & (self.last_connection[flat] != connection[unit])):
            raise Declined("two connections of one rank cross one link in one step")
        fresh = ((seen >= 0) & (seen != mine) | inside) & ~self.contested[flat]
        if fresh.any():
            links, at = np.unique(flat[fresh], return_index=True)
            before = seen[fresh][at]
            self.free[links] = np.where(before >= 0, sent_by[np.maximum(before, 0)] - self.least_latency, -np.inf)
            self.contested[links] = True
            self.version += 1
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


class Pins:
    """Each message's link level: the level the first tagged message between its two ranks (either way) in its
    stream pinned, else 0 (Declined where a later message pins a pair an earlier one used untagged)."""

    def __init__(self, ranks: int):
        self.ranks = ranks
        self.known = np.zeros(0, dtype=np.int64)  # pinned pairs' keys, sorted
        self.known_level = np.zeros(0, dtype=np.int64)
        self.untagged = np.zeros(0, dtype=np.int64)  # pairs that sent untagged while unpinned, sorted
        self.unpinned_before = False  # messages went untagged while nothing was pinned (their pairs not kept)

    def levels(self, stream: int, src: np.ndarray, dst: np.ndarray, tag: np.ndarray) -> np.ndarray:
        """The step's messages' levels."""
        if not len(self.known) and (tag < 0).all():  # the common case: nothing pinned anywhere (yet)
            self.unpinned_before = True
            return np.zeros(len(src), dtype=np.int64)
        if self.unpinned_before:
            raise Declined("a level pinned after untagged messages")
        key = (stream * self.ranks + np.minimum(src, dst)) * self.ranks + np.maximum(src, dst)
        pairs, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        tagged = np.flatnonzero(tag >= 0)
        tagged_pairs, at = np.unique(key[tagged], return_index=True)
        first_tagged = np.full(len(pairs), len(key))  # per pair, its first tagged message (len(key): none)
        first_tagged[np.searchsorted(pairs, tagged_pairs)] = tagged[at]
        level = lookup(self.known, self.known_level, pairs)
        fresh = (level < 0) & (first_tagged < len(key))
        if np.any(fresh & ((first < first_tagged) | np.isin(pairs, self.untagged))):
            raise Declined("a level pinned after its pair sent untagged")
        level[fresh] = tag[first_tagged[fresh]]
        if fresh.any():
            self.known, self.known_level = merged(self.known, self.known_level, pairs[fresh], level[fresh])
        loose = level < 0
        if loose.any():
            self.untagged = np.union1d(self.untagged, pairs[loose])
        return np.maximum(level, 0)[inverse.ravel()]


def lookup(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """values of the wanted keys in sorted keys (-1 where absent)."""
    out = np.full(len(wanted), -1, dtype=np.int64)
    if len(keys):
        at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
        hit = keys[at] == wanted
        out[hit] = values[at[hit]]
    return out


def merged(keys: np.ndarray, values: np.ndarray, new_keys: np.ndarray, new_values: np.ndarray):
    """Sorted keys and their values with new (absent) keys added."""
    keys, values = np.concatenate([keys, new_keys]), np.concatenate([values, new_values])
    order = np.argsort(keys, kind="stable")
    return keys[order], values[order]


def simulate_stepwise(plan: Plan, piece_bytes: Sequence[int], router: Router, rates: Dict[int, float],
                      unit_latency, chunk_bytes: Optional[int], step_delays: Dict[Tuple[int, int], float],
                      keep_units: bool, trace_units: int, check_tokens: bool = False) -> StepResult:
    """One synchronization, step by step (Declined where the plan needs the graph or the event model);
    check_tokens: check every step of a plan that declares its pieces move as tokens (tests do)."""
    keep_large_arrays_in_heap()
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
    busy = add(run.busy, np.arange(len(run.shared_busy)), run.shared_busy, len(run.paths.ids))
    return StepResult(float(rank_done.max(initial=0.0)), run.units, run.link_bytes, busy, list(run.paths.hops),
                      rank_done, run.steps, len(run.shapes), run.shared_steps, run.rows if kept else None,
                      run.landed if kept else None, tokens)


class Stepper:
    """The stepwise model's state and its step."""

    def __init__(self, plan: Plan, sizes: np.ndarray, router: Router, rates: Dict[int, float], unit_latency,
                 chunk_bytes: Optional[int], regions: int, keep_units: bool, trace_units: int, tokens: bool,
                 check_tokens: bool = False):
        self.ranks, self.streams = max(plan.ranks, 1), len(plan.streams)
        self.barriers, self.sizes, self.chunk_bytes = bool(plan.meta.get("barriers")), sizes, chunk_bytes
        self.sizes_max = float(sizes.max(initial=0.0))
        self.levels = router.topo.levels + 1
        self.paths = Paths(router, rates, unit_latency, self.levels)
        self.state, self.pins = State(self.ranks, self.levels), Pins(self.ranks)
        declared = getattr(plan.table, "tokens", False) and check_tokens is False
        self.data = Tokens(regions, not declared) if tokens else Touches(self.ranks, regions, self.barriers)
        self.shapes: Dict[bytes, Shape] = {}
        self.last: Optional[tuple] = None  # the step before's arrays and shape
        self.link_bytes, self.busy, self.shared_busy = np.zeros(0), np.zeros(0), np.zeros(0)
        self.rows, self.landed = ([], []) if keep_units else (None, None)
        self.trace_units = trace_units
        self.units, self.steps, self.shared_steps = 0, 0, 0

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
        sh.lengths, sh.flat, sh.rate, sh.latency, sh.sharing = self.paths.of(sh.src, sh.dst, level, stream)
        sh.contested_version = -1
        sh.unit = np.repeat(np.arange(len(sh.src), dtype=np.int64), sh.lengths)
        sh.conn_send = self.state.slots((sh.src * self.ranks + sh.dst) * self.streams + stream)
        sh.conn_recv = self.state.slots(((self.ranks + sh.dst) * self.ranks + sh.src) * self.streams + stream)
        sh.key = level * self.ranks + sh.src  # level-major: a step of every rank on one level is a slice
        sh.keys = np.unique(sh.key)
        sh.order_at, sh.key_at, sh.send_at, sh.recv_at = (as_slice(a) for a in (sh.order, sh.key, sh.conn_send,
                                                                                  sh.conn_recv))
        sh.claimed = False
        sh.moved = np.zeros(len(sh.src))

    def rank_done(self) -> np.ndarray:
        """When each rank was done: its latest sends' arrival on any level, its connections' latest receive (each
        rank's sends on a level, and each connection's receives, are done in order, so the latest are the last)."""
        st, out = self.state, np.zeros(self.ranks)
        np.maximum(out, st.level_last.reshape(self.levels, self.ranks).max(axis=0), out=out)
        receiving = st.keys >= self.ranks * self.ranks * self.streams
        dst = st.keys[receiving] // self.streams // self.ranks - self.ranks
        np.maximum.at(out, dst, st.done[st.slot_of[receiving]])
        return out

    def shared(self, sh: Shape, fp32: np.ndarray, ready_send: np.ndarray, duration: np.ndarray) -> np.ndarray:
        """The step's durations with its link-sharing messages' as their fair shares give them."""
        share = sh.sharing
        self.shared_steps += 1
        took, busy = share.durations(fp32[share.units], ready_send[share.units])
        duration = duration.copy()
        duration[share.units] = took
        self.shared_busy = add(self.shared_busy, share.links, busy, len(self.paths.ids))
        return duration

    def check_free(self, sh: Shape, ready_send: np.ndarray, duration: np.ndarray) -> None:
        """Messages on contested links start once the link's earlier messages finished sending (Declined where one
        would overlap another step's: their shares would change mid-message); the links then busy until theirs end."""
        paths = self.paths
        if sh.contested_version != paths.version:
            sh.contested_at = np.flatnonzero(paths.contested[sh.flat])
            sh.contested_version = paths.version
        if not len(sh.contested_at):
            return
        links, unit = sh.flat[sh.contested_at], sh.unit[sh.contested_at]
        if np.any(ready_send[unit] < paths.free[links] - TIME_TOLERANCE):
            raise Declined("messages of different steps would cross one link at once")
        np.maximum.at(paths.free, links, ready_send[unit] + duration[unit])

    def flush(self, sh: Shape) -> None:
        """A shape's bytes and sending time so far onto its links (a message alone on its links sent its bytes at its
        rate; the sharing ones' busy times are counted as they move)."""
        count = len(self.paths.ids)
        self.link_bytes = add(self.link_bytes, sh.flat, sh.moved[sh.unit], count)
        sending = sh.moved / sh.rate
        if sh.sharing is not None:
            sending[sh.sharing.mask] = 0.0
        self.busy = add(self.busy, sh.flat, sending[sh.unit], count)

    def step(self, n: int, stream: int, src, dst, piece, tags, step_delay: float) -> None:
        """One step's messages: when each is sent, arrives and is received; the state moved on."""
        self.steps += 1
        sh = self.shape(stream, src, dst, tags)
        pieces = piece[sh.order_at]
        if sh.single:
            fp32 = self.sizes[pieces]
        else:
            fp32 = np.add.reduceat(self.sizes[pieces], sh.ptr[:-1]) if len(pieces) else np.zeros(0)
        big = self.chunk_bytes and (not sh.single or self.sizes_max > self.chunk_bytes)
        if big and np.any(fp32 > self.chunk_bytes):
            raise Declined("a message larger than a chunk (its chunks pipeline: the graph model)")
        st = self.state
        if not sh.claimed or self.streams > 1:
            self.paths.claim(sh.lengths, sh.flat, sh.key, n, sh.dst * self.streams + stream, sh.sharing,
                             st.level_last)
            sh.claimed = True
        duration = fp32 / sh.rate  # nothing for an empty message, or one that crosses no link (infinite rate)
        level_ready = st.level_last[sh.key_at] if self.streams == 1 else st.level_ready(sh.key, n)
        ready_send = np.maximum(self.data.ready_send(sh, pieces, stream), level_ready)
        np.maximum(ready_send, st.done[sh.send_at], out=ready_send)
        if sh.sharing is not None:
            duration = self.shared(sh, fp32, ready_send, duration)
        if self.paths.version:
            self.check_free(sh, ready_send, duration)
        arrive = ready_send + duration
        arrive += sh.latency
        if step_delay:
            arrive += step_delay
        done_recv = np.maximum(st.done[sh.recv_at], arrive)
        waits = self.data.ready_recv(sh, pieces, stream)
        if waits is not None:
            np.maximum(done_recv, waits, out=done_recv)
        self.data.update(sh, pieces, stream, arrive, done_recv)
        if self.streams == 1 and len(sh.key) == len(sh.keys):  # each key's one send: this step's group
            st.level_last[sh.key_at] = arrive
        else:
            st.level_update(sh.key, sh.keys, n, arrive)
        st.done[sh.send_at], st.done[sh.recv_at] = arrive, done_recv
        sh.moved += fp32
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


def add(acc: np.ndarray, links: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    """acc with values summed in per link (grown to the links seen)."""
    if len(acc) < count:
        acc = np.concatenate([acc, np.zeros(count - len(acc))])
    if len(links):
        acc += np.bincount(links, weights=values, minlength=len(acc))
    return acc
