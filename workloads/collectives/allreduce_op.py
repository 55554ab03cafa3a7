"""All-reduce: every rank ends with the sum of every rank's buffer. Its plans are the synchronization algorithms
(workloads.algorithms); this entry gives bench and gloo its result and bus bandwidth."""

from workloads.collectives.base import Collective, every

ALLREDUCE_OP = Collective(
    name="allreduce", summary="every rank ends with the sum of every rank's buffer", busbw_text="2(n-1)/n",
    busbw=lambda n: 2 * (n - 1) / n if n > 1 else 1.0, pieces=lambda n: 1,
    result=lambda n, root: ((r, 0, every(n)) for r in range(n)), ways=())
