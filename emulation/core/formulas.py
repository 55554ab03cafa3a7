"""The papers' building blocks for theoretical gradient synchronization times (pure; algorithms combine them).

Each algorithm's own formula lives with its descriptor in workloads/algorithms/ and is built from these.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from emulation.core.topology import Topology


@dataclass(frozen=True)
class Theory:
    """A theoretical GST: seconds, the formula that gave it, and TF (the full gradient over one link)."""

    gst_s: float
    formula: str
    tf_s: float
    baselines: Tuple[Tuple[str, float], ...] = ()  # (what, seconds) the paper sets beside it, same alpha
    filtered: bool = False  # it sends every value while the run's filter drops a share that depends on the data

    def to_dict(self) -> Dict[str, object]:
        """JSON-ready form."""
        out = asdict(self)
        out["baselines"] = dict(self.baselines)
        return out


def full_gradient_time(gradient_bytes: float, mbps: float) -> float:
    """TF: time to send the whole gradient over one link at full speed."""
    return gradient_bytes * 8 / (mbps * 1e6)


def host_tf(gradient_bytes: float, bw: Sequence[float]) -> float:
    """TF at the slowest link level (the bound every formula below is stated against)."""
    return full_gradient_time(gradient_bytes, min(bw))


def all_reduce_bound(hosts: int) -> float:
    """2(N-1)/N: the fraction of TF each host must send (and receive) in any bandwidth-optimal all-reduce."""
    return 2 * (hosts - 1) / hosts


def cuts(topo: Topology, bw: Sequence[float]) -> List[Tuple[frozenset, float]]:
    """Every way up out of a group of hosts in a switch-centric topology: (the hosts below a node, the bytes/s of
    the links leaving that group upwards), one entry per distinct group; a host's own link is the smallest. Switches
    in any graph (torus, Jellyfish) have no up: each host's own link is its only cut (a bound, not the figure)."""
    if topo.graph:
        return [(frozenset([h.index]), bw[0] * 1e6 / 8) for h in topo.hosts]
    children: Dict[str, List[str]] = {}
    for link in topo.links:
        children.setdefault(link.upper, []).append(link.lower)
    below: Dict[str, frozenset] = {}

    members = {h.name for h in topo.hosts}  # a job on some hosts: the others (bystanders) are nobody's group

    def hosts_below(node: str) -> frozenset:
        if node not in below:
            if topo.is_host(node):
                below[node] = frozenset([topo.node(node).index]) if node in members else frozenset()
            else:
                below[node] = frozenset().union(*(hosts_below(c) for c in children.get(node, ())))
        return below[node]
    everyone = frozenset(range(len(topo.hosts)))
    groups = {hosts_below(n) for n in [h.name for h in topo.hosts] + [s.name for s in topo.switches]} - \
        {everyone, frozenset()}
    out = []
    for group in sorted(groups, key=lambda g: (len(g), sorted(g))):
        rate = sum(bw[min(l.level, len(bw) - 1)] * 1e6 / 8 for l in topo.links
                   if hosts_below(l.lower) and hosts_below(l.lower) <= group and not hosts_below(l.upper) <= group)
        out.append((group, rate))
    return out


def dedicated_servers_time(topo: Topology, gradient_bytes: float, bw: Sequence[float], servers: int) -> float:
    """One push (or one pull) between workers M..N-1 and servers 0..M-1, each worker exchanging G/M with every
    server: as long as its busiest cut needs, for any M and W (a worker's own link carries G even when M > W).
    BCube (server-centric, its hosts relay) is taken at its slowest level: max(W/M, 1) * TF."""
    hosts = len(topo.hosts)
    workers = hosts - servers
    if topo.kind == "bcube":
        return max(workers / servers, 1.0) * host_tf(gradient_bytes, bw)
    share = gradient_bytes / servers
    slowest = 0.0
    for group, rate in cuts(topo, bw):
        s_in = sum(1 for h in group if h < servers)
        w_in = len(group) - s_in
        up, down = w_in * (servers - s_in) * share, (workers - w_in) * s_in * share
        slowest = max(slowest, max(up, down) / rate)
    return slowest


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


LAYERED = ("tree", "leafspine")  # oversubscribable: each subtree's links upwards are shared by the hosts below


def uplink_rates(topo: Topology, rates: Sequence[float]) -> List[float]:
    """Per digit, the bytes/s up out of one subtree: a tree switch's one uplink, a leaf's spine links together."""
    if topo.kind == "leafspine" and len(rates) > 1:
        return [rates[0], rates[1] * topo.params[2]] + list(rates[2:])
    return list(rates)


def level_rates(topo: Topology, bw: Sequence[float]) -> Tuple[List[int], List[float]]:
    """The topology's hierarchy radices and the link rate (bytes/s) of the level each digit crosses."""
    radices = topo.radices()
    rates = [b * 1e6 / 8 for b in (list(bw) + [min(bw)] * len(radices))[:len(radices)]]
    return radices, rates


