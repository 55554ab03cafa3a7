"""Ring all-reduce: reduce-scatter then all-gather around the ranks in order."""

from typing import Optional, Sequence

from emulation.core.formulas import Theory, all_reduce_bound, host_tf
from workloads.algorithms.base import ALL_TOPOLOGIES, Algorithm
from workloads.plan import COPY, REDUCE, Plan, Transfer


def ring_steps(members: Sequence[int], pieces: Sequence[int], level: Optional[int] = None):
    """Reduce-scatter and all-gather steps of a ring over `members` acting on `pieces` (one per member)."""
    p = len(members)
    steps = []
    for s in range(p - 1):
        steps.append(tuple(Transfer(members[i], members[(i + 1) % p], pieces[(i - s) % p], REDUCE, level)
                           for i in range(p)))
    for s in range(p - 1):
        steps.append(tuple(Transfer(members[i], members[(i + 1) % p], pieces[(i + 1 - s) % p], COPY, level)
                           for i in range(p)))
    return steps


def ring(workers: int) -> Plan:
    """Ring all-reduce over all workers: 2(N-1) steps of one piece (1/N of the gradient) each."""
    return Plan("ring", workers, workers, (tuple(ring_steps(range(workers), range(workers))),),
                tuple(range(workers)))


def theory(topo, gradient_bytes, bw, servers: int) -> Theory:
    """2(N-1)/N * TF at the slowest link (BlueConnect eq. 5 with alpha = 0 on a tree)."""
    tf = host_tf(gradient_bytes, bw)
    return Theory(all_reduce_bound(len(topo.hosts)) * tf, "2(N-1)/N * TF (eq. 5: one-level ring)", tf)


RING = Algorithm(
    name="ring", summary="ring all-reduce (reduce-scatter + all-gather) over the hosts in order",
    paper="Baidu ring all-reduce; BlueConnect eq. 5", topologies=ALL_TOPOLOGIES, theory=theory,
    plan=lambda topo, servers: ring(len(topo.hosts)), codecs=("none", "terngrad"), uniform_links=True, host_subsets=True)
