"""Reduce-scatter: every rank brings every piece, and rank i ends with the sum of everyone's piece i."""

from workloads.collectives.base import Collective, Way, all_but_one, every, make_plan
from workloads.plan import REDUCE, Transfer


def ring(ranks: int, root: int = 0):
    """N-1 steps around the ranks in order: in step s, rank i adds piece i - s - 1 into rank i + 1 (piece p's sum
    ends at rank p)."""
    steps = [[Transfer(i, (i + 1) % ranks, (i - s - 1) % ranks, REDUCE) for i in range(ranks)]
             for s in range(ranks - 1)]
    return make_plan("reducescatter-ring", ranks, ranks, steps)


def direct(ranks: int, root: int = 0):
    """One step: every rank adds its piece j into rank j, for every other j."""
    step = [Transfer(i, j, j, REDUCE) for i in range(ranks) for j in range(ranks) if j != i]
    return make_plan("reducescatter-direct", ranks, ranks, [step])


def recursive_halving(ranks: int, root: int = 0):
    """log2 N steps, distance N/2 first: rank i adds the half of its block that rank i xor d keeps into it."""
    steps, d = [], ranks // 2
    while d >= 1:
        steps.append([Transfer(i, i ^ d, p, REDUCE) for i in range(ranks)
                      for p in range(i // (2 * d) * 2 * d, i // (2 * d) * 2 * d + 2 * d) if p & d != i & d])
        d //= 2
    return make_plan("reducescatter-rh", ranks, ranks, steps)


REDUCESCATTER = Collective(
    name="reducescatter", summary="rank i ends with the sum of every rank's piece i", busbw_text="(n-1)/n",
    busbw=all_but_one, pieces=lambda n: n, result=lambda n, root: ((r, r, every(n)) for r in range(n)),
    ways=(Way("ring", "N-1 steps around the ring", ring, lambda n, c: (n - 1) / n, "(N-1)/N * TF"),
          Way("direct", "every rank to every rank in one step", direct, lambda n, c: (n - 1) / n, "(N-1)/N * TF"),
          Way("rh", "recursive halving", recursive_halving, lambda n, c: (n - 1) / n, "(N-1)/N * TF",
              powers_of_two=True)))
