"""The directed links a transfer crosses, as the controller's rules and the hosts' routes send it: BCube's
level pinning and digit-correcting relays, up/down routing on trees and Fat-Trees. Built from the topology's
structure, so it stays fast at 1024+ hosts; tests check it against controllers.paths.

ECMP (Fat-Tree switches' several up ports) in one of two ways: "hash" puts each connection on one path as the
controller's rules do (controllers.flow_rules.ecmp_choice over its TCP ports; a simulated connection's source port is a
stable hash of its identity, so which flows collide differs from any one emulated run, not how often);
"spread" splits every flow evenly over all its equal-cost paths (the fluid limit many flows approach). Spread is
exact with group links: the parallel links a flow spreads over carry equal loads, so they act as one link of
their summed capacity. A topology routed D-mod-k (its routing "dmodk") has one path per destination, whichever mode
is asked for."""

from __future__ import annotations

import zlib
from typing import Dict, List, Optional, Tuple

import numpy as np

from controllers.flow_rules import (dmodk_choice, ecmp_choice, graph_tier, host_attachments, hosts_below, network_number,
                                    reachable, shortest_next_hops)
from emulation.core.addressing import PLAN_PORT, bcube_live_route
from emulation.core.tcp import even_ephemeral_port
from emulation.core.topology import Topology
from emulation.simulation.flow_graph import gather_index

Hop = Tuple[str, str]


def connection_ports(src: int, dst: int, key: object) -> Tuple[int, int]:
    """A simulated connection's (source, destination) TCP ports: an even port of Linux's ephemeral range
    (connect() prefers even ports) by a stable hash of its identity, to the plans' listening port."""
    return even_ephemeral_port(zlib.crc32(repr((src, dst, key)).encode())), PLAN_PORT


ECMP_MODES = ("spread", "hash")


def single_homed(topo: Topology) -> bool:
    """Whether every host has one link, and only switches without switches below them have hosts."""
    links: Dict[str, int] = {}
    with_hosts, with_switches = set(), set()
    for l in topo.links:
        if topo.is_host(l.lower):
            links[l.lower] = links.get(l.lower, 0) + 1
            with_hosts.add(l.upper)
        else:
            with_switches.add(l.upper)
    return all(n == 1 for n in links.values()) and not with_hosts & with_switches


def used_only(lengths: np.ndarray, flat: np.ndarray, ids: Dict[Hop, int]):
    """Paths (lengths, link ids) with the ids renumbered to the links some path crosses, and those links."""
    used = np.zeros(len(ids), dtype=bool)
    used[flat] = True
    return lengths, (np.cumsum(used, dtype=np.int32) - 1)[flat], [h for h, u in zip(ids, used) if u]


