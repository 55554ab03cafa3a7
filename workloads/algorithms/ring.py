"""Ring all-reduce: reduce-scatter then all-gather around the ranks in order."""

from typing import Optional, Sequence

import numpy as np

from emulation.core.formulas import Theory, all_reduce_bound, host_tf
from workloads.algorithms.base import ALL_TOPOLOGIES, Algorithm
from workloads.codecs import SUMMING
from workloads.plan import COPY, REDUCE, Plan, Transfer
from workloads.plan_table import GeneratedTable, table_plan


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
    """Ring all-reduce over all workers: 2(N-1) steps of one piece (1/N of the gradient) each (ring_steps over
    every rank), each step's rows made when read (a ring over 10,000 ranks is 2x10^8 transfers)."""
    p = workers
    rank = np.arange(p, dtype=np.int64)
    dst = (rank + 1) % p
    no_level = np.full(p, -1, dtype=np.int64)
    twice = np.concatenate([rank, rank])  # (rank + c) % p is the view twice[c % p:][:p]: no array made per step
    copy = (np.zeros(p, dtype=bool), np.ones(p, dtype=bool))

    def step(k: int):
        """Global step k: reduce-scatter sends piece i - s, all-gather piece i + 1 - s."""
        gather = k >= p - 1
        s = k - (p - 1) if gather else k
        at = (int(gather) - s) % p
        return rank, dst, twice[at:at + p], copy[gather], no_level

    ends = tuple(int(e) for e in np.arange(1, 2 * (p - 1) + 1) * p)
    return table_plan("ring", p, p, GeneratedTable((ends,), step, tokens=True), range(p))


def theory(topo, gradient_bytes, bw, servers: int) -> Theory:
    """2(N-1)/N * TF at the slowest link (BlueConnect eq. 5 with alpha = 0 on a tree)."""
    tf = host_tf(gradient_bytes, bw)
    return Theory(all_reduce_bound(len(topo.hosts)) * tf, "2(N-1)/N * TF (eq. 5: one-level ring)", tf)


RING = Algorithm(
    name="ring", summary="ring all-reduce (reduce-scatter + all-gather) over the hosts in order",
    paper="Baidu ring all-reduce; BlueConnect eq. 5", topologies=ALL_TOPOLOGIES, theory=theory,
    plan=lambda topo, servers: ring(len(topo.hosts)), codecs=SUMMING, gather="ring", uniform_links=True,
    host_subsets=True, transfers=lambda topo, servers: 2 * len(topo.hosts) * (len(topo.hosts) - 1),
    generated_plan=True)
