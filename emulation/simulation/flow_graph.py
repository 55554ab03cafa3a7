"""A plan as the flow model's graph, built with arrays: its units (what moves as a whole) and the dependencies
between their send and receive sides under the engine's rules (see flows.py).

Nodes: unit u's send side is 2u, its receive side 2u+1; then join nodes, each done when all its members are
(the sides that touched one region of one rank in one step), so a wide step costs edges, not their square.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from workloads.plan import Plan

WireBits = Dict[Tuple[int, int, int, int, int], int]


@dataclass
class FlowGraph:
    """Units (arrays indexed by unit id) and the dependents of every node (CSR)."""

    stream: np.ndarray
    step: np.ndarray
    order: np.ndarray  # the step's place among all steps of all streams, in plan order
    src: np.ndarray
    dst: np.ndarray
    level: np.ndarray  # the link level the unit's connection is pinned to (0: routed)
    bytes: np.ndarray
    nodes: int
    pending: np.ndarray  # per node: dependencies not yet done
    dependents_ptr: np.ndarray
    dependents: np.ndarray

    @property
    def sides(self) -> int:
        """How many send and receive sides (the nodes before the joins)."""
        return 2 * len(self.src)

    def dependents_of(self, nodes: np.ndarray) -> np.ndarray:
        """Every dependent of these nodes (repeated as often as the dependency is)."""
        return gather(self.dependents_ptr, self.dependents, nodes)


def gather(ptr: np.ndarray, values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The values of these rows of a CSR table (ptr: where each row starts), rows after one another."""
    return values[gather_index(ptr[:-1], ptr[rows + 1] - ptr[rows], rows)]


def gather_index(starts: np.ndarray, counts: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The positions of these rows' values in a table whose rows start at `starts` (counts: each of these rows'
    length), rows after one another."""
    at = np.repeat(starts[rows] - np.cumsum(counts) + counts, counts)
    at += np.arange(len(at), dtype=at.dtype)
    return at


def columns(plan: Plan, piece_bytes: Sequence[int], wire_bits: Optional[WireBits]):
    """Every transfer of the plan as arrays, in plan order: stream, step, global step order, src, dst, piece, level
    (-1: none), wire bytes, fp32 bytes."""
    if plan.table is not None:  # built as arrays: read them
        t = plan.table
        stream, step, order = t.step_rows()
        src, dst, piece, level = t.src, t.dst, t.piece, t.level
        total = len(src)
    else:
        steps = [(s, n, step) for s, stream in enumerate(plan.streams) for n, step in enumerate(stream)]
        sizes = np.array([len(step) for _, _, step in steps], dtype=np.int64)
        total = int(sizes.sum())
        every = [t for _, _, step in steps for t in step]
        src = np.fromiter((t.src for t in every), np.int64, total)
        dst = np.fromiter((t.dst for t in every), np.int64, total)
        piece = np.fromiter((t.piece for t in every), np.int64, total)
        level = np.fromiter((-1 if t.level is None else t.level for t in every), np.int64, total)
        order = np.repeat(np.arange(len(steps), dtype=np.int64), sizes)
        stream = np.array([s for s, _, _ in steps], dtype=np.int64)[order]
        step = np.array([n for _, n, _ in steps], dtype=np.int64)[order]
    fp32 = np.asarray(piece_bytes, dtype=float)[piece]
    wire = fp32
    if wire_bits:
        bits = np.fromiter((wire_bits.get((int(a), int(b), int(c), int(d), int(e)), 32)
                            for a, b, c, d, e in zip(stream, step, src, dst, piece)), float, total)
        wire = fp32 * bits / 32
    return stream, step, order, src, dst, piece, level, wire, fp32


def first_of_each(keys: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Group ids numbered by first appearance, and the index where each group first appears."""
    if len(keys):
        run = np.ones(len(keys), dtype=bool)
        run[1:] = keys[1:] != keys[:-1]
        first = np.flatnonzero(run)
        if np.all(keys[first[1:]] > keys[first[:-1]]):  # each key in one run (plans list messages so): no sort
            return np.cumsum(run) - 1, first
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    by_appearance = np.argsort(first, kind="stable")
    renumber = np.empty_like(by_appearance)
    renumber[by_appearance] = np.arange(len(by_appearance))
    return renumber[inverse.ravel()], first[by_appearance]


