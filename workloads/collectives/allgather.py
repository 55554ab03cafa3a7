"""All-gather: rank i brings piece i, and every rank ends with every piece."""

from workloads.collectives.base import Collective, Way, all_but_one, make_plan
from workloads.plan import COPY, Transfer


def ring(ranks: int, root: int = 0):
    """N-1 steps around the ranks in order: in step s, rank i passes piece i - s on to rank i + 1."""
    steps = [[Transfer(i, (i + 1) % ranks, (i - s) % ranks, COPY) for i in range(ranks)] for s in range(ranks - 1)]
    return make_plan("allgather-ring", ranks, ranks, steps)


def direct(ranks: int, root: int = 0):
    """One step: every rank sends its piece to every other rank at once."""
    step = [Transfer(i, j, i, COPY) for i in range(ranks) for j in range(ranks) if j != i]
    return make_plan("allgather-direct", ranks, ranks, [step])


def recursive_doubling(ranks: int, root: int = 0):
    """log2 N steps: in step k, rank i swaps the 2^k pieces it holds with rank i xor 2^k."""
    steps, d = [], 1
    while d < ranks:
        steps.append([Transfer(i, i ^ d, p, COPY) for i in range(ranks) for p in range(i // d * d, i // d * d + d)])
        d *= 2
    return make_plan("allgather-rd", ranks, ranks, steps)


ALLGATHER = Collective(
    name="allgather", summary="every rank ends with every rank's piece", busbw_text="(n-1)/n", busbw=all_but_one,
    pieces=lambda n: n, result=lambda n, root: ((r, p, (p,)) for r in range(n) for p in range(n)),
    ways=(Way("ring", "N-1 steps around the ring", ring, lambda n, c: (n - 1) / n, "(N-1)/N * TF"),
          Way("direct", "every rank to every rank in one step", direct, lambda n, c: (n - 1) / n, "(N-1)/N * TF"),
          Way("rd", "recursive doubling", recursive_doubling, lambda n, c: (n - 1) / n, "(N-1)/N * TF",
              powers_of_two=True)))
