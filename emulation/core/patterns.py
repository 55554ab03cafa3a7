"""Hedera's traffic patterns for ECMP studies: who sends one long flow to whom, and from which TCP port (pure).

stride:K: host i sends to host (i + K) mod N; randbij: a random bijection without fixed points (every host sends
to one other and receives from one), drawn by the seed; alltoall: every host to every other. Each flow's client
port is drawn by the pattern and seed from Linux's ephemeral range (even ports, as connect() prefers), so which
equal-cost path a flow hashes to varies with the seed as it does between real runs, and is known before it runs.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

from emulation.core.tcp import EPHEMERAL_PORTS, even_ephemeral_port

PATTERN_HELP = ("a traffic pattern of one long flow per pair (Hedera's): stride:K (host i to i+K mod N), randbij (a "
                "random bijection, drawn by the seed) or alltoall")


@dataclass(frozen=True)
class Pattern:
    """A parsed --pattern: its kind and stride."""

    kind: str
    stride: int = 0

    def shown(self) -> str:
        """As the user writes it."""
        return f"stride:{self.stride}" if self.kind == "stride" else self.kind


def parse_pattern(text: str) -> Pattern:
    """stride:K, randbij or alltoall; ValueError naming what is valid."""
    kind, _, arg = str(text).strip().partition(":")
    if kind == "stride" and arg.isdigit() and int(arg) >= 1:
        return Pattern("stride", int(arg))
    if kind in ("randbij", "alltoall") and not arg:
        return Pattern(kind)
    raise ValueError(f"--pattern {text} is not a pattern: give stride:K (K >= 1), randbij or alltoall")


def check_pattern(pattern: Pattern, hosts: int) -> None:
    """ValueError where the pattern does not fit this many hosts."""
    if pattern.kind == "stride" and pattern.stride % hosts == 0:
        raise ValueError(f"--pattern {pattern.shown()} sends every host to itself on {hosts} hosts: give a stride "
                         f"that is not a multiple of {hosts}")


def parse_patterns(texts: Sequence[str], hosts: int) -> Tuple[Pattern, ...]:
    """Every --pattern given, each parsed and fitted to this many hosts; ValueError naming the first bad one."""
    out = []
    for text in texts:
        out.append(parse_pattern(text))
        check_pattern(out[-1], hosts)
    return tuple(out)


def pairs(pattern: Pattern, hosts: int, seed: int) -> List[Tuple[int, int]]:
    """(sender, receiver) host indices of the pattern's flows."""
    if pattern.kind == "stride":
        return [(i, (i + pattern.stride) % hosts) for i in range(hosts)]
    if pattern.kind == "alltoall":
        return [(i, j) for i in range(hosts) for j in range(hosts) if i != j]
    rng = random.Random(f"randbij:{seed}")
    while True:
        order = list(range(hosts))
        rng.shuffle(order)
        if all(i != j for i, j in enumerate(order)):
            return list(enumerate(order))


def client_ports(senders: Sequence[str], key: str, used: Optional[Dict[str, Set[int]]] = None) -> List[int]:
    """An even client port of the ephemeral range per flow (senders: each flow's sending host), drawn by key (the
    pattern and seed): distinct on each host, and none a host in `used` had already (an explicitly bound port
    still in TIME_WAIT from an earlier run cannot be bound again); used is updated."""
    rng = random.Random(f"ports:{key}")
    span = (EPHEMERAL_PORTS[1] - EPHEMERAL_PORTS[0]) // 2  # the even ports: each draw picks one
    used = used if used is not None else {}
    out = []
    for host in senders:
        taken = used.setdefault(host, set())
        port = even_ephemeral_port(rng.randrange(span))
        while port in taken:
            port = even_ephemeral_port(rng.randrange(span))
        taken.add(port)
        out.append(port)
    return out
