"""Expert parallelism for the mixture-of-experts model moe:ExD (GShard, Switch Transformer): each of N ranks holds
E/N of the experts and its own data; the MoE layer's dispatched tokens go to their experts' ranks by an all-to-all
and come back by another, in the forward pass and again (their gradients) in the backward pass; the dense layers
(embedding, gate, head) are replicated and their gradient ring-all-reduced after backward."""

from dataclasses import dataclass
from typing import List, Sequence, Tuple

from emulation.core.formulas import Theory, all_reduce_bound, host_tf
from workloads.algorithms.base import ALL_TOPOLOGIES, Algorithm
from workloads.option_fields import option
from workloads.algorithms.ring import ring
from workloads.collectives import get as get_collective
from workloads.models import ModelError, is_moe, moe_shape, moe_shape_of_sizes, moe_tensors
from workloads.plan import Plan, PlanError, piece_sizes

EXCHANGES = ("dispatch", "combine", "combine_grad", "dispatch_grad")  # the all-to-alls of one iteration, in order
EXCHANGE_ALGORITHMS = ("direct", "pairwise")


@dataclass(frozen=True)
class ExpertOptions:
    """The MoE layer's capacity and its all-to-all's algorithm."""

    moe_capacity: int = option(64, "moe: slots per expert for one rank's tokens per step (GShard's capacity: "
                               "capacity factor x tokens per rank / experts; tokens past it are dropped, empty slots "
                               "sent as padding)", low=1, high=65536, shapes_plan=True)
    moe_collective: str = option("direct", "moe: the token all-to-all's algorithm", choices=EXCHANGE_ALGORITHMS,
                                 shapes_plan=True)


def check_model(model: str, ranks: int, options: ExpertOptions) -> None:
    """ModelError unless the model is moe:ExD with its experts spread evenly over the ranks."""
    if not is_moe(model):
        raise ModelError(f"--algo moe spreads a mixture-of-experts model's experts over the ranks: give --model "
                         f"moe:EXPERTSxWIDTH (e.g. moe:{ranks}x256), not {model}")
    experts, _ = moe_shape(model)
    if experts % ranks:
        raise ModelError(f"--model {model}: {experts} experts do not spread evenly over {ranks} ranks: give a "
                         f"multiple of {ranks} experts (e.g. moe:{ranks}x...)")


def keep_own_experts(model, rank: int, ranks: int, options: ExpertOptions) -> None:
    """A rank keeps only its own experts (E/N of them, rank r the r-th run), before its optimizer sees them."""
    local = model.moe.experts_total // ranks
    model.moe.keep_only(rank * local, local)
    model.moe.slots = options.moe_capacity


def block_elements(sizes: Sequence[int], ranks: int, capacity: int) -> int:
    """Elements one rank sends another in one all-to-all: its slots for that rank's experts."""
    experts, width = moe_shape_of_sizes(sizes)
    return experts // ranks * capacity * width


def dense_sizes(sizes: Sequence[int]) -> List[int]:
    """The replicated (all-reduced) tensors' sizes."""
    experts, width = moe_shape_of_sizes(sizes)
    return [n for role, n in moe_tensors(experts, width) if role == "dense"]


def exchange_plan(ranks: int, options: ExpertOptions) -> Plan:
    """The all-to-all of the dispatched tokens (block i*N + j: what rank i sends rank j)."""
    return get_collective("alltoall").plan(options.moe_collective, ranks)


def phases(topo, servers: int, options: ExpertOptions, sizes: Sequence[int]) -> Tuple[Tuple[Plan, List[int]], ...]:
    """One iteration's traffic as the flow model runs it: the four all-to-alls, then the dense layers' ring."""
    ranks = len(topo.hosts)
    if ranks < 2:
        raise PlanError("--algo moe needs at least 2 ranks")
    blocks = [block_elements(sizes, ranks, options.moe_capacity)] * (ranks * ranks)
    exchange = exchange_plan(ranks, options)
    return tuple((exchange, blocks) for _ in EXCHANGES) + ((ring(ranks), piece_sizes(dense_sizes(sizes), ranks)),)


def theory(topo, gradient_bytes, bw, servers: int, moe_capacity: int = 64, moe_collective: str = "direct",
           layer_sizes=None) -> Theory:
    """4 (N-1)/N A + 2(N-1)/N G: four all-to-alls of A (a rank's slots: experts x capacity x width x 4 B over one
    link) and the ring all-reduce of the dense layers' gradient G."""
    if layer_sizes is None:
        raise PlanError("--algo moe's theory needs the model's tensors (--model moe:ExD)")
    ranks = len(topo.hosts)
    exchange = 4 * ranks * block_elements(layer_sizes, ranks, moe_capacity)
    dense = host_tf(4 * sum(dense_sizes(layer_sizes)), bw)
    a2a = (ranks - 1) / ranks * host_tf(exchange, bw)
    return Theory(len(EXCHANGES) * a2a + all_reduce_bound(ranks) * dense,
                  "4 (N-1)/N A + 2(N-1)/N G (the MoE layer's four all-to-alls of A = experts x capacity x width x 4 B, "
                  "tokens out and back in forward and backward; the ring all-reduce of the dense layers' gradient G)",
                  host_tf(gradient_bytes, bw))


EXPERT = Algorithm(
    name="moe", summary="expert parallelism for moe:ExD: tokens all-to-all to their experts' ranks and back, dense "
    "layers ring-all-reduced", paper="GShard (ICLR'21); Switch Transformer (JMLR'22)", topologies=ALL_TOPOLOGIES,
    theory=theory, strategy="workloads.strategies.expert:ExpertParallel", options=ExpertOptions, phases=phases,
    sized_plan=True, uniform_links=True, host_subsets=True, check_model=check_model, prepare_model=keep_own_experts)
