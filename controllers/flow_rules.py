"""Proactive OpenFlow 1.3 rules computed from a topology (pure: no Ryu, no switch)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Sequence, Tuple

from emulation.core.topology import Topology

Link = Tuple[str, str]  # (lower, upper) of a topology link

OFPP_CONTROLLER = 0xFFFFFFFD
OFPP_IN_PORT = 0xFFFFFFF8
ETH_TYPE_IPV4 = 0x0800
PRIORITY_BACK = 101    # from a down port, for a host below another: that port, else back where it came from
PRIORITY_HOST = 100
PRIORITY_BOUNCE = 50   # from an up port, for a host not below: up another way (only on a detour)
PRIORITY_AVOID = 40    # for a host some up ports no longer reach: only the others
PRIORITY_ECMP = 20
PRIORITY_UP = 10
PRIORITY_MISS = 0
UP_GROUP = 1
ECMP_GROUP = 1000      # + up port: fast failover, that port, else the other up ports
BOUNCE_GROUP = 2000    # + up port it came in on: fast failover over the other up ports
DOWN_GROUP = 3000      # + down port: fast failover, that port, else a sibling that can go up another way
BACK_GROUP = 10000     # + 256 * down port + in port: that port, else back out of the in port
IP_PROTO_TCP = 6
IP_PROTO_UDP = 17
L4 = {IP_PROTO_TCP: ("tcp_src", "tcp_dst"), IP_PROTO_UDP: ("udp_src", "udp_dst")}
FAILOVER_MODES = ("fast", "controller")
# ECMP over TCP ports: a switch at level L hashes bits [1 + 4L, 1 + 4L + width) of each segment's source and
# destination ports (bit 0 is skipped: Linux prefers even ports for connect()). Explicit rules instead of a
# select group, so which path a connection takes follows from its ports and is known to the fidelity report.
ECMP_FIRST_BIT = 1
ECMP_TIER_BITS = 4
# Up/down routing's choice among a switch's several up ports: by the connection's TCP ports (ecmp) or by the
# destination host alone (dmodk: D-mod-k, as InfiniBand fat-trees route), so every destination is reached through one
# top switch and each down link carries one destination's traffic: a permutation or an all-to-all meets no collision.
ROUTINGS = ("ecmp", "dmodk")


@dataclass(frozen=True)
class FlowRule:
    """One flow entry: match fields (Ryu OFPMatch names; a (value, mask) pair matches bitwise) -> output port or
    select group."""

    dpid: int
    priority: int
    match: Tuple[Tuple[str, object], ...]
    out_port: Optional[int] = None
    group: Optional[int] = None

    def fields(self) -> Dict[str, object]:
        """The match as a dict of OFPMatch keyword arguments."""
        return dict(self.match)


@dataclass(frozen=True)
class GroupRule:
    """A select group (each flow hashed to one of `ports`: ECMP) or a fast-failover group (the first bucket whose
    watched port is up: `ports` are watched in order, `outs` where each bucket sends, OFPP_IN_PORT back out)."""

    dpid: int
    group_id: int
    ports: Tuple[int, ...]
    kind: str = "select"
    outs: Optional[Tuple[int, ...]] = None

    def outputs(self) -> Tuple[int, ...]:
        """Where each bucket sends."""
        return self.outs if self.outs is not None else self.ports


@dataclass(frozen=True)
class RuleSet:
    """All flows and groups for a topology."""

    flows: Tuple[FlowRule, ...]
    groups: Tuple[GroupRule, ...]

    def for_dpid(self, dpid: int) -> Tuple[List[FlowRule], List[GroupRule]]:
        """The flows and groups one switch needs."""
        return ([f for f in self.flows if f.dpid == dpid],
                [g for g in self.groups if g.dpid == dpid])

    def counts(self) -> Dict[int, int]:
        """Number of flow entries per dpid (what a switch holds once installed)."""
        out: Dict[int, int] = {}
        for f in self.flows:
            out[f.dpid] = out.get(f.dpid, 0) + 1
        return out


def table_miss(dpid: int) -> FlowRule:
    """Priority-0 entry sending unmatched packets to the controller, where they are counted."""
    return FlowRule(dpid, PRIORITY_MISS, (), OFPP_CONTROLLER)


def bcube_rules(topo: Topology) -> RuleSet:
    """Each level-l switch forwards by destination MAC only among its n level-l host ports."""
    flows = []
    for link in topo.links:
        if not topo.is_host(link.lower):
            continue
        sw = topo.node(link.upper)
        mac = topo.node(link.lower).interface(link.level).mac
        flows.append(FlowRule(sw.dpid, PRIORITY_HOST,
                              (("eth_type", ETH_TYPE_IPV4), ("eth_dst", mac)), link.upper_port))
    flows += [table_miss(sw.dpid) for sw in topo.switches]
    return RuleSet(tuple(flows), ())


def live_links(topo: Topology, failed: Sequence[Link] = ()):
    """The topology's links but the failed ones."""
    gone = set(failed)
    return [l for l in topo.links if (l.lower, l.upper) not in gone]


