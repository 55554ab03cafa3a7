"""BlueConnect (Algorithm 1): all-reduce decomposed over the hierarchy P = p0*p1*...; and the two-level
reduce-to-master baseline of the BlueConnect paper (eq. 7).

Learner r has mixed-radix digits (d0 fastest): learners differing only in digit i form one stage-i
group (same level-i switch). Piece q (one of P) is also read as digits: after reduce-scatter stage i,
learner a holds the pieces whose digits 0..i equal a's, reduced over a's stage-0..i groups.
"""

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence

from emulation.core.radix import group_members, to_digits
from emulation.core.formulas import (DECOMPOSITION_HELP, Theory, best_decomposition, blueconnect_time,
                                   decomposition_time, host_tf, is_power_of_two, one_level_time, parse_decomposition,
                                   two_level_time)
from emulation.core.topology import Topology
from emulation.core.units import SECONDS
from workloads.algorithms.base import Algorithm
from workloads.option_fields import option
from workloads.codecs import SUMMING
from workloads.plan import COPY, REDUCE, Plan, Transfer


def _chunk(a_digits, level: int, value: int, pieces_digits, done_levels) -> List[int]:
    """Pieces of a's current segment (digits in done_levels match a) whose digit `level` is value."""
    return [q for q, qd in enumerate(pieces_digits)
            if qd[level] == value and all(qd[l] == a_digits[l] for l in done_levels)]


def _pairs_ring(p: int, step: int, reduce_scatter: bool):
    """(sender value, receiver value, chunk value) of one ring step over a group of p members."""
    for v in range(p):
        chunk = (v - step - 1) % p if reduce_scatter else (v - step) % p
        yield v, (v + 1) % p, chunk


