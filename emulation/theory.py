"""The papers' theoretical gradient synchronization times (GST), in seconds."""

from __future__ import annotations

import math
from typing import Dict, Sequence

from emulation.topology import Topology


def full_gradient_time(gradient_bytes: int, mbps: float) -> float:
    """TF: time to send the whole gradient over one link at full speed."""
    return gradient_bytes * 8 / (mbps * 1e6)


def gst_theory(algo: str, topo: Topology, gradient_bytes: int, bw: Sequence[float], servers: int = 0) -> Dict:
    """Theoretical GST of `algo` on `topo` with host links at bw[0] Mbit/s, and the formula used.

    BML paper: PS (P2P) and ring = 2(N-1)/N * TF; BML on BCube(n,k) = 2(N-1)/(kN) * TF. The
    hierarchical sync on a single-NIC topology moves the same bytes per host as PS, so its bound
    is also 2(N-1)/N * TF. Dedicated PS (M servers, W workers): each server link carries W/M of
    the gradient each way: 2W/M * TF (limited by the server's downlink, see the shaping notes).
    """
    n_hosts = len(topo.hosts)
    tf = full_gradient_time(gradient_bytes, min(bw))
    if algo == "pflow":  # push to and broadcast from M servers, before DVF shrinks the bytes
        workers = n_hosts - max(1, servers)
        return {"gst_s": 2 * workers / max(1, servers) * tf, "formula": "2W/M * TF (no filter, no tree)",
                "tf_s": tf}
    if algo == "ibatch":  # gradient push to M servers (the pull is modelled by workloads.ibatch.timeline)
        workers = n_hosts - max(1, servers)
        return {"gst_s": workers / max(1, servers) * tf, "formula": "W/M * TF (push)", "tf_s": tf}
    if algo == "ps" and servers:
        workers = n_hosts - servers
        return {"gst_s": 2 * workers / servers * tf, "formula": "2W/M * TF", "tf_s": tf}
    if algo == "bml":
        k = topo.params[1]
        return {"gst_s": 2 * (n_hosts - 1) / (k * n_hosts) * tf, "formula": "2(N-1)/(kN) * TF", "tf_s": tf}
    if algo == "blueconnect":
        return {"gst_s": blueconnect_time(topo, gradient_bytes, bw), "formula": "BlueConnect eq. 9", "tf_s": tf}
    if algo == "twolevel":
        return {"gst_s": two_level_time(topo, gradient_bytes, bw), "formula": "two-level eq. 7", "tf_s": tf}
    if algo == "ring" and topo.kind == "tree":
        return {"gst_s": one_level_time(topo, gradient_bytes, bw), "formula": "one-level ring eq. 5",
                "tf_s": tf}
    if algo in ("ps", "ring", "hier", "gloo"):
        return {"gst_s": 2 * (n_hosts - 1) / n_hosts * tf, "formula": "2(N-1)/N * TF", "tf_s": tf}
    raise ValueError(f"no theory for algorithm '{algo}'")


def t_ring(p: int, n_bytes: float, alpha: float, w_bytes: float) -> float:
    """BlueConnect eq. 1: ring reduce-scatter or all-gather of n bytes over p learners."""
    return (p - 1) * alpha + (p - 1) / p * n_bytes / w_bytes


def t_recursive(p: int, n_bytes: float, alpha: float, w_bytes: float) -> float:
    """Eq. 2: recursive halving/doubling (p a power of two)."""
    return math.log2(p) * alpha + (p - 1) / p * n_bytes / w_bytes


def t_best(p: int, n_bytes: float, alpha: float, w_bytes: float) -> float:
    """Eq. 3: recursive for powers of two, ring otherwise."""
    if p & (p - 1) == 0:
        return t_recursive(p, n_bytes, alpha, w_bytes)
    return t_ring(p, n_bytes, alpha, w_bytes)


def _radices_and_rates(topo: Topology, bw: Sequence[float]):
    from workloads.algorithms import topology_radices
    radices = topology_radices(topo)
    rates = [b * 1e6 / 8 for b in (list(bw) + [min(bw)] * len(radices))[:len(radices)]]
    return radices, rates


def blueconnect_time(topo: Topology, gradient_bytes: int, bw: Sequence[float], alpha: float = 0.0) -> float:
    """Eq. 9: sum over levels of 2 T_r/c(p_i, N / prod_{j<i} p_j, alpha, w), where on a tree the stage-i
    streams share each level-j link among the prod_{k<j} p_k learners below it (w = min_j w_j / prod p_k);
    on BCube every host has its own level-i link and on a Fat-Tree the uplinks are not oversubscribed."""
    radices, rates = _radices_and_rates(topo, bw)
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


def two_level_time(topo: Topology, gradient_bytes: int, bw: Sequence[float], alpha: float = 0.0) -> float:
    """Eq. 7: reduce to master and broadcast inside level-0 groups, ring/recursive among the masters."""
    radices, rates = _radices_and_rates(topo, bw)
    p0, masters = radices[0], math.prod(radices[1:])
    inner = 2 * t_recursive(p0, gradient_bytes, alpha, rates[0]) + 2 * t_ring(p0, gradient_bytes, alpha, rates[0])
    return inner + 2 * t_best(masters, gradient_bytes, alpha, min(rates)) if masters > 1 else inner


def one_level_time(topo: Topology, gradient_bytes: int, bw: Sequence[float], alpha: float = 0.0) -> float:
    """Eq. 5/6: ring over all learners, gated by the slowest link."""
    return 2 * t_ring(len(topo.hosts), gradient_bytes, alpha, min(bw) * 1e6 / 8)
