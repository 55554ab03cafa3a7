"""Proactive OpenFlow 1.3 rules computed from a topology (pure: no Ryu, no switch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from emulation.core.topology import Topology

OFPP_CONTROLLER = 0xFFFFFFFD
ETH_TYPE_IPV4 = 0x0800
PRIORITY_HOST = 100
PRIORITY_ECMP = 20
PRIORITY_UP = 10
PRIORITY_MISS = 0
UP_GROUP = 1
IP_PROTO_TCP = 6
# ECMP over TCP ports: a switch at level L hashes bits [1 + 4L, 1 + 4L + width) of each segment's source and
# destination ports (bit 0 is skipped: Linux prefers even ports for connect()). Explicit rules instead of a
# select group, so which path a connection takes follows from its ports and is known to the fidelity report.
ECMP_FIRST_BIT = 1
ECMP_TIER_BITS = 4


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
    """A select group: each flow is hashed to one of `ports` (ECMP)."""

    dpid: int
    group_id: int
    ports: Tuple[int, ...]


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


def hosts_below(topo: Topology) -> Dict[str, Dict[int, List[str]]]:
    """For every switch, the hosts reachable downwards through each of its down ports."""
    down: Dict[str, List[Tuple[int, str]]] = {s.name: [] for s in topo.switches}
    for link in topo.links:
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


def ecmp_rules(sw, ups: List[int]) -> List[FlowRule]:
    """One rule per pair of hashed source and destination port bits, sending TCP up the port ecmp_choice picks."""
    shift, mask = ecmp_bits(sw.level, len(ups))
    rules = []
    for a in range(mask + 1):
        for b in range(mask + 1):
            src, dst = a << shift, b << shift
            match = (("eth_type", ETH_TYPE_IPV4), ("ip_proto", IP_PROTO_TCP),
                     ("tcp_src", (src, mask << shift)), ("tcp_dst", (dst, mask << shift)))
            rules.append(FlowRule(sw.dpid, PRIORITY_ECMP, match, ups[ecmp_choice(sw.level, len(ups), src, dst)]))
    return rules


def up_down_rules(topo: Topology) -> RuleSet:
    """Loop-free up/down routing for trees, stars and Fat-Trees. Where a switch has several up ports, TCP is
    spread over them by its ports (ecmp_choice) and other IPv4 traffic by a select group."""
    flows: List[FlowRule] = []
    groups: List[GroupRule] = []
    below = hosts_below(topo)
    up_ports: Dict[str, List[int]] = {s.name: [] for s in topo.switches}
    for link in topo.links:
        if not topo.is_host(link.lower):
            up_ports[link.lower].append(link.lower_port)
    for sw in topo.switches:
        for port, hosts in sorted(below[sw.name].items()):
            for name in hosts:
                ip = topo.node(name).ip
                flows.append(FlowRule(sw.dpid, PRIORITY_HOST,
                                      (("eth_type", ETH_TYPE_IPV4), ("ipv4_dst", ip)), port))
        ups = sorted(up_ports[sw.name])
        match = (("eth_type", ETH_TYPE_IPV4),)
        if len(ups) == 1:
            flows.append(FlowRule(sw.dpid, PRIORITY_UP, match, ups[0]))
        elif len(ups) > 1:
            flows += ecmp_rules(sw, ups)
            groups.append(GroupRule(sw.dpid, UP_GROUP, tuple(ups)))
            flows.append(FlowRule(sw.dpid, PRIORITY_UP, match, group=UP_GROUP))
        flows.append(table_miss(sw.dpid))
    return RuleSet(tuple(flows), tuple(groups))


def compute_rules(topo: Topology) -> RuleSet:
    """The proactive rule set for any supported topology."""
    if topo.kind == "bcube":
        return bcube_rules(topo)
    return up_down_rules(topo)


def rules_view(topo: Topology) -> dict:
    """Every switch's proactive rules as data (`dmlbed rules --json`): per switch, sorted by level and name, its
    select groups and its flows by falling priority."""
    rules = compute_rules(topo)
    out = []
    for sw in sorted(topo.switches, key=lambda s: (s.level, s.name)):
        flows, groups = rules.for_dpid(sw.dpid)
        out.append({"switch": sw.name, "dpid": sw.dpid_hex, "level": sw.level, "role": sw.role,
                    "groups": [{"group_id": g.group_id, "type": "select", "ports": list(g.ports)} for g in groups],
                    "flows": [{"priority": f.priority, "match": f.fields(),
                               "action": ("CONTROLLER" if f.out_port == OFPP_CONTROLLER else
                                          f"group:{f.group}" if f.group is not None else f"output:{f.out_port}")}
                              for f in sorted(flows, key=lambda f: -f.priority)]})
    return {"topology": topo.spec, "switches": out}