def chain(keys: np.ndarray, order: np.ndarray, sides: np.ndarray, next_node: int):
    """Sides that touch the same key in successive orders: every side of a group (same key, same order) depends
    on the group of the same key just before it, through a join node when that group has several sides.
    Returns (edges from, edges to, nodes used)."""
    if not len(keys):
        return np.zeros(0, sides.dtype), np.zeros(0, sides.dtype), next_node
    top, high = int(order.max()) + 1, int(keys.max())
    new = np.ones(len(keys), dtype=bool)
    if high < (1 << 62) // top:  # one sort key, and no sorted copies of keys and order
        ranked = keys.astype(index_type((high + 1) * top), copy=False) * top + order
        o = np.argsort(ranked, kind="stable")  # timsort: plans list their transfers in runs
        ranked = ranked[o]
        new[1:] = ranked[1:] != ranked[:-1]
        start = np.flatnonzero(new)
        key_of = ranked[start] // top
        del ranked
    else:
        o = np.lexsort((order, keys))
        k, od = keys[o], order[o]
        new[1:] = (k[1:] != k[:-1]) | (od[1:] != od[:-1])
        start = np.flatnonzero(new)
        key_of = k[start]
        del k, od
    sd = sides[o]
    del o, new
    size = np.diff(np.append(start, len(sd)))
    has_before = np.zeros(len(start), dtype=bool)
    has_before[1:] = key_of[1:] == key_of[:-1]
    has_after = np.zeros(len(start), dtype=bool)
    has_after[:-1] = has_before[1:]
    done_by = np.full(len(start), -1, dtype=sd.dtype)  # the node that says a group is done
    single = has_after & (size == 1)
    done_by[single] = sd[start[single]]
    joined = has_after & (size > 1)
    done_by[joined] = next_node + np.arange(int(joined.sum()), dtype=sd.dtype)
    before = np.roll(done_by, 1)  # the group just before each (the same key where has_before)
    return (np.concatenate([sd[np.repeat(joined, size)], np.repeat(before[has_before], size[has_before])]),
            np.concatenate([np.repeat(done_by[joined], size[joined]), sd[np.repeat(has_before, size)]]),
            next_node + int(joined.sum()))


def build(plan: Plan, piece_bytes: Sequence[int], chunk_bytes: Optional[int] = None,
          wire_bits: Optional[WireBits] = None) -> FlowGraph:
    """The graph of one synchronization: a unit is a message (everything src sends dst in one step of one stream)
    or, with chunk_bytes, each of the engine's chunks of it, consecutive small ones joined."""
    g, regions, region_ptr = units_of(plan, piece_bytes, chunk_bytes, wire_bits)  # its temporaries freed here
    if plan.meta.get("barriers"):  # a step waits for every earlier step of its stream on this rank (the engine's)
        regions, region_ptr = g.stream.copy(), np.arange(len(g.stream) + 1, dtype=np.int64)
    dependencies(g, regions, region_ptr, max(plan.ranks, 1))
    return g


def units_of(plan: Plan, piece_bytes: Sequence[int], chunk_bytes: Optional[int], wire_bits: Optional[WireBits]):
    """The graph's units (without dependencies yet), and each unit's regions (CSR)."""
    stream, step, order, src, dst, piece, level, wire, fp32 = columns(plan, piece_bytes, wire_bits)
    ranks = max(plan.ranks, 1)
    msg, first = first_of_each((order * ranks + src) * ranks + dst)
    count = len(first)
    msg_wire = np.bincount(msg, weights=wire, minlength=count)
    msg_fp32 = np.bincount(msg, weights=fp32, minlength=count)
    levelled = level >= 0
    tagged, where = np.unique(msg[levelled], return_index=True)  # a message's level: its first transfer's that has one
    msg_level = np.full(count, -1, dtype=np.int64)
    msg_level[tagged] = level[levelled][where]
    in_order = np.all((msg[1:] > msg[:-1]) | ((msg[1:] == msg[:-1]) & (piece[1:] >= piece[:-1])))
    by_piece = slice(None) if in_order else np.lexsort((piece, msg))  # the engine sends pieces in piece order
    msg_pieces, msg_ptr = piece[by_piece], np.searchsorted(msg[by_piece], np.arange(count + 1))
    units, regions, region_ptr = cut(msg_pieces, msg_ptr, msg_fp32, piece_bytes, chunk_bytes)
    packed = np.divide(msg_wire, msg_fp32, out=np.ones(count), where=msg_fp32 > 0)
    of = first[units[:, 0]]  # each unit's message's first transfer
    u_bytes = units[:, 1].astype(float) * packed[units[:, 0]]
    u_level = pinned_levels(stream[first], src[first], dst[first], msg_level, ranks)[units[:, 0]]
    return FlowGraph(stream[of], step[of], order[of], src[of], dst[of], u_level, u_bytes, 0, *no_edges()), \
        regions, region_ptr


