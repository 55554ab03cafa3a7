"""BML (Algorithm 1 of the BML paper) and its generalization to any mixed-radix hierarchy.

Ranks are numbered by digits d_0 (fastest) .. d_{m-1}; ranks that differ only in digit l share a
level-l group (a BCube level-l switch, a Fat-Tree edge switch / pod / core, a tree switch).
Thread t aggregates over the digits in the order l_w = (t + w) mod m, then broadcasts in reverse.
Piece <t, q> ends fully aggregated on rank q and is then broadcast to everyone.
"""

from typing import List, Sequence

from workloads.plan import COPY, REDUCE, Plan, Transfer


def to_digits(rank: int, radices: Sequence[int]) -> List[int]:
    """Mixed-radix digits of rank, least significant first."""
    out = []
    for r in radices:
        out.append(rank % r)
        rank //= r
    return out


def from_digits(digits: Sequence[int], radices: Sequence[int]) -> int:
    """Inverse of to_digits."""
    rank, scale = 0, 1
    for d, r in zip(digits, radices):
        rank += d * scale
        scale *= r
    return rank


def group_neighbours(rank: int, level: int, radices: Sequence[int]) -> List[int]:
    """Ranks that differ from rank only in digit `level`."""
    ds = to_digits(rank, radices)
    out = []
    for v in range(radices[level]):
        if v != ds[level]:
            other = list(ds)
            other[level] = v
            out.append(from_digits(other, radices))
    return out


def hierarchical(name: str, radices: Sequence[int], threads: int, pin_levels: bool) -> Plan:
    """Aggregate digit by digit (k steps), broadcast back (k steps); `threads` concurrent streams.

    pin_levels tags each transfer with its digit's level, so on BCube it uses that level's link.
    """
    m = len(radices)
    ranks = 1
    for r in radices:
        ranks *= r
    digits = [to_digits(q, radices) for q in range(ranks)]
    streams = []
    for t in range(threads):
        order = [(t + w) % m for w in range(m)]
        piece = lambda q, t=t: t * ranks + q  # noqa: E731
        steps = []
        for w, level in enumerate(order):
            done = order[:w]
            tag = level if pin_levels else None
            step = []
            for a in range(ranks):
                for s in group_neighbours(a, level, radices):
                    for q in range(ranks):
                        if all(digits[q][l] == digits[a][l] for l in done) and \
                                digits[q][level] == digits[s][level]:
                            step.append(Transfer(a, s, piece(q), REDUCE, tag))
            steps.append(tuple(step))
        for w in range(m):
            level = order[m - 1 - w]
            fixed = order[:m - w]
            tag = level if pin_levels else None
            step = []
            for a in range(ranks):
                for s in group_neighbours(a, level, radices):
                    for q in range(ranks):
                        if all(digits[q][l] == digits[a][l] for l in fixed):
                            step.append(Transfer(a, s, piece(q), COPY, tag))
            steps.append(tuple(step))
        streams.append(tuple(steps))
    return Plan(name, ranks, threads * ranks, tuple(streams), tuple(range(ranks)),
                {"radices": list(radices), "threads": threads})
