"""Ring all-reduce: reduce-scatter then all-gather around the ranks in order."""

from typing import Optional, Sequence

import numpy as np

from emulation.core.formulas import Theory, all_reduce_bound, host_tf
from workloads.algorithms.base import ALL_TOPOLOGIES, Algorithm
from workloads.codecs import SUMMING
from workloads.plan import COPY, REDUCE, Plan, Transfer
from workloads.plan_table import TransferTable, table_plan


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
    every rank, built as a table)."""
    p = workers
    steps = np.arange(p - 1, dtype=np.int64)
    rank = np.arange(p, dtype=np.int64)
    src = np.tile(rank, 2 * (p - 1))
    shift = np.concatenate([steps, steps - 1])  # reduce-scatter sends piece i - s, all-gather piece i + 1 - s
    piece = (src - np.repeat(shift, p)) % p
    copy = np.repeat([False, True], (p - 1) * p)
    ends = tuple(int(e) for e in np.arange(1, 2 * (p - 1) + 1) * p)
    table = TransferTable(src, (src + 1) % p, piece, copy, np.full(len(src), -1, dtype=np.int64), (ends,))
    return table_plan("ring", p, p, table, range(p))


def theory(topo, gradient_bytes, bw, servers: int) -> Theory:
    """2(N-1)/N * TF at the slowest link (BlueConnect eq. 5 with alpha = 0 on a tree)."""
    tf = host_tf(gradient_bytes, bw)
    return Theory(all_reduce_bound(len(topo.hosts)) * tf, "2(N-1)/N * TF (eq. 5: one-level ring)", tf)


RING = Algorithm(
    name="ring", summary="ring all-reduce (reduce-scatter + all-gather) over the hosts in order",
    paper="Baidu ring all-reduce; BlueConnect eq. 5", topologies=ALL_TOPOLOGIES, theory=theory,
    plan=lambda topo, servers: ring(len(topo.hosts)), codecs=SUMMING, gather="ring", uniform_links=True,
    host_subsets=True)
