"""Proactive OpenFlow 1.3 rules computed from a topology (pure: no Ryu, no switch)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from emulation.spec.topology import Topology

OFPP_CONTROLLER = 0xFFFFFFFD
ETH_TYPE_IPV4 = 0x0800
PRIORITY_HOST = 100
PRIORITY_UP = 10
PRIORITY_MISS = 0
UP_GROUP = 1


@dataclass(frozen=True)
class FlowRule:
    """One flow entry: match fields (Ryu OFPMatch names) -> output port or select group."""

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


def up_down_rules(topo: Topology) -> RuleSet:
    """Loop-free up/down routing for trees, stars and Fat-Trees; ECMP groups over the up ports."""
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
            groups.append(GroupRule(sw.dpid, UP_GROUP, tuple(ups)))
            flows.append(FlowRule(sw.dpid, PRIORITY_UP, match, group=UP_GROUP))
        flows.append(table_miss(sw.dpid))
    return RuleSet(tuple(flows), tuple(groups))


def compute_rules(topo: Topology) -> RuleSet:
    """The proactive rule set for any supported topology."""
    if topo.kind == "bcube":
        return bcube_rules(topo)
    return up_down_rules(topo)
