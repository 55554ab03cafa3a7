"""Ring all-reduce: reduce-scatter then all-gather around the ranks in order."""

from typing import Optional, Sequence

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