def hosts_below(topo: Topology, failed: Sequence[Link] = ()) -> Dict[str, Dict[int, List[str]]]:
    """For every switch, the hosts reachable downwards through each of its live down ports."""
    down: Dict[str, List[Tuple[int, str]]] = {s.name: [] for s in topo.switches}
    for link in live_links(topo, failed):
        down[link.upper].append((link.upper_port, link.lower))
    memo: Dict[str, List[str]] = {}

    def below(name: str) -> List[str]:
        if topo.is_host(name):
            return [name]
        if name not in memo:
            memo[name] = [h for _, child in down[name] for h in below(child)]
        return memo[name]

    return {s: {port: below(child) for port, child in children} for s, children in down.items()}


def ecmp_width(ways: int) -> int:
    """Port bits a switch with `ways` up ports hashes: enough for every port, one more when `ways` is not a power
    of two (so the modulo's bias is small), at most ECMP_TIER_BITS."""
    width = max(1, (ways - 1).bit_length()) + (1 if ways & (ways - 1) else 0)
    return min(width, ECMP_TIER_BITS)


def ecmp_bits(level: int, ways: int) -> Tuple[int, int]:
    """(shift, mask) of the port bits a level-`level` switch with `ways` up ports hashes."""
    return ECMP_FIRST_BIT + ECMP_TIER_BITS * level, (1 << ecmp_width(ways)) - 1


def ecmp_choice(level: int, ways: int, src_port: int, dst_port: int) -> int:
    """Which of a level-`level` switch's `ways` up ports (in port order) a TCP segment with these ports takes."""
    shift, mask = ecmp_bits(level, ways)
    return (((src_port >> shift) & mask) ^ ((dst_port >> shift) & mask)) % ways


def network_number(host) -> int:
    """A host's number in its network (its address's host part less one): the same in every job's view of it."""
    return (int(ipaddress.IPv4Address(host.ip)) & 0xFFFF) - 1


def dmodk_choice(level: int, ways: int, number: int) -> int:
    """Which of a level-`level` switch's `ways` up ports (in port order) D-mod-k takes towards host `number`: its
    level-th digit in base `ways` (the edge by its slot, the aggregation by its edge switch, on a Fat-Tree)."""
    return number // ways ** level % ways


def dmodk_rule(sw, ups: List[int], host, priority: int, failover: bool = False) -> FlowRule:
    """The one rule sending every IPv4 packet for `host` up the port dmodk_choice picks (with failover, to that
    port's fast-failover group)."""
    port = ups[dmodk_choice(sw.level, len(ups), network_number(host))]
    return FlowRule(sw.dpid, priority, (("eth_type", ETH_TYPE_IPV4), ("ipv4_dst", host.ip)),
                    None if failover else port, ECMP_GROUP + port if failover else None)


def ecmp_rules(sw, ups: List[int], failover: bool = False, priority: int = PRIORITY_ECMP,
               dst: Tuple[Tuple[str, object], ...] = (), tier: Optional[int] = None) -> List[FlowRule]:
    """One rule per protocol (TCP, UDP) and pair of hashed source and destination port bits, sending it up the
    port ecmp_choice picks (with failover, to that port's fast-failover group); dst narrows them to one host; tier:
    which port bits to hash (default: the switch's level)."""
    level = sw.level if tier is None else tier
    shift, mask = ecmp_bits(level, len(ups))
    rules = []
    for proto, (sport, dport) in L4.items():
        for a in range(mask + 1):
            for b in range(mask + 1):
                src, dst_bits = a << shift, b << shift
                match = (("eth_type", ETH_TYPE_IPV4),) + dst + (("ip_proto", proto),
                         (sport, (src, mask << shift)), (dport, (dst_bits, mask << shift)))
                port = ups[ecmp_choice(level, len(ups), src, dst_bits)]
                rules.append(FlowRule(sw.dpid, priority, match, None if failover else port,
                                      ECMP_GROUP + port if failover else None))
    return rules


