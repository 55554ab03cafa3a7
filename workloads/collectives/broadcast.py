"""Broadcast: the root's buffer, on every rank."""

from workloads.collectives.base import Collective, Way, absolute, make_plan, rounds
from workloads.plan import COPY, Transfer


def direct(ranks: int, root: int = 0):
    """One step: the root sends its buffer to every other rank at once (its link carries N-1 copies)."""
    return make_plan("broadcast-direct", ranks, 1, [[Transfer(root, j, 0, COPY) for j in range(ranks) if j != root]])


def tree(ranks: int, root: int = 0):
    """A binomial tree, ceil(log2 N) rounds: in round k every rank that has the buffer (places below 2^k from the
    root) sends it 2^k places on."""
    steps = [[Transfer(absolute(r, root, ranks), absolute(r + (1 << k), root, ranks), 0, COPY)
              for r in range(min(1 << k, ranks)) if r + (1 << k) < ranks] for k in range(rounds(ranks))]
    return make_plan("broadcast-tree", ranks, 1, steps)


def chain(ranks: int, root: int = 0):
    """A pipelined chain from the root through every rank in order: each passes the buffer on chunk by chunk as
    it arrives (the engine's dataflow), so every link carries it once."""
    steps = [[Transfer(absolute(r, root, ranks), absolute(r + 1, root, ranks), 0, COPY)] for r in range(ranks - 1)]
    return make_plan("broadcast-chain", ranks, 1, steps)


def chain_theory(ranks: int, chunks: float) -> float:
    """TF, plus the pipeline filling: N-2 chunk times before the last rank's first chunk."""
    return 1 + (ranks - 2) / max(chunks, 1)


BROADCAST = Collective(
    name="broadcast", summary="every rank ends with the root's buffer", busbw_text="1", busbw=lambda n: 1.0,
    pieces=lambda n: 1, result=lambda n, root: ((r, 0, (root,)) for r in range(n)), rooted=True,
    ways=(Way("chain", "pipelined chain from the root", chain, chain_theory, "(1 + (N-2) chunk/size) * TF"),
          Way("tree", "binomial tree", tree, lambda n, c: rounds(n), "ceil(log2 N) * TF"),
          Way("direct", "the root to every rank in one step", direct, lambda n, c: n - 1, "(N-1) * TF")))