def _pairs_halving(p: int, step: int, reduce_scatter: bool):
    """(sender, receiver, chunk values) of one recursive halving (reduce-scatter) or doubling step."""
    d = p >> (step + 1) if reduce_scatter else 1 << step
    for v in range(p):
        partner = v ^ d
        # halving: v keeps the half of its range holding v and sends the partner's half;
        # doubling: v sends the d chunks it holds
        base = ((partner if reduce_scatter else v) // d) * d
        yield v, partner, list(range(base, base + d))


def blueconnect(radices: Sequence[int], pin_levels: bool = False, recursive: bool = True,
                order: Sequence[int] = None) -> Plan:
    """Concurrent reduce-scatter stages up the hierarchy, all-gather stages back down (eq. 3: recursive
    halving/doubling inside power-of-two groups, ring otherwise). radices: the factors p0, p1, ... (lowest
    digits first); order: the reduce-scatter stage order (default 0, 1, ...; the all-gather runs it back)."""
    radices = list(radices)
    order = list(order) if order is not None else list(range(len(radices)))
    P = math.prod(radices)
    digits = [to_digits(q, radices) for q in range(P)]
    steps: List[tuple] = []

    def stage(level: int, reduce_scatter: bool) -> List[tuple]:
        p = radices[level]
        done = order[:order.index(level)]
        halving = recursive and is_power_of_two(p) and p > 2
        n_steps = (p.bit_length() - 1) if halving else p - 1
        out = []
        for s in range(n_steps):
            step = []
            for a in range(P):
                if digits[a][level] != 0:
                    continue  # enumerate each group once, from its member with digit 0
                members = group_members(a, level, radices)
                pairs = _pairs_halving(p, s, reduce_scatter) if halving else \
                    ((u, w, [c]) for u, w, c in _pairs_ring(p, s, reduce_scatter))
                for u, w, chunks in pairs:
                    src, dst = members[u], members[w]
                    for c in chunks:
                        for q in _chunk(digits[src], level, c, digits, done):
                            step.append(Transfer(src, dst, q, REDUCE if reduce_scatter else COPY,
                                                 level if pin_levels else None))
            out.append(tuple(step))
        return out

    for level in order:
        steps += stage(level, True)
    for level in reversed(order):
        steps += stage(level, False)
    return Plan("blueconnect", P, P, (tuple(steps),), tuple(range(P)), {"radices": radices, "order": order})


def two_level(radices: Sequence[int]) -> Plan:
    """Reduce to the master of each level-0 group, ring all-reduce among masters, broadcast back (eq. 7)."""
    p0 = radices[0]
    P = math.prod(radices)
    masters = [m for m in range(P) if m % p0 == 0]
    M = len(masters)
    low = [[q for q in range(P) if q % p0 == v] for v in range(p0)]   # chunk v of a group's gradient
    high = [[q for q in range(P) if q // p0 == c] for c in range(M)]  # chunk c of the masters' ring
    steps: List[tuple] = []
    for s in range(p0 - 1):  # ring reduce-scatter inside each group: member v ends with chunk v
        steps.append(tuple(Transfer(g + v, g + (v + 1) % p0, q, REDUCE)
                           for g in masters for v in range(p0) for q in low[(v - s - 1) % p0]))
    if p0 > 1:  # gather the reduced chunks to the master
        steps.append(tuple(Transfer(g + v, g, q, COPY) for g in masters for v in range(1, p0) for q in low[v]))
    for s in range(M - 1):  # ring all-reduce among masters: reduce-scatter ...
        steps.append(tuple(Transfer(masters[i], masters[(i + 1) % M], q, REDUCE)
                           for i in range(M) for q in high[(i - s - 1) % M]))
    for s in range(M - 1):  # ... then all-gather
        steps.append(tuple(Transfer(masters[i], masters[(i + 1) % M], q, COPY)
                           for i in range(M) for q in high[(i - s) % M]))
    if p0 > 1:  # broadcast: scatter chunk v to member v, then ring all-gather inside each group
        steps.append(tuple(Transfer(g, g + v, q, COPY) for g in masters for v in range(1, p0) for q in low[v]))
        for s in range(p0 - 1):
            steps.append(tuple(Transfer(g + v, g + (v + 1) % p0, q, COPY)
                               for g in masters for v in range(p0) for q in low[(v - s) % p0]))
    return Plan("twolevel", P, P, (tuple(steps),), tuple(range(P)), {"radices": list(radices)})


def decomposition_of(topo: Topology, decomposition: str, gradient_bytes: float, bw, alpha: float = 0.0):
    """(digit spans, stage order) of a --decomposition value on topo, None for 'topology' ('auto': eq. 9's best
    at this size, rate and per-message latency alpha)."""
    parsed = parse_decomposition(decomposition, topo)
    return best_decomposition(topo, gradient_bytes, bw, alpha) if parsed == "auto" else parsed


def factors_of(topo: Topology, spans) -> List[int]:
    """The factor p_j of each digit span."""
    radices = topo.radices()
    return [math.prod(radices[a:b + 1]) for a, b in spans]


def blueconnect_theory(topo: Topology, gradient_bytes, bw, servers: int, decomposition: str = "topology",
                       alpha: float = 0.0) -> Theory:
    """BlueConnect eq. 9 over the chosen factors and stage order, with the paper's baselines beside it at the
    same alpha: the one-level ring (eq. 5) and, on trees, the two-level reduce-to-master (eq. 7)."""
    chosen = decomposition_of(topo, decomposition, gradient_bytes, bw, alpha)
    latency = f", alpha {alpha:g} s" if alpha else ""
    baselines = (("one-level ring (eq. 5)", one_level_time(topo, gradient_bytes, bw, alpha)),)
    if topo.kind in ("tree", "fattree", "leafspine"):
        baselines += (("two-level (eq. 7)", two_level_time(topo, gradient_bytes, bw, alpha)),)
    tf = host_tf(gradient_bytes, bw)
    if chosen is None:
        return Theory(blueconnect_time(topo, gradient_bytes, bw, alpha), "BlueConnect eq. 9" + latency, tf, baselines)
    spans, order = chosen
    factors = factors_of(topo, spans)
    return Theory(decomposition_time(topo, gradient_bytes, bw, spans, order, alpha),
                  f"BlueConnect eq. 9, factors {','.join(map(str, factors))} in stage order "
                  f"{','.join(str(factors[j]) for j in order)}{latency}", tf, baselines)


AUTO_PLAN_BYTES = 1 << 20  # the gradient size 'auto' assumes with latency when the caller does not give one


def blueconnect_plan(topo: Topology, servers: int, decomposition: str = "topology", alpha: float = 0.0,
                     bw=None, gradient_bytes: Optional[float] = None) -> Plan:
    """The plan of a --decomposition (BCube transfers pinned to their digit's level); 'auto' needs the rates
    and, with a latency alpha, the gradient's size (1 MiB when the caller does not know it: without latency,
    eq. 9 ranks decompositions the same at every size)."""
    chosen = decomposition_of(topo, decomposition, gradient_bytes or AUTO_PLAN_BYTES, bw or (1.0,) * topo.levels,
                              alpha)
    factors, order = (topo.radices(), None) if chosen is None else (factors_of(topo, chosen[0]), chosen[1])
    return blueconnect(factors, pin_levels=topo.kind == "bcube", order=order)


@dataclass(frozen=True)
class BlueConnectOptions:
    """BlueConnect's run options (flags --decomposition, --alpha)."""

    decomposition: str = option("topology", "blueconnect: " + DECOMPOSITION_HELP + " (factors join consecutive "
                                "levels, lowest first; '@' gives a stage order, e.g. 3,4@1,0)", shapes_plan=True)
    alpha: float = option(0.0, "blueconnect: per-message latency alpha in seconds (eq. 1-9) for its theory and "
                          "--decomposition auto (0: bandwidth only)", low=0.0, high=1.0, shapes_plan=True,
                          quantity=SECONDS)


def check_options(topo: Topology, servers: int, options: BlueConnectOptions) -> None:
    """--decomposition must fit the topology."""
    parse_decomposition(options.decomposition, topo)


def two_level_theory(topo: Topology, gradient_bytes, bw, servers: int) -> Theory:
    """BlueConnect eq. 7."""
    return Theory(two_level_time(topo, gradient_bytes, bw), "two-level eq. 7", host_tf(gradient_bytes, bw))


BLUECONNECT = Algorithm(
    name="blueconnect", summary="BlueConnect Algorithm 1: reduce-scatter up the levels, all-gather down",
    paper="BlueConnect (Cho et al., SysML 2019)", topologies=("bcube", "fattree", "star", "tree", "leafspine"),
    theory=blueconnect_theory, codecs=SUMMING, options=BlueConnectOptions, check_options=check_options,
    plan=blueconnect_plan)

TWOLEVEL = Algorithm(
    name="twolevel", summary="reduce to each level-0 group's master, ring among masters, broadcast back",
    paper="BlueConnect (Cho et al., SysML 2019) eq. 7 baseline", topologies=("tree", "fattree", "leafspine"),
    theory=two_level_theory, codecs=SUMMING, plan=lambda topo, servers: two_level(topo.radices()))
