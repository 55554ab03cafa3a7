"""Scatter: the root's piece i, on rank i."""

from workloads.collectives.base import Collective, Way, absolute, all_but_one, make_plan, rounds
from workloads.plan import COPY, Transfer


def direct(ranks: int, root: int = 0):
    """One step: the root sends every rank its piece at once."""
    return make_plan("scatter-direct", ranks, ranks, [[Transfer(root, j, j, COPY) for j in range(ranks) if j != root]])


def tree(ranks: int, root: int = 0):
    """A binomial tree, ceil(log2 N) rounds, the largest distance d first: every place r that is a multiple of 2d
    hands the pieces of places r + d .. r + 2d - 1 to place r + d."""
    top = rounds(ranks)
    steps = []
    for k in range(top - 1, -1, -1):
        d = 1 << k
        steps.append([Transfer(absolute(r, root, ranks), absolute(r + d, root, ranks), absolute(q, root, ranks), COPY)
                      for r in range(0, ranks, 2 * d) if r + d < ranks for q in range(r + d, min(r + 2 * d, ranks))])
    return make_plan("scatter-tree", ranks, ranks, steps)


SCATTER = Collective(
    name="scatter", summary="rank i ends with the root's piece i", busbw_text="(n-1)/n", busbw=all_but_one,
    pieces=lambda n: n, result=lambda n, root: ((r, r, (root,)) for r in range(n)), rooted=True,
    ways=(Way("direct", "the root to every rank in one step", direct, lambda n, c: (n - 1) / n, "(N-1)/N * TF"),
          Way("tree", "binomial tree", tree, lambda n, c: (n - 1) / n, "(N-1)/N * TF")))
