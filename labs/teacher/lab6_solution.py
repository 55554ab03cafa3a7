"""Lab 6, the teacher's solution: a binomial-tree all-reduce (reduce up the tree to rank 0, broadcast down it)."""

from workloads.plan import COPY, REDUCE, Plan, Transfer


def plan(ranks: int) -> Plan:
    """All-reduce of one piece: in round j, each rank whose j lowest bits are 0 and whose bit j is 1 adds its value
    into rank - 2^j; then the same pairs copy the sum back down, in the reverse order."""
    rounds = []
    span = 1
    while span < ranks:
        rounds.append(tuple(Transfer(r, r - span, 0, REDUCE) for r in range(span, ranks, 2 * span)))
        span *= 2
    down = [tuple(Transfer(t.dst, t.src, 0, COPY) for t in step) for step in reversed(rounds)]
    return Plan("binomial-tree", ranks, 1, (tuple(rounds) + tuple(down),), tuple(range(ranks)))
