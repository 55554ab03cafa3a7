"""The papers' building blocks for theoretical gradient synchronization times (pure; algorithms combine them).

Each algorithm's own formula lives with its descriptor in workloads/algorithms/ and is built from these.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Dict, List, Sequence, Tuple

from emulation.spec.topology import Topology


@dataclass(frozen=True)
class Theory:
    """A theoretical GST: seconds, the formula that gave it, and TF (the full gradient over one link)."""

    gst_s: float
    formula: str
    tf_s: float

    def to_dict(self) -> Dict[str, object]:
        """JSON-ready form."""
        return asdict(self)


def full_gradient_time(gradient_bytes: float, mbps: float) -> float:
    """TF: time to send the whole gradient over one link at full speed."""
    return gradient_bytes * 8 / (mbps * 1e6)


def host_tf(gradient_bytes: float, bw: Sequence[float]) -> float:
    """TF at the slowest link level (the bound every formula below is stated against)."""
    return full_gradient_time(gradient_bytes, min(bw))


def all_reduce_bound(hosts: int) -> float:
    """2(N-1)/N: the fraction of TF each host must send (and receive) in any bandwidth-optimal all-reduce."""
    return 2 * (hosts - 1) / hosts


def t_ring(p: int, n_bytes: float, alpha: float, w_bytes: float) -> float:
    """BlueConnect eq. 1: ring reduce-scatter or all-gather of n bytes over p learners."""
    return (p - 1) * alpha + (p - 1) / p * n_bytes / w_bytes


def t_recursive(p: int, n_bytes: float, alpha: float, w_bytes: float) -> float:
    """Eq. 2: recursive halving/doubling (p a power of two)."""
    return math.log2(p) * alpha + (p - 1) / p * n_bytes / w_bytes


def is_power_of_two(p: int) -> bool:
    """True for 1, 2, 4, 8, ..."""
    return p > 0 and p & (p - 1) == 0


def t_best(p: int, n_bytes: float, alpha: float, w_bytes: float) -> float:
    """Eq. 3: recursive for powers of two, ring otherwise."""
    if is_power_of_two(p):
        return t_recursive(p, n_bytes, alpha, w_bytes)
    return t_ring(p, n_bytes, alpha, w_bytes)


def level_rates(topo: Topology, bw: Sequence[float]) -> Tuple[List[int], List[float]]:
    """The topology's hierarchy radices and the link rate (bytes/s) of the level each digit crosses."""
    radices = topo.radices()
    rates = [b * 1e6 / 8 for b in (list(bw) + [min(bw)] * len(radices))[:len(radices)]]
    return radices, rates


def blueconnect_time(topo: Topology, gradient_bytes: float, bw: Sequence[float], alpha: float = 0.0,
                     radices: Sequence[int] = None) -> float:
    """Eq. 9: sum over levels of 2 T_r/c(p_i, N / prod_{j<i} p_j, alpha, w), where on a tree the stage-i
    streams share each level-j link among the prod_{k<j} p_k learners below it (w = min_j w_j / prod p_k);
    on BCube every host has its own level-i link and on a Fat-Tree the uplinks are not oversubscribed."""
    default, rates = level_rates(topo, bw)
    radices = list(radices or default)
    total, below = 0.0, 1
    for i, p in enumerate(radices):
        if topo.kind == "tree":
            w, share = float("inf"), 1
            for j in range(i + 1):
                w = min(w, rates[j] / share)
                share *= radices[j]
        elif topo.kind == "bcube":
            w = rates[i]
        else:
            w = min(rates[:i + 1])
        total += 2 * t_best(p, gradient_bytes / below, alpha, w)
        below *= p
    return total


def two_level_time(topo: Topology, gradient_bytes: float, bw: Sequence[float], alpha: float = 0.0) -> float:
    """Eq. 7: reduce to master and broadcast inside level-0 groups, ring/recursive among the masters."""
    radices, rates = level_rates(topo, bw)
    p0, masters = radices[0], math.prod(radices[1:])
    inner = 2 * t_recursive(p0, gradient_bytes, alpha, rates[0]) + 2 * t_ring(p0, gradient_bytes, alpha, rates[0])
    return inner + 2 * t_best(masters, gradient_bytes, alpha, min(rates)) if masters > 1 else inner


def one_level_time(topo: Topology, gradient_bytes: float, bw: Sequence[float], alpha: float = 0.0) -> float:
    """Eq. 5/6: ring over all learners, gated by the slowest link."""
    return 2 * t_ring(len(topo.hosts), gradient_bytes, alpha, min(bw) * 1e6 / 8)
