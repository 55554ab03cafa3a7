"""Host-side network configuration as data: addresses, static routes and static ARP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from emulation.core.topology import PREFIX_LEN, Host, Topology

PLAN_PORT = 7000  # the port the workers' plans listen on (more plans: higher ports)


@dataclass(frozen=True)
class Route:
    """A host route: traffic to dst (/32) leaves by dev, via gateway (None = on-link)."""

    dst: str
    dev: str
    via: Optional[str] = None


@dataclass(frozen=True)
class ArpEntry:
    """A permanent neighbour entry: ip is at mac, reached through dev."""

    ip: str
    mac: str
    dev: str


@dataclass(frozen=True)
class HostConfig:
    """Everything a host needs so that no ARP or routing decision reaches the switches."""

    host: str
    addresses: Tuple[Tuple[str, str, int], ...]  # (dev, ip, prefix)
    routes: Tuple[Route, ...]
    arp: Tuple[ArpEntry, ...]
    forwarding: bool


def bcube_next_hop(topo: Topology, src: Host, dst: Host, dst_level: int) -> Tuple[int, Host]:
    """First hop of BCube's digit-correcting path: (level to use, neighbour host).

    Differing digits are corrected from the highest level down, except that the digit of
    the destination address's own level is corrected last, so the packet arrives on the
    interface that owns the address when that digit differs.
    """
    n, _k = topo.params
    differing = [l for l in range(len(src.coords)) if src.coords[l] != dst.coords[l]]
    order = sorted((l for l in differing if l != dst_level), reverse=True)
    if dst_level in differing:
        order.append(dst_level)
    level = order[0]
    coords = list(src.coords)
    coords[level] = dst.coords[level]
    index = sum(d * n ** l for l, d in enumerate(coords))
    return level, topo.hosts[index]


def bcube_path(topo: Topology, src: Host, dst: Host, dst_level: int) -> List[Tuple[int, Host]]:
    """The whole relayed path as (level, host) hops from src to dst."""
    return [(level, topo.hosts[index]) for level, index in bcube_route(topo, src.index, dst.index, dst_level)]


def bcube_route(topo: Topology, src: int, dst: int, dst_level: int) -> List[Tuple[int, int]]:
    """bcube_path by host index, (level, host index) per hop: the levels bcube_next_hop corrects, in its order
    (a corrected digit leaves the others' order unchanged), each hop moving one digit of the index."""
    n = topo.params[0]
    a, b = topo.hosts[src].coords, topo.hosts[dst].coords
    differing = [l for l in range(len(a)) if a[l] != b[l]]
    order = sorted((l for l in differing if l != dst_level), reverse=True)
    if dst_level in differing:
        order.append(dst_level)
    hops, here = [], src
    for level in order:
        here += (b[level] - a[level]) * n ** level
        hops.append((level, here))
    return hops


def bcube_live_route(topo: Topology, src: int, dst: int, dst_level: int,
                     failed: Sequence[Tuple[str, str]] = ()) -> Optional[List[Tuple[int, int]]]:
    """bcube_route over the links that are up: the digit-correcting path where all of it is up, else from each host
    the next hop towards dst that its own digit-correcting path takes if that is up, else one on a shortest path
    over the live links (arriving on whichever of dst's interfaces is up: a host takes any of its addresses on any
    interface). Each host's choice depends only on itself and dst, as its routing table does. None: unreachable."""
    if not failed:
        return bcube_route(topo, src, dst, dst_level)
    down = _down_interfaces(topo, failed)
    distance = _distances_to(topo, dst, down)
    if src not in distance:
        return None
    hops, here = [], src
    while here != dst:
        canonical = bcube_route(topo, here, dst, dst_level)
        if _live(here, canonical, down):
            return hops + canonical
        level, nxt = min(((lvl, n) for lvl, n in _neighbours(topo, here, down) if n in distance),
                         key=lambda ln: (distance[ln[1]], -ln[0]))
        hops.append((level, nxt))
        here = nxt
    return hops


def _down_interfaces(topo: Topology, failed: Sequence[Tuple[str, str]]) -> FrozenSet[Tuple[int, int]]:
    """(host index, level) of every host interface whose link is down."""
    gone = set(failed)
    return frozenset((topo.node(l.lower).index, l.level) for l in topo.links
                     if (l.lower, l.upper) in gone and topo.is_host(l.lower))


def _neighbours(topo: Topology, index: int, down) -> List[Tuple[int, int]]:
    """(level, host index) of every host one live level-switch hop away."""
    n = topo.params[0]
    coords = topo.hosts[index].coords
    out = []
    for level in range(len(coords)):
        if (index, level) in down:
            continue
        for digit in range(n):
            other = index + (digit - coords[level]) * n ** level
            if digit != coords[level] and (other, level) not in down:
                out.append((level, other))
    return out


def _distances_to(topo: Topology, dst: int, down) -> Dict[int, int]:
    """Live hops from every host that reaches dst."""
    distance, frontier = {dst: 0}, [dst]
    while frontier:
        nxt = []
        for here in frontier:
            for _, other in _neighbours(topo, here, down):
                if other not in distance:
                    distance[other] = distance[here] + 1
                    nxt.append(other)
        frontier = nxt
    return distance


def _live(src: int, hops: List[Tuple[int, int]], down) -> bool:
    here = src
    for level, nxt in hops:
        if (here, level) in down or (nxt, level) in down:
            return False
        here = nxt
    return True


def host_config(topo: Topology, host: Host, failed: Sequence[Tuple[str, str]] = ()) -> HostConfig:
    """Addresses, routes and static ARP entries for one host (BCube: routed around the links that are down)."""
    addresses = tuple((i.name, i.ip, PREFIX_LEN) for i in host.interfaces)
    routes: List[Route] = []
    arp: List[ArpEntry] = []
    if topo.kind == "bcube":
        for other in topo.hosts:
            if other.name == host.name:
                continue
            for dst_intf in other.interfaces:
                if failed:
                    path = bcube_live_route(topo, host.index, other.index, dst_intf.level, failed)
                    if not path:
                        continue
                    level, hop = path[0][0], topo.hosts[path[0][1]]
                else:
                    level, hop = bcube_next_hop(topo, host, other, dst_intf.level)
                dev = host.interface(level).name
                gateway = hop.interface(level).ip
                via = None if gateway == dst_intf.ip else gateway
                routes.append(Route(dst_intf.ip, dev, via))
            if sum(a != b for a, b in zip(host.coords, other.coords)) == 1:
                level = next(l for l in range(len(host.coords)) if host.coords[l] != other.coords[l])
                peer = other.interface(level)
                arp.append(ArpEntry(peer.ip, peer.mac, host.interface(level).name))
    else:  # each NIC on its own subnet (10.L/16): a peer's level-L address is on-link through the level-L NIC
        for intf in host.interfaces:
            for other in topo.hosts:
                if other.name != host.name:
                    peer = other.interface(intf.level)
                    arp.append(ArpEntry(peer.ip, peer.mac, intf.name))
    return HostConfig(host.name, addresses, tuple(routes), tuple(arp), topo.kind == "bcube")


def all_host_configs(topo: Topology, failed: Sequence[Tuple[str, str]] = ()) -> Dict[str, HostConfig]:
    """host_config for every host, by host name, with these links down."""
    return {h.name: host_config(topo, h, failed) for h in topo.hosts}


def route_command(route: Route, opts: str = "") -> str:
    """The shell command that sets a host route (opts: ' rto_min 5ms' and such, with its leading space)."""
    return f"ip route replace {route.dst}/32{f' via {route.via}' if route.via else ''} dev {route.dev}{opts}"


def route_changes(before: HostConfig, after: HostConfig, route_options: str = "") -> List[str]:
    """Shell commands that take a host from one set of routes to another (a reroute)."""
    opts = f" {route_options}" if route_options else ""
    old = {r.dst: r for r in before.routes}
    new = {r.dst: r for r in after.routes}
    cmds = [route_command(r, opts) for d, r in new.items() if old.get(d) != r]
    cmds += [f"ip route del {d}/32" for d in old if d not in new]
    return cmds


def subnet(ip: str, prefix: int) -> str:
    """The network an address with that prefix length is on, e.g. 10.1.0.0/16."""
    import ipaddress
    return str(ipaddress.ip_interface(f"{ip}/{prefix}").network)


def config_commands(cfg: HostConfig, route_options: str = "") -> List[str]:
    """Shell commands (run inside the host's namespace) that apply a HostConfig; route_options (such as
    'rto_min 5ms') go on every route, the connected subnet routes included."""
    opts = f" {route_options}" if route_options else ""
    cmds = ["sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1",
            f"sysctl -qw net.ipv4.ip_forward={int(cfg.forwarding)}",
            "sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0",
            "sysctl -qw net.ipv4.conf.all.send_redirects=0"]
    for dev, ip, prefix in cfg.addresses:
        cmds += [f"ip addr flush dev {dev}", f"ip addr add {ip}/{prefix} dev {dev}",
                 f"sysctl -qw net.ipv4.conf.{dev.replace('.', '/')}.rp_filter=0",
                 f"sysctl -qw net.ipv6.conf.{dev}.disable_ipv6=1",
                 f"ip link set {dev} up"]
        if opts:
            cmds.append(f"ip route replace {subnet(ip, prefix)} dev {dev} proto kernel scope link src {ip}{opts}")
    cmds += [route_command(r, opts) for r in cfg.routes]
    for a in cfg.arp:
        cmds.append(f"ip neigh replace {a.ip} lladdr {a.mac} dev {a.dev} nud permanent")
    return cmds


SHELL_LINE_BYTES = 3000  # a node's shell reads one line from a terminal, which cuts lines at 4095 bytes


def command_batches(cmds: List[str], limit: int = SHELL_LINE_BYTES) -> List[List[str]]:
    """Commands in order, in batches whose ' ; '-joined line stays under limit (a command longer than the limit is
    a batch of its own): a host's static ARP for 48 peers is over 4 KB, and the cut line failed its last command."""
    out: List[List[str]] = [[]]
    size = 0
    for cmd in cmds:
        if out[-1] and size + 3 + len(cmd) > limit:
            out.append([])
            size = 0
        size += (3 if out[-1] else 0) + len(cmd)
        out[-1].append(cmd)
    return [b for b in out if b]