def blueconnect_time(topo: Topology, gradient_bytes: float, bw: Sequence[float], alpha: float = 0.0,
                     radices: Sequence[int] = None) -> float:
    """Eq. 9: sum over levels of 2 T_r/c(p_i, N / prod_{j<i} p_j, alpha, w), where on a tree the stage-i
    streams share each level-j link among the prod_{k<j} p_k learners below it (w = min_j w_j / prod p_k; on a
    leaf-spine a leaf's spine links together, each stream held to one link's rate);
    on BCube every host has its own level-i link and on a Fat-Tree the uplinks are not oversubscribed."""
    default, rates = level_rates(topo, bw)
    radices = list(radices or default)
    total, below = 0.0, 1
    up = uplink_rates(topo, rates)
    for i, p in enumerate(radices):
        if topo.kind in LAYERED:
            w, share = float("inf"), 1
            for j in range(i + 1):
                w = min(w, up[j] / share, rates[j])
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


DECOMPOSITION_HELP = "topology (one factor per level), auto (eq. 9's best factorization and stage order) or p0,p1,..."


def coarsenings(radices: Sequence[int]) -> List[List[Tuple[int, int]]]:
    """Every way to group consecutive hierarchy digits: lists of (first digit, last digit) spans."""
    n = len(radices)
    if n == 0:
        return [[]]
    out = []
    for end in range(n):
        for rest in coarsenings(radices[end + 1:]):
            out.append([(0, end)] + [(a + end + 1, b + end + 1) for a, b in rest])
    return out


def stage_rate(topo: Topology, rates: Sequence[float], span: Tuple[int, int]) -> float:
    """w of eq. 9 for a stage whose groups differ in hierarchy digits span=(a, b), every group at once: on a
    tree, the uplink of a level-l subtree carries one ring flow per host below it while l < a, one per group
    (prod of the digits below a) while a <= l < b; BCube has its own link per digit; a Fat-Tree is not
    oversubscribed."""
    a, b = span
    radices = topo.radices()
    if topo.kind == "bcube":
        return min(rates[a:b + 1])
    if topo.kind not in LAYERED:
        return min(rates[:b + 1])
    below = math.prod(radices[:a])
    up = uplink_rates(topo, rates)
    w, hosts = rates[0], 1
    for l in range(b):
        hosts *= radices[l]
        flows = hosts if l < a else below
        w = min(w, up[l + 1] / flows, rates[l + 1])
    return w


def decomposition_time(topo: Topology, gradient_bytes: float, bw: Sequence[float], spans: Sequence[Tuple[int, int]],
                       order: Sequence[int], alpha: float = 0.0) -> float:
    """Eq. 9 for factors over the given digit spans, reduce-scatter stages in `order` (all-gather reversed)."""
    radices, rates = level_rates(topo, bw)
    total, below = 0.0, 1
    for j in order:
        a, b = spans[j]
        p = math.prod(radices[a:b + 1])
        total += 2 * t_best(p, gradient_bytes / below, alpha, stage_rate(topo, rates, spans[j]))
        below *= p
    return total


def decompositions(topo: Topology) -> List[Tuple[Tuple[Tuple[int, int], ...], Tuple[int, ...]]]:
    """Every (digit spans, stage order) BlueConnect can run on topo: groupings of consecutive levels (BCube:
    one factor per level, each pinned to its own links) in every order."""
    radices = topo.radices()
    groupings = [[(i, i) for i in range(len(radices))]] if topo.kind == "bcube" else coarsenings(radices)
    return [(tuple(g), order) for g in groupings for order in itertools.permutations(range(len(g)))]


def best_decomposition(topo: Topology, gradient_bytes: float, bw: Sequence[float], alpha: float = 0.0):
    """The (spans, order) of least eq. 9 time (ties: fewer stages, then hierarchy order)."""
    return min(decompositions(topo), key=lambda d: (decomposition_time(topo, gradient_bytes, bw, d[0], d[1], alpha),
                                                    len(d[0]), d[1]))


def parse_decomposition(text: str, topo: Topology) -> Optional[Tuple[Tuple[Tuple[int, int], ...], Tuple[int, ...]]]:
    """'topology' -> None (one factor per level in order), 'auto' -> 'auto', 'p0,p1,...' -> the spans of those
    factors (each a product of consecutive hierarchy radices, lowest level first) in hierarchy order; a stage
    order follows after '@' (e.g. '3,4@1,0': the factor 4 first). ValueError naming the valid factors."""
    if text in ("topology", "auto"):
        return None if text == "topology" else "auto"
    radices = topo.radices()
    valid = sorted({",".join(str(math.prod(radices[a:b + 1])) for a, b in g) for g, _ in decompositions(topo)})
    factors_text, _, order_text = text.partition("@")
    try:
        factors = [int(x) for x in factors_text.split(",")]
        order = tuple(int(x) for x in order_text.split(",")) if order_text else tuple(range(len(factors)))
    except ValueError:
        raise ValueError(f"--decomposition '{text}' is invalid: give {DECOMPOSITION_HELP}") from None
    for spans, _ in decompositions(topo):
        if [math.prod(radices[a:b + 1]) for a, b in spans] == factors:
            if sorted(order) != list(range(len(factors))):
                raise ValueError(f"--decomposition '{text}': the order after @ must be a permutation of "
                                 f"0..{len(factors) - 1}")
            return spans, order
    raise ValueError(f"--decomposition '{text}' does not fit {topo.spec}: each factor must join consecutive levels "
                     f"(valid: {'; '.join(valid)}), or give topology or auto")
