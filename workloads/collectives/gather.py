"""Gather (incast, a parameter server's collection): rank i's piece i, on the root."""

from workloads.collectives.base import Collective, Way, absolute, all_but_one, make_plan, rounds
from workloads.plan import COPY, Transfer


def direct(ranks: int, root: int = 0):
    """One step: every rank sends its piece to the root at once (incast)."""
    return make_plan("gather-direct", ranks, ranks, [[Transfer(j, root, j, COPY) for j in range(ranks) if j != root]])


def tree(ranks: int, root: int = 0):
    """A binomial tree, ceil(log2 N) rounds: in round k every place that is an odd multiple of 2^k sends the pieces
    of its subtree (places r .. r + 2^k - 1) to the place 2^k before it."""
    steps = [[Transfer(absolute(r, root, ranks), absolute(r - (1 << k), root, ranks), absolute(q, root, ranks), COPY)
              for r in range(1 << k, ranks, 1 << (k + 1)) for q in range(r, min(r + (1 << k), ranks))]
             for k in range(rounds(ranks))]
    return make_plan("gather-tree", ranks, ranks, steps)


GATHER = Collective(
    name="gather", summary="the root ends with every rank's piece (incast)", busbw_text="(n-1)/n", busbw=all_but_one,
    pieces=lambda n: n, result=lambda n, root: ((root, p, (p,)) for p in range(n)), rooted=True, into_root=True,
    ways=(Way("direct", "every rank to the root in one step (incast)", direct, lambda n, c: (n - 1) / n,
              "(N-1)/N * TF"),
          Way("tree", "binomial tree", tree, lambda n, c: (n - 1) / n, "(N-1)/N * TF")))
