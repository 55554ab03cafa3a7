"""All-to-all: rank i's block j goes to rank j. The plan's buffer holds all N x N blocks (block i*N + j is the
one i sends j), so it is N times the op's size; each rank's input is its own row, its output its own column."""

from workloads.collectives.base import Collective, Way, all_but_one, make_plan
from workloads.plan import COPY, Transfer


def direct(ranks: int, root: int = 0):
    """One step: every rank sends every other rank its block at once."""
    step = [Transfer(i, j, i * ranks + j, COPY) for i in range(ranks) for j in range(ranks) if j != i]
    return make_plan("alltoall-direct", ranks, ranks * ranks, [step])


def pairwise(ranks: int, root: int = 0):
    """N-1 steps: in step s, rank i sends its block for rank i + s and receives rank i - s's, and begins step s + 1
    only when both are done (MPI's pairwise exchange): one peer at a time each way, so no receiver is an incast's.
    Without the barrier a rank's sends would run ahead through its sockets' buffers into direct's incast."""
    steps = [[Transfer(i, (i + s) % ranks, i * ranks + (i + s) % ranks, COPY) for i in range(ranks)]
             for s in range(1, ranks)]
    return make_plan("alltoall-pairwise", ranks, ranks * ranks, steps, barriers=True)


ALLTOALL = Collective(
    name="alltoall", summary="rank i's block j ends on rank j", busbw_text="(n-1)/n", busbw=all_but_one,
    pieces=lambda n: n * n, buffer_factor=lambda n: n,
    result=lambda n, root: ((j, i * n + j, (i,)) for i in range(n) for j in range(n)),
    ways=(Way("pairwise", "N-1 steps, one peer at a time", pairwise, lambda n, c: (n - 1) / n, "(N-1)/N * TF"),
          Way("direct", "every rank to every rank in one step", direct, lambda n, c: (n - 1) / n, "(N-1)/N * TF")))
