"""BML (Algorithm 1 of the BML paper) and its generalization to any mixed-radix hierarchy.

Ranks are numbered by digits d_0 (fastest) .. d_{m-1}; ranks that differ only in digit l share a
level-l group (a BCube level-l switch, a Fat-Tree edge switch / pod / core, a tree switch).
Thread t aggregates over the digits in the order l_w = (t + w) mod m, then broadcasts in reverse.
Piece <t, q> ends fully aggregated on rank q and is then broadcast to everyone.
"""

import math
from typing import List, Sequence, Tuple

import numpy as np

from emulation.core.formulas import Theory, all_reduce_bound, host_tf
from workloads.algorithms.base import Algorithm
from workloads.codecs import SUMMING
from workloads.plan import Plan
from workloads.plan_table import TransferTable, table_plan


def hierarchical(name: str, radices: Sequence[int], threads: int, pin_levels: bool) -> Plan:
    """Aggregate digit by digit (k steps), broadcast back (k steps); `threads` concurrent streams.

    pin_levels tags each transfer with its digit's level, so on BCube it uses that level's link.
    Built as a table: rank a's transfers to each neighbour s, ascending, each of the pieces it sends s ascending.
    """
    m = len(radices)
    ranks = math.prod(radices)
    scale = np.cumprod([1] + list(radices[:-1])).astype(np.int64)
    digits = (np.arange(ranks, dtype=np.int64)[:, None] // scale[None, :]) % np.asarray(radices, dtype=np.int64)
    columns: List[Tuple[np.ndarray, ...]] = []
    step_ends, rows = [], 0
    for t in range(threads):
        order = [(t + w) % m for w in range(m)]
        ends = []
        for w in range(2 * m):
            reduce = w < m
            level = order[w] if reduce else order[m - 1 - (w - m)]
            fixed = order[:w] + [level] if reduce else order[:m - (w - m)]
            # each rank's neighbours at this level, ascending: every other value of its digit there
            values = np.broadcast_to(np.arange(radices[level], dtype=np.int64), (ranks, radices[level]))
            others = values != digits[:, level:level + 1]
            src = np.broadcast_to(np.arange(ranks, dtype=np.int64)[:, None], values.shape)[others]
            dst = src + (values[others] - digits[src, level]) * scale[level]
            # the pieces: those whose digits at the fixed levels are the key's (reduce: a's with s's digit at this
            # level; broadcast: a's own), the free levels' digits running over every value, ascending
            base = digits[dst if reduce else src, level] * scale[level]  # the level is always among the fixed
            for f in fixed:
                if f != level:
                    base = base + digits[src, f] * scale[f]
            free = np.zeros(1, dtype=np.int64)
            for f in range(m):
                if f not in fixed:
                    free = np.add.outer(np.arange(radices[f], dtype=np.int64) * scale[f], free).ravel()
            free.sort()
            per = len(free)
            columns.append((np.repeat(src, per), np.repeat(dst, per), t * ranks + (base[:, None] + free).ravel(),
                            np.full(len(src) * per, not reduce), np.full(len(src) * per, level if pin_levels else -1)))
            rows += len(src) * per
            ends.append(rows)
        step_ends.append(tuple(ends))
    src, dst, piece, copy, level = (np.concatenate(c) for c in zip(*columns))
    return table_plan(name, ranks, threads * ranks, TransferTable(src, dst, piece, copy.astype(bool), level,
                                                                   tuple(step_ends)),
                      range(ranks), {"radices": list(radices), "threads": threads})


def hierarchical_transfers(radices: Sequence[int], threads: int) -> int:
    """How many transfers hierarchical() makes: in each thread's step on level l with fixed digits F, every rank
    sends each of its r_l - 1 neighbours the pieces whose free digits run over every value."""
    m, ranks, total = len(radices), math.prod(radices), 0
    for t in range(threads):
        order = [(t + w) % m for w in range(m)]
        for w in range(2 * m):
            level = order[w] if w < m else order[m - 1 - (w - m)]
            fixed = order[:w] + [level] if w < m else order[:m - (w - m)]
            total += ranks * (radices[level] - 1) * (ranks // math.prod(radices[f] for f in set(fixed)))
    return total


def bml_plan(topo, servers: int) -> Plan:
    """BML on BCube(n,k): k threads, k*N pieces, thread t's step w on level (t+w) mod k."""
    n, k = topo.params
    return hierarchical("bml", [n] * k, k, pin_levels=True)


def bml_theory(topo, gradient_bytes, bw, servers: int) -> Theory:
    """BML paper: 2(N-1)/(kN) * TF -- every host sends on its k links at once."""
    tf = host_tf(gradient_bytes, bw)
    k = topo.params[1]
    return Theory(all_reduce_bound(len(topo.hosts)) / k * tf, "2(N-1)/(kN) * TF", tf)


def hier_theory(topo, gradient_bytes, bw, servers: int) -> Theory:
    """One NIC moves the same bytes per host as PS: 2(N-1)/N * TF."""
    tf = host_tf(gradient_bytes, bw)
    return Theory(all_reduce_bound(len(topo.hosts)) * tf, "2(N-1)/N * TF", tf)


BML = Algorithm(
    name="bml", summary="BML Algorithm 1 on BCube: k threads, each step pinned to one BCube level",
    paper="BML (Wang et al., NeurIPS 2018)", topologies=("bcube",), theory=bml_theory, plan=bml_plan,
    codecs=SUMMING, transfers=lambda topo, servers: hierarchical_transfers([topo.params[0]] * topo.params[1],
                                                                           topo.params[1]))

HIER = Algorithm(
    name="hier", summary="BML's hierarchical aggregation with one thread, grouped by edge switch, pod, core",
    paper="BML (Wang et al., NeurIPS 2018) Fig. 5 on Fat-Tree", topologies=("fattree", "tree", "star", "leafspine"),
    theory=hier_theory, plan=lambda topo, servers: hierarchical("hier", topo.radices(), 1, pin_levels=False),
    codecs=SUMMING, transfers=lambda topo, servers: hierarchical_transfers(topo.radices(), 1))
