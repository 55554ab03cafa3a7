"""The papers' theoretical gradient synchronization times (GST), in seconds."""

from __future__ import annotations

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
    if algo == "ps" and servers:
        workers = n_hosts - servers
        return {"gst_s": 2 * workers / servers * tf, "formula": "2W/M * TF", "tf_s": tf}
    if algo == "bml":
        k = topo.params[1]
        return {"gst_s": 2 * (n_hosts - 1) / (k * n_hosts) * tf, "formula": "2(N-1)/(kN) * TF", "tf_s": tf}
    if algo in ("ps", "ring", "hier", "gloo"):
        return {"gst_s": 2 * (n_hosts - 1) / n_hosts * tf, "formula": "2(N-1)/N * TF", "tf_s": tf}
    raise ValueError(f"no theory for algorithm '{algo}'")