def no_edges():
    """pending, dependents_ptr and dependents of a graph without nodes."""
    return np.zeros(0, dtype=np.int64), np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64)


def dependencies(g: FlowGraph, regions: np.ndarray, region_ptr: np.ndarray, ranks: int) -> None:
    """Fill in the graph's nodes and their dependents under the engine's three rules."""
    count = len(g.src)
    # node ids in 32 bits where they fit (half the memory): two sides a unit, and at most one join per group of the
    # three chains (two sides a region touched, one a unit, two a unit)
    ids = index_type(5 * count + 2 * len(regions))
    units = np.arange(count, dtype=ids)
    edges_from, edges_to, nodes = [], [], 2 * count
    # a side waits until its rank finished every earlier-step operation on the data it carries
    unit_of = np.repeat(units, np.diff(region_ptr))
    region_count = int(regions.max()) + 1 if len(regions) else 1
    keys = index_type(ranks * region_count)
    touch = np.concatenate([g.src[unit_of], g.dst[unit_of]]).astype(keys) * region_count + \
        np.concatenate([regions, regions]).astype(keys)
    del regions
    a, b, nodes = chain(touch, np.concatenate([g.order[unit_of]] * 2).astype(keys),
                        np.concatenate([2 * unit_of, 2 * unit_of + 1]), nodes)
    del touch, unit_of
    edges_from.append(a)
    edges_to.append(b)
    # a send waits until this rank's sends of the latest earlier step on the same link level are out (any stream)
    levels = int(g.level.max(initial=0)) + 1
    a, b, nodes = chain(g.src * levels + g.level, g.step, 2 * units, nodes)
    edges_from.append(a)
    edges_to.append(b)
    # a connection carries its units one after the other (each direction, per stream)
    streams = int(g.stream.max(initial=0)) + 1
    queue = np.concatenate([(g.src * ranks + g.dst) * streams + g.stream,
                            ((ranks + g.dst) * ranks + g.src) * streams + g.stream])
    sides = np.concatenate([2 * units, 2 * units + 1])
    a, b, nodes = chain(queue, np.concatenate([g.step, g.step]) * (2 * count) + sides, sides, nodes)
    edges_from.append(a)
    edges_to.append(b)
    frm, to = np.concatenate(edges_from), np.concatenate(edges_to)
    del edges_from, edges_to, a, b
    g.nodes = nodes
    g.pending = np.bincount(to, minlength=nodes).astype(np.int64)
    g.dependents_ptr = np.zeros(nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(frm, minlength=nodes), out=g.dependents_ptr[1:])
    g.dependents = to[np.argsort(frm, kind="stable")]


def index_type(bound: int):
    """The narrower integer type that holds values below bound."""
    return np.int32 if bound < (1 << 31) else np.int64


def pinned_levels(stream: np.ndarray, src: np.ndarray, dst: np.ndarray, level: np.ndarray, ranks: int) -> np.ndarray:
    """Each message's link level: the level the first message (in plan order) between its two ranks, either way,
    in its stream pinned (0: none)."""
    count = len(src)
    tagged = np.flatnonzero(level >= 0)
    keys = np.concatenate([(stream[tagged] * ranks + src[tagged]) * ranks + dst[tagged],
                           (stream[tagged] * ranks + dst[tagged]) * ranks + src[tagged]])
    which = np.concatenate([tagged, tagged])
    o = np.lexsort((which, keys))
    keys, which = keys[o], which[o]
    first = np.ones(len(keys), dtype=bool)
    first[1:] = keys[1:] != keys[:-1]
    known, known_level = keys[first], level[which[first]]
    mine = (stream * ranks + src) * ranks + dst
    at = np.searchsorted(known, mine)
    at_ok = at < len(known)
    hit = np.zeros(count, dtype=bool)
    hit[at_ok] = known[at[at_ok]] == mine[at_ok]
    out = np.zeros(count, dtype=np.int64)
    out[hit] = known_level[at[hit]]
    return out


