"""All-to-all with uneven splits (all-to-all(v), a mixture-of-experts layer's dispatch without padding): rank i's
block j goes to rank j, as in all-to-all, but the blocks differ in size. Every rank sends the op's size in all; how
it splits it over the ranks is drawn once, seeded (SPLIT_SEED), each block's share uniform in [0, 2) times the mean,
as tokens routed to experts of unequal load, so the ranks receive unequal amounts. The plans are all-to-all's."""

from typing import List, Sequence

import numpy as np

from workloads.collectives.alltoall import direct, pairwise
from workloads.collectives.base import Collective, Way, all_but_one

SPLIT_SEED = 2026


def split(ranks: int, buffer_elements: int) -> List[int]:
    """Elements of each of the N x N blocks (block i*N + j: what rank i sends rank j); each row sums to the op's
    size (buffer / N)."""
    row = int(buffer_elements) // ranks
    weights = np.random.default_rng(SPLIT_SEED).uniform(0.0, 2.0, (ranks, ranks))
    blocks = np.floor(weights / weights.sum(axis=1, keepdims=True) * row).astype(np.int64)
    blocks[np.arange(ranks), np.arange(ranks)] += row - blocks.sum(axis=1)  # rounding stays home
    return [int(b) for b in blocks.reshape(-1)]


def busiest_port(ranks: int, pieces: Sequence[int]) -> float:
    """Elements through the busiest host link in either direction: what a rank sends or receives beyond its own
    block (a lower bound of any plan on a network whose hosts' links are the bottleneck; the direct plan's time in
    the flow model on a star)."""
    blocks = np.asarray(pieces, dtype=np.float64).reshape(ranks, ranks)
    own = np.diag(blocks)
    return float(max(np.max(blocks.sum(axis=1) - own), np.max(blocks.sum(axis=0) - own)))


ALLTOALLV = Collective(
    name="alltoallv", summary="rank i's block j ends on rank j; blocks of unequal sizes (seeded)",
    busbw_text="(n-1)/n", busbw=all_but_one, pieces=lambda n: n * n, buffer_factor=lambda n: n, split=split,
    result=lambda n, root: ((j, i * n + j, (i,)) for i in range(n) for j in range(n)),
    ways=(Way("pairwise", "N-1 steps, one peer at a time", pairwise, lambda n, c: (n - 1) / n,
              "busiest host link's bytes / rate (a bound: each step waits for its largest block)",
              uneven=busiest_port, exact=False),
          Way("direct", "every rank to every rank in one step", direct, lambda n, c: (n - 1) / n,
              "busiest host link's bytes / rate (a bound)", uneven=busiest_port)))
