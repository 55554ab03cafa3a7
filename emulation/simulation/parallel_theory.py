"""The closed form of a transformer job under tensor, pipeline and data parallelism (Narayanan et al., SC'21): its
bytes per kind of traffic, each pass's time with its tensor-parallel all-reduces, the pipeline's span with its
bubble, and the data-parallel gradient sum after it; every group's rate is the slowest link on a shortest path
between neighbouring members where the placement puts them."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from emulation.core.link_rates import rate_of
from emulation.core.topology import Topology
from workloads.parallel_layout import Layout
from workloads.transformer import Transformer

BACKWARD_RATIO = 2.0  # a backward pass costs twice its forward pass (Megatron-LM's 3x of the forward in all)


@dataclass(frozen=True)
class ParallelJob:
    """A transformer, its layout, the pipeline's schedule and the sizes of one iteration."""
    model: Transformer
    layout: Layout
    micro_batches: int
    micro_batch_size: int = 1
    schedule: str = "1f1b"
    dtype_bytes: int = 4  # fp32, as the emulated ranks send

    @property
    def activation_bytes(self) -> int:
        """One micro-batch's activation between layers: what a stage sends on and a TP all-reduce sums."""
        return self.model.activation_elements(self.micro_batch_size) * self.dtype_bytes

    @property
    def layers_per_stage(self) -> int:
        """Transformer layers on each pipeline stage."""
        return self.model.layers // self.layout.pp

    def gradient_bytes(self, stage: int) -> int:
        """The gradient one rank of a stage sums with its data-parallel group."""
        return self.model.stage_parameters(stage, self.layout.pp, self.layout.tp) * self.dtype_bytes

    def bytes_per_kind(self) -> Dict[str, int]:
        """Bytes every rank sends in one iteration, summed over ranks, per kind (ring all-reduces; a stage's
        activation sent whole by each of its tensor-parallel ranks to its peer in the next stage)."""
        t, p, d, m = self.layout.tp, self.layout.pp, self.layout.dp, self.micro_batches
        tp = self.layout.ranks * self.layers_per_stage * m * 4 * ring_share(t) * self.activation_bytes
        pp = 2 * m * (p - 1) * t * d * self.activation_bytes
        dp = sum(t * d * ring_share(d) * self.gradient_bytes(s) for s in range(p))
        return {"tp": round(tp), "pp": pp, "dp": round(dp)}


def ring_share(group: int) -> float:
    """The share of a buffer each member of a ring all-reduce sends: 2 (g - 1) / g."""
    return 2.0 * (group - 1) / group if group > 1 else 0.0


def allreduce_s(nbytes: float, group: int, rate_Bps: float, alpha_s: float = 0.0) -> float:
    """A ring all-reduce of nbytes over `group` members at rate_Bps per member."""
    if group < 2:
        return 0.0
    return ring_share(group) * nbytes / rate_Bps + 2 * (group - 1) * alpha_s


@dataclass(frozen=True)
class ParallelTheory:
    """The closed form's answer: per-stage pass times, send and gradient-sum times, span, bubbles, iteration."""
    forward_s: List[float]
    backward_s: List[float]
    send_s: float
    dp_s: List[float]
    pipeline_s: float
    iteration_s: float
    bubbles: List[float]
    tp_s_per_pass: List[float]
    bytes: Dict[str, int]

    def to_dict(self) -> dict:
        """Its fields as JSON values."""
        return dict(self.__dict__)


def parallel_theory(job: ParallelJob, compute_s: Sequence[float], rates_Bps: Dict[str, float],
                    alpha_s: float = 0.0) -> ParallelTheory:
    """The closed form: compute_s[s] is a micro-batch's forward and backward compute on stage s (one value: every
    stage), split 1:2; rates_Bps per kind the rate its groups get. Pipeline span: sum over stages of a pass pair plus
    (m - 1) times the slowest pair, plus 2 (p - 1) sends; each stage's gradient sum after its last backward."""
    p, m, t = job.layout.pp, job.micro_batches, job.layout.tp
    compute = list(compute_s) * p if len(compute_s) == 1 else list(compute_s)
    tp_pass = [job.layers_per_stage * 2 * allreduce_s(job.activation_bytes, t, rates_Bps.get("tp", 1.0), alpha_s)
               for _ in range(p)]
    forward = [c / (1 + BACKWARD_RATIO) + tp_pass[s] for s, c in enumerate(compute)]
    backward = [c * BACKWARD_RATIO / (1 + BACKWARD_RATIO) + tp_pass[s] for s, c in enumerate(compute)]
    send = job.activation_bytes / rates_Bps.get("pp", 1.0) + alpha_s if p > 1 else 0.0
    pairs = [f + b for f, b in zip(forward, backward)]
    span = sum(pairs) + (m - 1) * max(pairs) + 2 * (p - 1) * send
    dp = [allreduce_s(job.gradient_bytes(s), job.layout.dp, rates_Bps.get("dp", 1.0), alpha_s) for s in range(p)]
    finished = [span - s * (max(backward) + send) for s in range(p)]  # stage s's last backward, stage 0 last
    return ParallelTheory(forward, backward, send, dp, span, max(f + d for f, d in zip(finished, dp)),
                          [1 - m * pair / span for pair in pairs], tp_pass, job.bytes_per_kind())


def host_path_rate(topo: Topology, a: str, b: str, bw: Sequence[float], overrides=None) -> float:
    """Mbit/s of the slowest link on a shortest path from host a to host b (breadth first; ties: the first found)."""
    if a == b:
        return float("inf")
    near: Dict[str, List[tuple]] = {}
    for link in topo.links:
        near.setdefault(link.lower, []).append((link.upper, link.level))
        near.setdefault(link.upper, []).append((link.lower, link.level))
    hosts = {h.name for h in topo.hosts}
    came: Dict[str, Optional[tuple]] = {a: None}
    todo = deque([a])
    while todo and b not in came:
        node = todo.popleft()
        for other, level in near.get(node, ()):
            if other not in came and (other not in hosts or other == b):  # hosts do not forward
                came[other] = (node, level)
                todo.append(other)
    if b not in came:
        raise ValueError(f"{topo.spec}: no path from {a} to {b}")
    slowest, node = float("inf"), b
    while came[node] is not None:
        prev, level = came[node]
        slowest = min(slowest, rate_of(prev, node, level, bw, overrides))
        node = prev
    return slowest


def kind_rates_Bps(topo: Topology, layout: Layout, hosts: Sequence[str], bw: Sequence[float],
                   overrides=None) -> Dict[str, float]:
    """Per kind, the slowest rate (bytes/s) between ring neighbours of any of its groups (a pipeline's stages in a
    line), rank r on hosts[r]."""
    out = {}
    for kind in ("tp", "pp", "dp"):
        pairs = [(g[i], g[(i + 1) % len(g)]) for g in layout.groups(kind) for i in range(len(g) if kind != "pp"
                                                                                          else len(g) - 1)]
        rates = [host_path_rate(topo, hosts[a], hosts[b], bw, overrides) for a, b in pairs if a != b]
        out[kind] = min(rates) * 1e6 / 8 if rates else float("inf")
    return out