def ff_group(dpid: int, group_id: int, buckets: Sequence[Tuple[int, int]]) -> GroupRule:
    """A fast-failover group from (watched port, output) buckets."""
    return GroupRule(dpid, group_id, tuple(w for w, _ in buckets), "ff", tuple(o for _, o in buckets))


def reachable(topo: Topology, failed: Sequence[Link] = (),
              below: Optional[Dict[str, Dict[int, List[str]]]] = None) -> Dict[str, FrozenSet[str]]:
    """For every switch, the hosts it reaches over the live links going up, then down (up/down routing); below:
    hosts_below for the same links, where the caller has it."""
    below = below if below is not None else hosts_below(topo, failed)
    ups: Dict[str, List[str]] = {s.name: [] for s in topo.switches}
    for link in live_links(topo, failed):
        if not topo.is_host(link.lower):
            ups[link.lower].append(link.upper)
    reach: Dict[str, FrozenSet[str]] = {}
    above: Dict[Tuple[str, ...], FrozenSet[str]] = {}  # the union of some switches' reach, once per set of them

    def reaches(name: str) -> FrozenSet[str]:
        if name not in reach:
            key = tuple(sorted(ups[name]))
            if key not in above:
                above[key] = frozenset().union(*(reaches(u) for u in key))
            here = {h for hosts in below[name].values() for h in hosts}
            reach[name] = above[key] if here <= above[key] else above[key] | here
        return reach[name]
    for sw in topo.switches:
        reaches(sw.name)
    return reach


def up_down_rules(topo: Topology, failed: Sequence[Link] = (), failover: bool = False) -> RuleSet:
    """Loop-free up/down routing for trees, stars and Fat-Trees over the live links. Where a switch has several up
    ports, TCP and UDP are spread over them by their ports (ecmp_choice) and other IPv4 traffic by a select
    group, or with the topology's routing dmodk every packet by its destination (dmodk_choice); a host some up ports
    no longer reach goes up the others. With failover, fast-failover groups keep
    every host reachable in the data plane when any one more link fails: up another port; down through a sibling
    that goes up another way (from above) or back where it came from (from below)."""
    flows: List[FlowRule] = []
    groups: List[GroupRule] = []
    live = live_links(topo, failed)
    below = hosts_below(topo, failed)
    up_ports: Dict[str, List[Tuple[int, str]]] = {s.name: [] for s in topo.switches}
    child: Dict[Tuple[str, int], str] = {}
    for link in live:
        child[(link.upper, link.upper_port)] = link.lower
        if not topo.is_host(link.lower):
            up_ports[link.lower].append((link.lower_port, link.upper))
    reach = reachable(topo, failed, below)

    def can_bounce(sw: str, port: int) -> bool:
        """Whether the switch below this port could send a packet up another way."""
        lower = child[(sw, port)]
        return not topo.is_host(lower) and len(up_ports[lower]) > 1

    for sw in topo.switches:
        flows_down, groups_down = down_rules(topo, sw, below[sw.name], failover, can_bounce)
        flows_up, groups_up = up_rules(topo, sw, sorted(up_ports[sw.name]), below[sw.name], reach, failover)
        flows += flows_down + flows_up + [table_miss(sw.dpid)]
        groups += groups_down + groups_up
    return RuleSet(tuple(flows), tuple(groups))


