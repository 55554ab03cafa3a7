"""Which machine each host and switch of a topology runs on when the emulation spans several (pure)."""

from __future__ import annotations

import math
import re
from typing import Dict, List, Sequence

from emulation.core.topology import Topology

LOCAL = "localhost"  # Mininet Cluster Edition's name for the machine dmlbed runs on
TUNNELS = ("ssh", "gre")  # how links between machines are carried (Mininet's RemoteLink, RemoteGRELink)
_SERVER = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,252})$")


class PlacementError(ValueError):
    """A bad --cluster value."""


def parse_servers(text: str) -> List[str]:
    """'host2,10.0.0.3' -> ['localhost', 'host2', '10.0.0.3']: this machine first, then each SERVER once."""
    names = [s.strip() for s in str(text).split(",")]
    if not text or any(not s for s in names):
        raise PlacementError(f"--cluster '{text}' is invalid: give SERVER[,SERVER...] (host names or IPv4 "
                             f"addresses reached over SSH), e.g. --cluster 10.0.0.2,10.0.0.3")
    for name in names:
        if not _SERVER.match(name) or name == LOCAL:
            raise PlacementError(f"--cluster server '{name}' is invalid: give a host name or IPv4 address other "
                                 f"than localhost (this machine is always the first server)")
    if len(set(names)) != len(names):
        raise PlacementError(f"--cluster '{text}' names a server twice: give each server once")
    return [LOCAL] + names


def groups_below_top(topo: Topology) -> List[List[str]]:
    """Connected groups of hosts and switches once the top switch level is removed: a Fat-Tree pod, a BCube
    sub-cube (a level-0 switch group in BCube(n,2)), a subtree under the root; each host alone in a star."""
    top = max(s.level for s in topo.switches)
    kept = {h.name for h in topo.hosts} | {s.name for s in topo.switches if s.level < top}
    parent = {name: name for name in kept}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for link in topo.links:
        if link.lower in kept and link.upper in kept:
            parent[root(link.lower)] = root(link.upper)
    groups: Dict[str, List[str]] = {}
    for name in [h.name for h in topo.hosts] + [s.name for s in topo.switches if s.name in kept]:
        groups.setdefault(root(name), []).append(name)
    return list(groups.values())


def place(topo: Topology, servers: Sequence[str]) -> Dict[str, str]:
    """Server of every host and switch: hosts balanced over servers (at most ceil(H/S) each), each group below
    the top switch level kept whole on one server where it fits, else split in host order with its switches
    beside most of its hosts; top-level switches spread evenly, in order."""
    if not servers:
        raise PlacementError("no servers to place the topology on")
    hosts = {h.name for h in topo.hosts}
    room = {s: math.ceil(len(hosts) / len(servers)) for s in servers}
    placement: Dict[str, str] = {}
    groups = sorted(groups_below_top(topo), key=lambda g: -sum(n in hosts for n in g))
    for group in groups:
        members = [n for n in group if n in hosts]
        fits = [s for s in servers if room[s] >= len(members)]
        if fits:
            server = max(fits, key=lambda s: (room[s], -servers.index(s)))
            for name in group:
                placement[name] = server
            room[server] -= len(members)
            continue
        rest = list(members)
        while rest:
            server = max(servers, key=lambda s: (room[s], -servers.index(s)))
            take, rest = rest[:max(1, room[server])], rest[max(1, room[server]):]
            for name in take:
                placement[name] = server
            room[server] -= len(take)
        counts = {s: sum(placement[n] == s for n in members) for s in servers}
        home = max(servers, key=lambda s: (counts[s], -servers.index(s)))
        for name in group:
            placement.setdefault(name, home)
    top = [s.name for s in topo.switches if s.name not in placement]
    for i, name in enumerate(top):
        placement[name] = servers[i * len(servers) // len(top)]
    return placement


def crossing_links(topo: Topology, placement: Dict[str, str]) -> List[int]:
    """Indexes of the links whose two ends are on different servers (the tunnels)."""
    return [i for i, l in enumerate(topo.links) if placement[l.lower] != placement[l.upper]]
