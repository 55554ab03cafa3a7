"""Recursive halving-doubling all-reduce (Rabenseifner; gloo's and MPI's halving-doubling): reduce-scatter by
recursive halving, all-gather by recursive doubling, over the largest power of two p <= N ranks. The other
r = N - p ranks fold in first: rank 2i sends everything to rank 2i+1 (i < r) and gets the result back last."""

from typing import Dict, List

from emulation.core.formulas import Theory, host_tf
from workloads.algorithms.base import ALL_TOPOLOGIES, Algorithm
from workloads.codecs import SUMMING
from workloads.plan import COPY, REDUCE, Plan, Transfer


def active_ranks(n: int) -> List[int]:
    """The real rank of each of the p virtual ranks that run the halving and doubling."""
    p = 1 << (n.bit_length() - 1)
    r = n - p
    return [2 * v + 1 if v < r else v + r for v in range(p)]


def halving_doubling(n: int) -> Plan:
    """The plan on n ranks with p pieces: fold, log p halving steps, log p doubling steps, unfold."""
    p = 1 << (n.bit_length() - 1)
    r = n - p
    real = active_ranks(n)
    pieces = range(p)
    steps = []
    if r:
        steps.append(tuple(Transfer(2 * i, 2 * i + 1, q, REDUCE) for i in range(r) for q in pieces))
    d = p // 2
    while d >= 1:  # halving: keep the half holding your own piece, send the partner's half
        steps.append(tuple(Transfer(real[v], real[v ^ d], q, REDUCE)
                           for v in range(p) for q in range(((v ^ d) // d) * d, ((v ^ d) // d) * d + d)))
        d //= 2
    d = 1
    while d < p:  # doubling: send the d pieces you hold
        steps.append(tuple(Transfer(real[v], real[v ^ d], q, COPY)
                           for v in range(p) for q in range((v // d) * d, (v // d) * d + d)))
        d *= 2
    if r:
        steps.append(tuple(Transfer(2 * i + 1, 2 * i, q, COPY) for i in range(r) for q in pieces))
    meta: Dict[str, object] = {"power_of_two": p, "folded": r}
    return Plan("hd", n, p, (tuple(steps),), tuple(range(n)), meta)


def theory(topo, gradient_bytes, bw, servers: int) -> Theory:
    """Eq. 2 of BlueConnect with alpha = 0 over p ranks: 2(p-1)/p * TF; folding N-p ranks in and out adds
    two full-gradient transfers on the critical path: + 2 TF."""
    tf = host_tf(gradient_bytes, bw)
    n = len(topo.hosts)
    p = 1 << (n.bit_length() - 1)
    if p == n:
        return Theory(2 * (p - 1) / p * tf, "2(N-1)/N * TF (recursive halving-doubling)", tf)
    return Theory((2 + 2 * (p - 1) / p) * tf, "(2 + 2(p-1)/p) * TF, p = 2^floor(lg N) (fold + halving-doubling)", tf)


HD = Algorithm(
    name="hd", summary="recursive halving-doubling all-reduce (non-power-of-two ranks fold in first)",
    paper="Thakur, Rabenseifner, Gropp 2005; gloo allreduce_halving_doubling", topologies=ALL_TOPOLOGIES,
    theory=theory, plan=lambda topo, servers: halving_doubling(len(topo.hosts)), codecs=SUMMING, gather="rd",
    uniform_links=True, host_subsets=True)