def down_rules(topo: Topology, sw, below: Dict[int, List[str]], failover: bool, can_bounce):
    """A switch's rules towards the hosts below each of its down ports (with failover, through a sibling that
    bounces up another way, or back where the packet came from): (flows, groups)."""
    flows: List[FlowRule] = []
    groups: List[GroupRule] = []
    ipv4 = (("eth_type", ETH_TYPE_IPV4),)
    downs = sorted(below)
    bounce_ports = [p for p in downs if can_bounce(sw.name, p)]
    for port in downs:
        siblings = [p for p in bounce_ports if p != port] if failover and can_bounce(sw.name, port) else []
        if siblings:
            groups.append(ff_group(sw.dpid, DOWN_GROUP + port, [(p, p) for p in [port] + siblings]))
        for name in below[port]:
            dst = (("ipv4_dst", topo.node(name).ip),)
            flows.append(FlowRule(sw.dpid, PRIORITY_HOST, ipv4 + dst, None if siblings else port,
                                  DOWN_GROUP + port if siblings else None))
            for other in siblings:
                flows.append(FlowRule(sw.dpid, PRIORITY_BACK, (("in_port", other),) + ipv4 + dst,
                                      group=BACK_GROUP + 256 * port + other))
        for other in siblings:
            groups.append(ff_group(sw.dpid, BACK_GROUP + 256 * port + other,
                                   [(port, port), (other, OFPP_IN_PORT)]))
    return flows, groups


def up_rules(topo: Topology, sw, ups: List[Tuple[int, str]], below: Dict[int, List[str]],
             reach: Dict[str, frozenset], failover: bool):
    """A switch's rules up: hosts some up ports no longer reach go up the others, every other packet up any port
    (ECMP by TCP/UDP ports, a select group, D-mod-k by destination; with failover, fast-failover groups):
    (flows, groups)."""
    flows: List[FlowRule] = []
    groups: List[GroupRule] = []
    ipv4 = (("eth_type", ETH_TYPE_IPV4),)
    ports = [p for p, _ in ups]
    everyone = topo.hosts + (topo.bystanders if topo.routing == "dmodk" else ())
    elsewhere = sorted({h.name for h in everyone} - {h for hs in below.values() for h in hs},
                       key=lambda n: topo.node(n).index)
    for name in elsewhere:
        via = [p for p, u in ups if name in reach[u]]
        if topo.routing == "dmodk" and len(via) > 1:
            spare = failover and via == ports
            flows.append(dmodk_rule(sw, via, topo.node(name), PRIORITY_ECMP if via == ports else PRIORITY_AVOID,
                                    spare))
        elif via and via != ports:
            dst = (("ipv4_dst", topo.node(name).ip),)
            if len(via) == 1:
                flows.append(FlowRule(sw.dpid, PRIORITY_AVOID, ipv4 + dst, via[0]))
            else:
                flows += ecmp_rules(sw, via, priority=PRIORITY_AVOID, dst=dst)
                flows.append(FlowRule(sw.dpid, PRIORITY_AVOID - 1, ipv4 + dst, via[0]))
    if len(ports) == 1:
        flows.append(FlowRule(sw.dpid, PRIORITY_UP, ipv4, ports[0]))
    elif len(ports) > 1:
        if topo.routing != "dmodk":
            flows += ecmp_rules(sw, ports, failover)
        groups.append(GroupRule(sw.dpid, UP_GROUP, tuple(ports)))
        flows.append(FlowRule(sw.dpid, PRIORITY_UP, ipv4, group=UP_GROUP))
        if failover:
            for port in ports:
                others = [p for p in ports if p != port]
                groups.append(ff_group(sw.dpid, ECMP_GROUP + port, [(p, p) for p in [port] + others]))
                groups.append(ff_group(sw.dpid, BOUNCE_GROUP + port, [(p, p) for p in others]))
                flows.append(FlowRule(sw.dpid, PRIORITY_BOUNCE, (("in_port", port),) + ipv4,
                                      group=BOUNCE_GROUP + port))
    return flows, groups


def host_attachments(topo: Topology) -> Dict[str, Tuple[str, int]]:
    """Each host's switch on its first NIC (level 0) and that switch's port towards it."""
    return {host: at for (host, level), at in interface_attachments(topo).items() if level == 0}


def interface_attachments(topo: Topology) -> Dict[Tuple[str, int], Tuple[str, int]]:
    """(host, level) -> the switch that host's level-`level` NIC joins and that switch's port towards it."""
    return {(l.lower, l.level): (l.upper, l.upper_port) for l in topo.links if topo.is_host(l.lower)}


