"""The closed form of a transformer job under tensor, pipeline and data parallelism (Narayanan et al., SC'21): its
bytes per kind of traffic, each pass's time with its tensor-parallel all-reduces, the pipeline's span with its
bubble, and the data-parallel gradient sum after it; each kind's rate is its slowest flow's fair share of the
busiest link on its route when all the kind's groups send at once where the placement puts them."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Dict, List, Sequence

from emulation.core.formulas import t_ring
from emulation.simulation.pipeline_timeline import pipeline_timeline
from emulation.simulation.routes import Router
from workloads.parallel_layout import Layout
from workloads.transformer import Transformer

KINDS_SUMMED = ("tp", "pp", "dp")  # the kinds of traffic a dense transformer's job sends
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
    return 2 * t_ring(group, nbytes, alpha_s, rate_Bps) if group > 1 else 0.0


@dataclass(frozen=True)
class ParallelTheory:
    """The closed form's answer: per-stage pass times, one tensor-parallel all-reduce, send and gradient-sum times,
    span, bubbles, iteration."""
    forward_s: List[float]
    backward_s: List[float]
    tp_allreduce_s: float
    send_s: float
    dp_s: List[float]
    pipeline_s: float
    iteration_s: float
    bubbles: List[float]


def parallel_theory(job: ParallelJob, compute_s: Sequence[float], rates_Bps: Dict[str, float],
                    alpha_s: float = 0.0) -> ParallelTheory:
    """The closed form: compute_s[s] is a micro-batch's forward and backward compute on stage s (one value: every
    stage), split 1:2; rates_Bps per kind the rate its groups get. Pipeline span: sum over stages of a pass pair plus
    (m - 1) times the slowest pair, plus 2 (p - 1) sends; each stage's gradient sum after its last backward. 1F1B
    with sends that take time: its schedule's dependencies evaluated with these times (a stage's alternating passes
    wait for the round trip through the later stages, which the formula does not count)."""
    p, m, t = job.layout.pp, job.micro_batches, job.layout.tp
    compute = list(compute_s) * p if len(compute_s) == 1 else list(compute_s)
    tp_allreduce = allreduce_s(job.activation_bytes, t, rates_Bps.get("tp", 1.0), alpha_s)
    tp_pass = job.layers_per_stage * 2 * tp_allreduce
    forward = [c / (1 + BACKWARD_RATIO) + tp_pass for c in compute]
    backward = [c * BACKWARD_RATIO / (1 + BACKWARD_RATIO) + tp_pass for c in compute]
    send = job.activation_bytes / rates_Bps.get("pp", 1.0) + alpha_s if p > 1 else 0.0
    pairs = [f + b for f, b in zip(forward, backward)]
    span = sum(pairs) + (m - 1) * max(pairs) + 2 * (p - 1) * send
    dp = [allreduce_s(job.gradient_bytes(s), job.layout.dp, rates_Bps.get("dp", 1.0), alpha_s) for s in range(p)]
    finished = [span - s * (max(backward) + send) for s in range(p)]  # stage s's last backward, stage 0 last
    if job.schedule == "1f1b" and send > 0:
        timeline = pipeline_timeline(job.schedule, m, forward, backward, [send] * (p - 1), dp)
        return ParallelTheory(forward, backward, tp_allreduce, send, dp, max(timeline.finished), timeline.iteration,
                              timeline.bubbles())
    return ParallelTheory(forward, backward, tp_allreduce, send, dp, span, max(f + d for f, d in zip(finished, dp)),
                          [1 - m * pair / span for pair in pairs])


def kind_pairs(layout: Layout, kind: str) -> List[tuple]:
    """The (sender, receiver) ranks of one kind's traffic at once: every ring's member to its successor, every
    pipeline stage to the next."""
    groups = layout.groups(kind)
    if kind == "pp":
        return [(g[i], g[i + 1]) for g in groups for i in range(len(g) - 1)]
    return [(g[i], g[(i + 1) % len(g)]) for g in groups if len(g) > 1 for i in range(len(g))]


def kind_rates_Bps(router: Router, layout: Layout, hosts: Sequence[str], rates: Dict[int, float]) -> Dict[str, float]:
    """Per kind, the rate (bytes/s) of its slowest flow when all its groups send at once (rank r on hosts[r]): each
    flow's fair share of the busiest link on its route, equal-cost links counted together (rates: bytes/s per link
    level)."""
    out = {}
    for kind in KINDS_SUMMED:
        routes = [router.between(hosts[a], hosts[b]) for a, b in kind_pairs(layout, kind)]
        load = Counter(hop for route in routes for hop in route)
        shares = [min(router.capacity(hop, rates) / load[hop] for hop in route) for route in routes if route]
        out[kind] = min(shares) if shares else float("inf")
    return out


def kind_level_bytes(router: Router, layout: Layout, hosts: Sequence[str],
                     bytes_per_kind: Dict[str, float]) -> Dict[str, Dict[int, float]]:
    """Per kind, the bytes its traffic puts on each link level in an iteration (a byte counted on every link it
    crosses; level 0: the hosts' links): its bytes spread evenly over its flows, each flow's over its route."""
    out = {}
    for kind in KINDS_SUMMED:
        pairs = kind_pairs(layout, kind)
        per_flow = bytes_per_kind.get(kind, 0) / len(pairs) if pairs else 0.0
        levels: Counter = Counter()
        for a, b in pairs:
            for hop in router.between(hosts[a], hosts[b]):
                levels[router.level_of[hop]] += per_flow
        out[kind] = {level: levels[level] for level in sorted(levels)}
    return out
