"""Sharded data parallelism as ZeRO stage 2 (FSDP's SHARD_GRAD_OP): every rank reduce-scatters the gradient, steps
only its own shard of the parameters (its optimizer state is a shard too), and all-gathers the updated parameters,
so every replica ends the iteration identical."""

from dataclasses import dataclass
from typing import List, Sequence, Tuple

from emulation.core.formulas import Theory, all_reduce_bound, host_tf
from workloads.algorithms.base import ALL_TOPOLOGIES, Algorithm
from workloads.option_fields import option
from workloads.collectives import get as get_collective
from workloads.plan import Plan, piece_sizes

COLLECTIVE_ALGORITHMS = ("ring", "direct")  # what both the reduce-scatter and the all-gather have


@dataclass(frozen=True)
class ShardedOptions:
    """The collectives' algorithm."""

    shard_collective: str = option("ring", "sharded: the reduce-scatter's and the all-gather's algorithm",
                                   choices=COLLECTIVE_ALGORITHMS, shapes_plan=True)


def plans(ranks: int, options: ShardedOptions) -> Tuple[Plan, Plan]:
    """The gradient's reduce-scatter (rank r ends with the sum of shard r) and the parameters' all-gather."""
    return (get_collective("reducescatter").plan(options.shard_collective, ranks),
            get_collective("allgather").plan(options.shard_collective, ranks))


def phases(topo, servers: int, options: ShardedOptions, sizes: Sequence[int]) -> Tuple[Tuple[Plan, List[int]], ...]:
    """One iteration's traffic as the flow model runs it: the reduce-scatter, then the all-gather, on shards that
    are each layer's r-th share (the engine's LAYOUT_SHARES layout)."""
    ranks = len(topo.hosts)
    shards = piece_sizes(sizes, ranks)
    return tuple((plan, shards) for plan in plans(ranks, options))


def theory(topo, gradient_bytes, bw, servers: int, shard_collective: str = "ring") -> Theory:
    """(N-1)/N TF to reduce-scatter the gradient plus (N-1)/N TF to all-gather the parameters."""
    tf = host_tf(gradient_bytes, bw)
    return Theory(all_reduce_bound(len(topo.hosts)) * tf, "2(N-1)/N * TF (reduce-scatter + all-gather of "
                  "parameters, each (N-1)/N * TF)", tf)


SHARDED = Algorithm(
    name="zero", summary="sharded data parallel (ZeRO/FSDP): reduce-scatter gradients, step a shard, all-gather "
    "parameters", paper="ZeRO (SC'20); PyTorch FSDP (VLDB'23)", topologies=ALL_TOPOLOGIES, theory=theory,
    strategy="workloads.strategies.sharded:ShardedDataParallel", options=ShardedOptions, phases=phases,
    uniform_links=True, host_subsets=True)