def shortest_next_hops(topo: Topology, failed: Sequence[Link] = ()) -> Dict[str, Dict[str, Tuple[int, List[int]]]]:
    """For every switch that hosts hang from (a destination) and every switch that reaches it over the live switch
    links: (its hop distance, its ports on a shortest path there, ascending: the equal-cost next hops)."""
    gone = set(failed)
    ports: Dict[str, List[Tuple[int, str]]] = {s.name: [] for s in topo.switches}
    for l in topo.links:
        if not topo.is_host(l.lower) and (l.lower, l.upper) not in gone:
            ports[l.lower].append((l.lower_port, l.upper))
            ports[l.upper].append((l.upper_port, l.lower))
    out: Dict[str, Dict[str, Tuple[int, List[int]]]] = {}
    for dest in sorted({sw for sw, _ in interface_attachments(topo).values()}):
        distance, frontier = {dest: 0}, [dest]
        while frontier:
            nxt = []
            for here in frontier:
                for _, other in ports[here]:
                    if other not in distance:
                        distance[other] = distance[here] + 1
                        nxt.append(other)
            frontier = nxt
        out[dest] = {sw: (d, sorted(p for p, n in ports[sw] if distance.get(n) == d - 1))
                     for sw, d in distance.items()}
    return out


def graph_tier(distance: int) -> int:
    """Which port bits a switch `distance` hops from the destination hashes: a path's switches each hash other bits,
    so their choices are independent (distance falls by one every hop)."""
    return (distance - 1) % (16 // ECMP_TIER_BITS)


def shortest_path_rules(topo: Topology, failed: Sequence[Link] = ()) -> RuleSet:
    """Loop-free routing for any graph of switches: every switch sends a host's packets to a neighbour one hop
    closer to that host's switch (distance falls every hop, so no loop), TCP and UDP spread over the equal-cost
    neighbours by their ports (ecmp_choice at graph_tier), other IPv4 to the first; no backup paths in the data
    plane: a link down is the controller's reroute."""
    hops = shortest_next_hops(topo, failed)
    attached = interface_attachments(topo)
    flows: List[FlowRule] = []
    ipv4 = (("eth_type", ETH_TYPE_IPV4),)
    for sw in topo.switches:
        for intf in (i for host in topo.hosts + topo.bystanders for i in host.interfaces):
            dst = (("ipv4_dst", intf.ip),)
            edge, port = attached[(intf.host, intf.level)]
            if edge == sw.name:
                flows.append(FlowRule(sw.dpid, PRIORITY_HOST, ipv4 + dst, port))
                continue
            distance, ways = hops[edge].get(sw.name, (0, []))
            if len(ways) > 1:
                flows += ecmp_rules(sw, ways, priority=PRIORITY_HOST, dst=dst, tier=graph_tier(distance))
            if ways:
                flows.append(FlowRule(sw.dpid, PRIORITY_HOST - 1, ipv4 + dst, ways[0]))
        flows.append(table_miss(sw.dpid))
    return RuleSet(tuple(flows), ())


def compute_rules(topo: Topology, failed: Sequence[Link] = (), failover: bool = False) -> RuleSet:
    """The proactive rule set for any supported topology with these links down; with failover, backup paths in
    the data plane (fast-failover groups) where the topology has them (up/down routing's)."""
    if topo.kind == "bcube":
        return bcube_rules(topo)
    if topo.graph:
        return shortest_path_rules(topo, failed)
    return up_down_rules(topo, failed, failover)


def rules_view(topo: Topology, failover: bool = True) -> dict:
    """Every switch's proactive rules as data (`dmlbed rules --json`): per switch, sorted by level and name, its
    groups (select, and fast-failover with failover, as the controller installs by default) and its flows by falling
    priority."""
    rules = compute_rules(topo, failover=failover)
    out = []
    for sw in sorted(topo.switches, key=lambda s: (s.level, s.name)):
        flows, groups = rules.for_dpid(sw.dpid)
        out.append({"switch": sw.name, "dpid": sw.dpid_hex, "level": sw.level, "role": sw.role,
                    "groups": [{"group_id": g.group_id, "type": g.kind, "ports": list(g.ports),
                                **({"outputs": ["IN_PORT" if o == OFPP_IN_PORT else o for o in g.outs]}
                                   if g.outs is not None else {})} for g in groups],
                    "flows": [{"priority": f.priority, "match": f.fields(),
                               "action": ("CONTROLLER" if f.out_port == OFPP_CONTROLLER else
                                          f"group:{f.group}" if f.group is not None else f"output:{f.out_port}")}
                              for f in sorted(flows, key=lambda f: -f.priority)]})
    return {"topology": topo.spec, "switches": out}
