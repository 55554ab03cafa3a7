"""Which address of a peer a transfer connects to, so it crosses the intended link (pure)."""

from typing import Optional

from emulation.core.topology import Topology


def peer_address(topo: Topology, src: int, dst: int, level: Optional[int] = None) -> str:
    """The dst host's IP for a transfer from src: its level-`level` address when the plan pins a level;
    in BCube the address of the one level they differ on when they are 1-hop neighbours; else its
    primary (level-0) address, which BCube hosts reach by relaying."""
    a, b = topo.hosts[src], topo.hosts[dst]
    if level is not None:
        return b.interface(level).ip
    if topo.kind == "bcube":
        differing = [l for l in range(len(a.coords)) if a.coords[l] != b.coords[l]]
        if len(differing) == 1:
            return b.interface(differing[0]).ip
    return b.ip


def peer_level(topo: Topology, src: int, dst: int, level: Optional[int] = None) -> int:
    """The link level a transfer from src to dst leaves on (the interface peer_address picks)."""
    if level is not None:
        return level
    a, b = topo.hosts[src], topo.hosts[dst]
    if topo.kind == "bcube":
        differing = [l for l in range(len(a.coords)) if a.coords[l] != b.coords[l]]
        if len(differing) == 1:
            return differing[0]
    return 0