def cut(pieces: np.ndarray, ptr: np.ndarray, total: np.ndarray, piece_bytes: Sequence[int],
        chunk_bytes: Optional[int]):
    """Each message (its pieces: pieces[ptr[m]:ptr[m + 1]]) as the units that move as a whole: rows (message, fp32
    bytes) and each unit's regions (CSR; a region is a piece, or one chunk of a piece cut every chunk_bytes).
    Without chunk_bytes, or when a message fits one chunk, the message itself, every piece a region; else the
    engine's chunks, consecutive chunks joined up to chunk_bytes so tiny pieces cost no extra events."""
    count = len(total)
    sizes = np.asarray(piece_bytes, dtype=np.int64)
    chunks_of = np.ones(len(sizes), dtype=np.int64) if not chunk_bytes else np.maximum(1, -(-sizes // chunk_bytes))
    per = int(chunks_of.max()) + 1 if len(sizes) else 1  # region of chunk j of piece p: p * per + j + 1
    big = np.flatnonzero(total > chunk_bytes) if chunk_bytes else np.zeros(0, dtype=np.int64)
    split = chunked(pieces, ptr, big, sizes, chunks_of, per, chunk_bytes)
    units_of = np.ones(count, dtype=np.int64)
    units_of[big] = split.units
    unit_msg = np.repeat(np.arange(count, dtype=np.int64), units_of)
    first_unit = np.cumsum(units_of) - units_of
    unit_bytes = total.astype(np.int64)[unit_msg]
    held = np.diff(ptr)[unit_msg]
    at = gather_index(first_unit, split.units, big)
    unit_bytes[at], held[at] = split.bytes, split.held
    region_ptr = np.zeros(len(unit_msg) + 1, dtype=np.int64)
    np.cumsum(held, out=region_ptr[1:])
    regions = np.empty(int(region_ptr[-1]), dtype=np.int64)
    whole = np.ones(count, dtype=bool)
    whole[big] = False
    rows = first_unit[whole]
    whole_rows = np.flatnonzero(whole)
    regions[gather_index(region_ptr[:-1], np.diff(region_ptr)[rows], rows)] = \
        pieces[gather_index(ptr[:-1], np.diff(ptr)[whole_rows], whole_rows)] * per
    regions[gather_index(region_ptr[first_unit], split.chunks, big)] = split.regions
    return np.stack([unit_msg, unit_bytes], axis=1), regions, region_ptr


@dataclass
class Chunked:
    """The messages larger than a chunk, cut: per message its units and chunks; per unit (messages in turn) its
    bytes and chunks; every chunk's region, messages and units in turn."""

    units: np.ndarray
    chunks: np.ndarray
    bytes: np.ndarray
    held: np.ndarray
    regions: np.ndarray


def chunked(pieces: np.ndarray, ptr: np.ndarray, big: np.ndarray, sizes: np.ndarray, chunks_of: np.ndarray,
            per: int, chunk_bytes: int) -> Chunked:
    """The big messages' units, each as many consecutive chunks as fit in chunk_bytes (at least one), every message
    cut at once: one round per unit of the longest."""
    counts = ptr[big + 1] - ptr[big]
    own = pieces[gather_index(ptr[:-1], counts, big)]
    n = chunks_of[own]
    piece = np.repeat(own, n)
    j = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    b = sizes[piece]
    size = np.where(b > 0, np.minimum(chunk_bytes, b - j * chunk_bytes), 0)
    region = np.where(np.repeat(n == 1, n), piece * per, piece * per + j + 1)
    before = np.zeros(len(size) + 1, dtype=np.int64)  # bytes of the chunks before each, all messages in turn
    np.cumsum(size, out=before[1:])
    per_message = np.add.reduceat(n, np.cumsum(counts) - counts) if len(big) else np.zeros(0, dtype=np.int64)
    end = np.cumsum(per_message)
    here = end - per_message
    owners, starts, ends, active = [], [], [], np.arange(len(big), dtype=np.int64)
    while len(active):
        at = here[active]
        to = np.maximum(at + 1, np.minimum(np.searchsorted(before, before[at] + chunk_bytes, side="right") - 1,
                                           end[active]))
        owners.append(active)
        starts.append(at)
        ends.append(to)
        here[active] = to
        active = active[to < end[active]]
    none = np.zeros(0, dtype=np.int64)
    first, last = (np.concatenate(c) if c else none for c in (starts, ends))
    order = np.argsort(first, kind="stable")  # units in chunk order: messages in turn, each's units in turn
    first, last = first[order], last[order]
    units = np.bincount(np.concatenate(owners) if owners else none, minlength=len(big))
    return Chunked(units, per_message, before[last] - before[first], last - first, region)
