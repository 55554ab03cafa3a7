"""The directed links a transfer crosses, as the controller's rules and the hosts' routes send it: BCube's
level pinning and digit-correcting relays, up/down routing with ECMP hashing on trees and Fat-Trees. Built
from the topology's structure, so it stays fast at 1024+ hosts; tests check it against controllers.trace."""

from __future__ import annotations

import zlib
from typing import Dict, List, Optional, Tuple

from controllers.rules import hosts_below
from emulation.spec.addressing import bcube_path
from emulation.spec.topology import Topology

Hop = Tuple[str, str]


def ecmp_choice(ports: List[int], key: Tuple[object, ...]) -> int:
    """The port a select group gives one flow: a stable hash of the flow's identity."""
    return ports[zlib.crc32(repr(key).encode()) % len(ports)]


class Router:
    """Paths of transfers (src rank -> dst rank's interface on `level`), one path per flow."""

    def __init__(self, topo: Topology):
        self.topo = topo
        self.level_of: Dict[Hop, int] = {}
        self.switch_of: Dict[Tuple[str, int], str] = {}  # (host, level) -> the switch that interface joins
        self.up: Dict[str, List[Tuple[int, str]]] = {}  # switch -> [(up port, upper switch)]
        self.down: Dict[str, Dict[str, str]] = {}  # switch -> host below -> child towards it
        for l in topo.links:
            self.level_of[(l.lower, l.upper)] = self.level_of[(l.upper, l.lower)] = l.level
            if topo.is_host(l.lower):
                self.switch_of[(l.lower, l.level)] = l.upper
            else:
                self.up.setdefault(l.lower, []).append((l.lower_port, l.upper))
        if topo.kind != "bcube":
            children = {(l.upper, l.upper_port): l.lower for l in topo.links}
            for sw, ports in hosts_below(topo).items():
                self.down[sw] = {h: children[(sw, port)] for port, hosts in ports.items() for h in hosts}
            for sw in self.up:
                self.up[sw].sort()
        self.cache: Dict[Tuple[int, int, int, object], Tuple[Hop, ...]] = {}

    def path(self, src: int, dst: int, level: Optional[int] = 0, key: object = None) -> Tuple[Hop, ...]:
        """Directed links from rank src to rank dst's level-`level` interface; key tells ECMP flows apart."""
        level = level or 0
        cached = self.cache.get((src, dst, level, key))
        if cached is None:
            cached = self._bcube(src, dst, level) if self.topo.kind == "bcube" else self._up_down(src, dst, key)
            self.cache[(src, dst, level, key)] = cached
        return cached

    def _bcube(self, src: int, dst: int, level: int) -> Tuple[Hop, ...]:
        hosts = self.topo.hosts
        here, hops = hosts[src], []
        for lvl, nxt in bcube_path(self.topo, here, hosts[dst], level):
            sw = self.switch_of[(here.name, lvl)]
            hops += [(here.name, sw), (sw, nxt.name)]
            here = nxt
        return tuple(hops)

    def _up_down(self, src: int, dst: int, key: object) -> Tuple[Hop, ...]:
        a, b = self.topo.hosts[src].name, self.topo.hosts[dst].name
        node = self.switch_of[(a, 0)]
        hops = [(a, node)]
        while b not in self.down[node]:
            port_sw = self.up[node]
            upper = dict(port_sw)[ecmp_choice([p for p, _ in port_sw], (node, src, dst, key))]
            hops.append((node, upper))
            node = upper
        while node != b:
            child = self.down[node][b]
            hops.append((node, child))
            node = child
        return tuple(hops)

    def capacity_level(self, hop: Hop) -> int:
        """The link level whose shaped rate a directed link has."""
        return self.level_of[hop]