class Router:
    """Paths of transfers (src rank -> dst rank's interface on `level`), one path per flow."""

    def __init__(self, topo: Topology, ecmp: str = "spread",
                 ports: Optional[Dict[Tuple[int, int, object], Tuple[int, int]]] = None,
                 link_factors: Optional[Dict[Hop, float]] = None):
        if ecmp not in ECMP_MODES:
            raise ValueError(f"ecmp {ecmp!r} is unknown: valid are {', '.join(ECMP_MODES)}")
        # equal-cost paths through any graph do not fall into layers to group: each connection on its hashed path
        self.topo, self.ecmp = topo, "hash" if topo.graph else ecmp
        if topo.routing == "dmodk" and not topo.graph and topo.kind != "bcube":
            self.ecmp = "dmodk"  # one path per destination, as the rules route it: no ports to hash, nothing to spread
        self.ports = ports or {}  # (src, dst, key) -> TCP ports a real connection used (else simulated ones)
        self.width: Dict[Hop, int] = {}  # group links: how many parallel links one hop stands for
        self.level_of: Dict[Hop, int] = {}
        self.index = {h.name: h.index for h in topo.hosts}  # a job's ranks by host name (between)
        self.factor: Dict[Hop, float] = {}  # links at another rate than their level's: that rate / the level's
        self.failed = tuple(k for k, f in (link_factors or {}).items() if f == 0)  # links down: routed around
        for (a, b), f in (link_factors or {}).items():
            self.factor[(a, b)] = self.factor[(b, a)] = f
        self.switch_of: Dict[Tuple[str, int], str] = {}  # (host, level) -> the switch that interface joins
        self.up: Dict[str, List[Tuple[int, str]]] = {}  # switch -> [(up port, upper switch)]
        self.down: Dict[str, Dict[str, str]] = {}  # switch -> host below -> child towards it
        for l in topo.links:
            self.level_of[(l.lower, l.upper)] = self.level_of[(l.upper, l.lower)] = l.level
            if topo.is_host(l.lower):
                self.switch_of[(l.lower, l.level)] = l.upper
            elif (l.lower, l.upper) not in self.failed:
                self.up.setdefault(l.lower, []).append((l.lower_port, l.upper))
        self.reach: Dict[str, frozenset] = {}  # switch -> hosts it reaches (up/down routing over the live links)
        self.by_edge = False  # every host on one edge switch: down and reach above the edges keyed by edge switch
        self.edge_of: Dict[str, str] = {}
        self.next_hops: Dict[str, Dict[str, Tuple[int, List[int]]]] = {}  # any graph: shortest_next_hops
        self.attached: Dict[str, Tuple[str, int]] = {}
        self.port_peer: Dict[Tuple[str, int], str] = {}
        if topo.graph:
            self.next_hops, self.attached = shortest_next_hops(topo, self.failed), host_attachments(topo)
            for l in topo.links:
                self.port_peer[(l.lower, l.lower_port)] = l.upper
                self.port_peer[(l.upper, l.upper_port)] = l.lower
        elif topo.kind != "bcube":
            self.by_edge = single_homed(topo) and not any(topo.is_host(a) or topo.is_host(b) for a, b in self.failed)
            if self.by_edge:
                self._edge_routes()
            else:
                children = {(l.upper, l.upper_port): l.lower for l in topo.links}
                below = hosts_below(topo, self.failed)
                for sw, ports in below.items():
                    self.down[sw] = {h: children[(sw, port)] for port, hosts in ports.items() for h in hosts}
                self.reach = reachable(topo, self.failed, below)
            for sw in self.up:
                self.up[sw].sort()
        self.cache: Dict[Tuple[int, int, int], Tuple[Hop, ...]] = {}  # BCube paths
        self.middles: Dict[Tuple[str, str], Tuple[Hop, ...]] = {}

    def _edge_routes(self) -> None:
        """Up/down routing keyed by edge switch above the edges (the hosts of an edge switch share every hop above
        it: 10^5 hosts under 10^3 switches need no table of 10^8 host entries): down[edge] maps its hosts, down[s]
        of an upper switch its edge switches below to the child towards each; reach[s] the edge switches s reaches
        going up, then down."""
        topo = self.topo
        hosts_of: Dict[str, List[str]] = {}
        lower: Dict[str, List[Tuple[int, str]]] = {}
        for l in topo.links:
            if topo.is_host(l.lower):
                self.edge_of[l.lower] = l.upper
                hosts_of.setdefault(l.upper, []).append(l.lower)
            elif (l.lower, l.upper) not in self.failed:
                lower.setdefault(l.upper, []).append((l.upper_port, l.lower))
        for edge, hosts in hosts_of.items():
            self.down[edge] = {h: h for h in hosts}

        def edges_below(sw: str) -> Dict[str, str]:
            if sw not in self.down:
                self.down[sw] = {}
                for _, child in sorted(lower.get(sw, ())):
                    for e in ([child] if child in hosts_of else []) + list(edges_below(child)):
                        self.down[sw].setdefault(e, child)
            return {} if sw in hosts_of else self.down[sw]
        for sw in topo.switches:
            edges_below(sw.name)
        above: Dict[Tuple[str, ...], frozenset] = {}

        def reaches(sw: str) -> frozenset:
            if sw not in self.reach:
                ups = tuple(sorted(u for _, u in self.up.get(sw, ())))
                if ups not in above:
                    above[ups] = frozenset().union(*(reaches(u) for u in ups))
                here = {sw} if sw in hosts_of else set(self.down[sw])
                self.reach[sw] = above[ups] | here
            return self.reach[sw]
        for sw in topo.switches:
            reaches(sw.name)

    def _key(self, node: str, host: str) -> str:
        """What node's down table and reach hold for a host: the host itself, or (by edge) its edge switch above
        the edges."""
        return host if not self.by_edge or node == self.edge_of[host] else self.edge_of[host]

    def _reaches(self, switch: str, host: str) -> bool:
        """Whether going up through switch reaches host."""
        return (self.edge_of[host] if self.by_edge else host) in self.reach[switch]

    def path(self, src: int, dst: int, level: Optional[int] = 0, key: object = None) -> Tuple[Hop, ...]:
        """Directed links from rank src to rank dst's level-`level` interface; key tells ECMP flows apart."""
        if self.topo.kind != "bcube":
            return self._spread(src, dst) if self.ecmp == "spread" else self._hashed(src, dst, key)
        level = level or 0
        cached = self.cache.get((src, dst, level))
        if cached is None:
            cached = self.cache[(src, dst, level)] = self._bcube(src, dst, level)
        return cached

    def paths(self, src: np.ndarray, dst: np.ndarray, level: np.ndarray, key: np.ndarray
              ) -> Tuple[np.ndarray, np.ndarray, List[Hop]]:
        """path() of many transfers at once: their lengths, their links as ids one path after another, and the hop
        each id stands for."""
        ids: Dict[Hop, int] = {}
        if self.topo.kind != "bcube" and self.ecmp == "spread":
            return self._spread_paths(src, dst, ids)
        if self.topo.kind == "bcube" and not self.failed:
            return self._bcube_paths(src, dst, level, ids)
        ranks = len(self.topo.hosts)
        levels = int(level.max(initial=0)) + 1
        keys = int(key.max(initial=0)) + 1
        combo = (src * ranks + dst) * levels + (level if self.topo.kind == "bcube" else 0)
        combo = combo * keys + (key if self.ecmp == "hash" and self.topo.kind != "bcube" else 0)
        unique, inverse = np.unique(combo, return_inverse=True)
        rows = [[ids.setdefault(h, len(ids)) for h in self.path(int(c // keys // levels // ranks),
                                                                 int(c // keys // levels % ranks),
                                                                 int(c // keys % levels), key=int(c % keys))]
                for c in unique.tolist()]
        return self._table_paths(rows, inverse.ravel(), ids)

    @staticmethod
    def _table_paths(rows: List[List[int]], which: np.ndarray, ids: Dict[Hop, int]):
        """Paths that are rows of a table: each transfer's row."""
        row_len = np.array([len(r) for r in rows], dtype=np.int64)
        ptr = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(row_len, out=ptr[1:])
        flat = np.fromiter((l for r in rows for l in r), dtype=np.int32, count=int(ptr[-1]))
        lengths = row_len[which]
        return lengths, flat[gather_index(ptr[:-1], lengths, which)], list(ids)

    def _spread_paths(self, src: np.ndarray, dst: np.ndarray, ids: Dict[Hop, int]):
        """paths() with every flow spread: a host's own link up, the switch part its two edge switches share,
        the link down to the other host."""
        names = [h.name for h in self.topo.hosts]
        edge_of = [self.switch_of[(n, 0)] for n in names]
        edges = {e: n for n, e in enumerate(dict.fromkeys(edge_of))}
        edge = np.array([edges[e] for e in edge_of], dtype=np.int64)
        first_host = {}
        for n, e in enumerate(edge_of):
            first_host.setdefault(edges[e], n)
        up = np.array([ids.setdefault((n, e), len(ids)) for n, e in zip(names, edge_of)], dtype=np.int32)
        down = np.array([ids.setdefault((e, n), len(ids)) for n, e in zip(names, edge_of)], dtype=np.int32)
        pair = edge[src] * len(edges) + edge[dst]
        unique, inverse = np.unique(pair, return_inverse=True)
        rows = [[ids.setdefault(h, len(ids)) for h in self._spread_names(
            names[first_host[p // len(edges)]], names[first_host[p % len(edges)]])[1:-1]] for p in unique.tolist()]
        middle, middle_links, _ = self._table_paths(rows, inverse.ravel(), ids)
        lengths = middle + 2
        start = np.cumsum(lengths) - lengths
        flat = np.empty(int(lengths.sum()), dtype=np.int32)
        flat[start] = up[src]
        flat[start + lengths - 1] = down[dst]
        flat[gather_index(start + 1, middle, np.arange(len(middle)))] = middle_links
        return used_only(lengths, flat, ids)

    def _bcube_paths(self, src: np.ndarray, dst: np.ndarray, level: np.ndarray, ids: Dict[Hop, int]):
        """paths() on a BCube with every link up: the digits that differ corrected highest level first, the
        destination interface's level last (bcube_route), each through that level's switch."""
        hosts, n = self.topo.hosts, self.topo.params[0]
        k = len(hosts[0].coords)
        coords = np.array([h.coords for h in hosts], dtype=np.int64)
        up = np.array([[ids.setdefault((h.name, self.switch_of[(h.name, l)]), len(ids)) for l in range(k)]
                       for h in hosts], dtype=np.int32)
        down = np.array([[ids.setdefault((self.switch_of[(h.name, l)], h.name), len(ids)) for l in range(k)]
                         for h in hosts], dtype=np.int32)
        a, b = coords[src], coords[dst]
        differ = a != b
        levels = np.arange(k)
        rank = np.where(levels[None, :] == level[:, None], -1, levels[None, :])  # the destination's level last
        order = np.argsort(-np.where(differ, rank, -2), axis=1, kind="stable")
        hops = differ.sum(axis=1)
        lengths = 2 * hops
        start = np.cumsum(lengths) - lengths
        flat = np.empty(int(lengths.sum()), dtype=np.int32)
        here = src.astype(np.int64)
        for p in range(k):
            u = np.flatnonzero(hops > p)
            lv = order[u, p]
            there = here[u] + (b[u, lv] - a[u, lv]) * n ** lv
            flat[start[u] + 2 * p] = up[here[u], lv]
            flat[start[u] + 2 * p + 1] = down[there, lv]
            here[u] = there
        return used_only(lengths, flat, ids)

    def between(self, a: str, b: str, key: object = None) -> Tuple[Hop, ...]:
        """Directed links from host a to host b's primary interface, by name: any host of the network, a job's rank
        or not (background flows between hosts a job leaves free)."""
        if a in self.index and b in self.index:
            return self.path(self.index[a], self.index[b], 0, key)
        if self.topo.kind == "bcube":
            raise ValueError("BCube paths are between a job's ranks (its hosts are every host)")
        if self.ecmp == "spread":
            return self._spread_names(a, b)
        return self._hashed_names(a, b, connection_ports(a, b, key))

    def _bcube(self, src: int, dst: int, level: int) -> Tuple[Hop, ...]:
        hosts = self.topo.hosts
        here, hops = hosts[src].name, []
        route = bcube_live_route(self.topo, src, dst, level, self.failed)
        if route is None:
            raise ValueError(f"{hosts[dst].name} is cut off from {hosts[src].name}: every path has a link down")
        for lvl, nxt in route:
            sw, there = self.switch_of[(here, lvl)], hosts[nxt].name
            hops += [(here, sw), (sw, there)]
            here = there
        return tuple(hops)

    def _group(self, lower: Tuple[str, ...], upper: Tuple[str, ...], links: int) -> Hop:
        """The hop between two layers of switches, as one link when it is one."""
        if len(lower) == 1 and len(upper) == 1:
            return lower[0], upper[0]
        hop = ("{" + ",".join(lower) + "}", "{" + ",".join(upper) + "}")
        if hop not in self.width:
            self.width[hop] = links
            self.level_of[hop] = next(self.level_of[(a, b)] for a in lower for b in upper if (a, b) in self.level_of)
            if self.factor:  # a flow spread evenly over the parallel links is held to the slowest one's pace
                self.factor[hop] = min(self.factor.get((a, b), 1.0) for a in lower for b in upper
                                       if (a, b) in self.level_of and self.factor.get((a, b), 1.0) > 0)
        return hop

    def _spread(self, src: int, dst: int) -> Tuple[Hop, ...]:
        """Up through every equal-cost switch layer at once, then down towards dst (the switch part is the same
        for every pair of hosts under the same two edge switches)."""
        return self._spread_names(self.topo.hosts[src].name, self.topo.hosts[dst].name)

    def _spread_names(self, a: str, b: str) -> Tuple[Hop, ...]:
        """_spread between two hosts by name."""
        first, last = self.switch_of[(a, 0)], self.switch_of[(b, 0)]
        middle = self.middles.get((first, last))
        if middle is None:
            middle = self.middles[(first, last)] = self._spread_between(first, b)
        return ((a, first),) + middle + ((last, b),)

    def _spread_between(self, first: str, b: str) -> Tuple[Hop, ...]:
        """The switch-to-switch hops from `first` to the edge switch of host b (_key and _reaches inlined: a
        parameter server's pairs on fattree:16 walk 16,384 of these)."""
        target = self.edge_of[b] if self.by_edge else b  # what reach sets and upper down tables hold for b
        layer = (first,)
        hops = []
        while (b if layer[0] == target or not self.by_edge else target) not in self.down[layer[0]]:
            via = [u for n in layer for _, u in self.up.get(n, ()) if target in self.reach[u]]  # one per up link
            upper = tuple(sorted(set(via)))
            hops.append(self._group(layer, upper, len(via)))
            layer = upper
        while True:
            lower = tuple(sorted({self.down[n][b if n == target or not self.by_edge else target] for n in layer}))
            if lower == (b,):
                return tuple(hops)
            hops.append(self._group(layer, lower, len(layer)))
            layer = lower

    def _hashed(self, src: int, dst: int, key: object) -> Tuple[Hop, ...]:
        ports = self.ports.get((src, dst, key)) or connection_ports(src, dst, key)
        return self._hashed_names(self.topo.hosts[src].name, self.topo.hosts[dst].name, ports)

    def _graph_path(self, a: str, b: str, ports: Tuple[int, int]) -> Tuple[Hop, ...]:
        """One shortest path from host a to host b through any graph, each switch's ECMP choice as its rules hash
        the connection's ports."""
        node, (edge, _) = self.switch_of[(a, 0)], self.attached[b]
        hops = [(a, node)]
        while node != edge:
            if node not in self.next_hops[edge]:
                raise ValueError(f"{b} is cut off from {a}: every path has a link down")
            distance, ways = self.next_hops[edge][node]
            nxt = self.port_peer[(node, ways[ecmp_choice(graph_tier(distance), len(ways), *ports)])]
            hops.append((node, nxt))
            node = nxt
        return tuple(hops) + ((edge, b),)

    def _hashed_names(self, a: str, b: str, ports: Tuple[int, int]) -> Tuple[Hop, ...]:
        """One ECMP path from host a to host b for a connection with these TCP ports, as the rules hash it."""
        if self.topo.graph:
            return self._graph_path(a, b, ports)
        node = self.switch_of[(a, 0)]
        hops = [(a, node)]
        while self._key(node, b) not in self.down[node]:
            port_sw = [(p, u) for p, u in self.up[node] if self._reaches(u, b)]  # by port, as the rules number them
            level = self.topo.node(node).level
            upper = port_sw[dmodk_choice(level, len(port_sw), network_number(self.topo.node(b)))
                            if self.ecmp == "dmodk" else ecmp_choice(level, len(port_sw), *ports)][1]
            hops.append((node, upper))
            node = upper
        while node != b:
            child = self.down[node][self._key(node, b)]
            hops.append((node, child))
            node = child
        return tuple(hops)

    def capacity(self, hop: Hop, rates: Dict[int, float]) -> float:
        """A hop's rate: its level's (or its own, where it has one), times the parallel links a group hop stands
        for."""
        return rates[self.level_of[hop]] * self.width.get(hop, 1) * self.factor.get(hop, 1.0)
