"""BML (Algorithm 1 of the BML paper) and its generalization to any mixed-radix hierarchy.

Ranks are numbered by digits d_0 (fastest) .. d_{m-1}; ranks that differ only in digit l share a
level-l group (a BCube level-l switch, a Fat-Tree edge switch / pod / core, a tree switch).
Thread t aggregates over the digits in the order l_w = (t + w) mod m, then broadcasts in reverse.
Piece <t, q> ends fully aggregated on rank q and is then broadcast to everyone.
"""

import math
from typing import List, Sequence

from emulation.core.radix import group_members, to_digits
from emulation.core.formulas import Theory, all_reduce_bound, host_tf
from workloads.algorithms.base import Algorithm
from workloads.plan import COPY, REDUCE, Plan, Transfer


def group_neighbours(rank: int, level: int, radices: Sequence[int]) -> List[int]:
    """Ranks that differ from rank only in digit `level`."""
    return [r for r in group_members(rank, level, radices) if r != rank]


def matching(digits: Sequence[int], fixed: Sequence[int], radices: Sequence[int]) -> List[int]:
    """Ranks, ascending, whose digits at the `fixed` levels equal `digits` there (the others run free)."""
    base, scale, offsets = 0, 1, [0]
    for level, r in enumerate(radices):
        if level in fixed:
            base += digits[level] * scale
        else:
            offsets = [o + d * scale for d in range(r) for o in offsets]
        scale *= r
    return sorted(base + o for o in offsets)


def hierarchical(name: str, radices: Sequence[int], threads: int, pin_levels: bool) -> Plan:
    """Aggregate digit by digit (k steps), broadcast back (k steps); `threads` concurrent streams.

    pin_levels tags each transfer with its digit's level, so on BCube it uses that level's link.
    """
    m = len(radices)
    ranks = math.prod(radices)
    digits = [to_digits(q, radices) for q in range(ranks)]
    neighbours = [[group_neighbours(a, level, radices) for level in range(m)] for a in range(ranks)]
    streams = []
    for t in range(threads):
        order = [(t + w) % m for w in range(m)]
        base = t * ranks
        steps = []
        for w, level in enumerate(order):
            tag = level if pin_levels else None
            fixed = order[:w] + [level]
            step = []
            for a in range(ranks):
                for s in neighbours[a][level]:
                    # pieces that share a's digits aggregated so far and belong to s's group at this level
                    key = list(digits[a])
                    key[level] = digits[s][level]
                    step += [Transfer(a, s, base + q, REDUCE, tag) for q in matching(key, fixed, radices)]
            steps.append(tuple(step))
        for w in range(m):
            level = order[m - 1 - w]
            fixed = order[:m - w]
            tag = level if pin_levels else None
            step = []
            for a in range(ranks):
                pieces = [base + q for q in matching(digits[a], fixed, radices)]
                for s in neighbours[a][level]:
                    step += [Transfer(a, s, q, COPY, tag) for q in pieces]
            steps.append(tuple(step))
        streams.append(tuple(steps))
    return Plan(name, ranks, threads * ranks, tuple(streams), tuple(range(ranks)),
                {"radices": list(radices), "threads": threads})


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
    codecs=("none", "terngrad"))

HIER = Algorithm(
    name="hier", summary="BML's hierarchical aggregation with one thread, grouped by edge switch, pod, core",
    paper="BML (Wang et al., NeurIPS 2018) Fig. 5 on Fat-Tree", topologies=("fattree", "tree", "star", "leafspine"),
    theory=hier_theory, plan=lambda topo, servers: hierarchical("hier", topo.radices(), 1, pin_levels=False),
    codecs=("none", "terngrad"))
