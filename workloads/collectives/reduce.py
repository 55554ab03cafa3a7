"""Reduce: the sum of every rank's buffer, on the root."""

from workloads.collectives.base import Collective, Way, absolute, every, make_plan, rounds
from workloads.collectives.broadcast import chain_theory
from workloads.plan import REDUCE, Transfer


def direct(ranks: int, root: int = 0):
    """One step: every rank adds its buffer into the root's at once (the root's link carries N-1 copies)."""
    return make_plan("reduce-direct", ranks, 1, [[Transfer(j, root, 0, REDUCE) for j in range(ranks) if j != root]])


def tree(ranks: int, root: int = 0):
    """A binomial tree, ceil(log2 N) rounds: in round k every place that is an odd multiple of 2^k adds its partial
    sum into the place 2^k before it."""
    steps = [[Transfer(absolute(r, root, ranks), absolute(r - (1 << k), root, ranks), 0, REDUCE)
              for r in range(1 << k, ranks, 1 << (k + 1))] for k in range(rounds(ranks))]
    return make_plan("reduce-tree", ranks, 1, steps)


def chain(ranks: int, root: int = 0):
    """A pipelined chain from the farthest rank back to the root: each adds its buffer to what arrives and passes
    it on chunk by chunk (the engine's dataflow), so every link carries it once."""
    steps = [[Transfer(absolute(r, root, ranks), absolute(r - 1, root, ranks), 0, REDUCE)]
             for r in range(ranks - 1, 0, -1)]
    return make_plan("reduce-chain", ranks, 1, steps)


REDUCE_OP = Collective(
    name="reduce", summary="the root ends with the sum of every rank's buffer", busbw_text="1", busbw=lambda n: 1.0,
    pieces=lambda n: 1, result=lambda n, root: ((root, 0, every(n)),), rooted=True, into_root=True,
    ways=(Way("chain", "pipelined chain to the root", chain, chain_theory, "(1 + (N-2) chunk/size) * TF"),
          Way("tree", "binomial tree", tree, lambda n, c: rounds(n), "ceil(log2 N) * TF"),
          Way("direct", "every rank into the root in one step", direct, lambda n, c: n - 1, "(N-1) * TF")))
