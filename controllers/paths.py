"""Follow a packet through host routes and switch rules to check every path (pure)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from controllers.flow_rules import ETH_TYPE_IPV4, IP_PROTO_TCP, L4, OFPP_CONTROLLER, OFPP_IN_PORT, Link, RuleSet
from emulation.core.addressing import HostConfig
from emulation.core.topology import Topology

MAX_HOPS = 64


@dataclass
class PacketPaths:
    """Every path a packet can take (one per ECMP choice) and what went wrong on any of them."""

    paths: List[List[str]] = field(default_factory=list)
    problems: List[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every branch was delivered."""
        return bool(self.paths) and not self.problems


def host_egress(cfg: HostConfig, dst_ip: str) -> Optional[Tuple[str, str]]:
    """(device, next-hop ip) a host uses for dst_ip: /32 routes first, then connected subnets."""
    for r in cfg.routes:
        if r.dst == dst_ip:
            return r.dev, r.via or dst_ip
    dst = ipaddress.ip_address(dst_ip)
    for dev, ip, prefix in cfg.addresses:
        if dst in ipaddress.ip_network(f"{ip}/{prefix}", strict=False):
            return dev, dst_ip
    return None


def arp_lookup(cfg: HostConfig, dev: str, ip: str) -> Optional[str]:
    """The static MAC for ip on dev, or None (a real host would broadcast an ARP request)."""
    for a in cfg.arp:
        if a.dev == dev and a.ip == ip:
            return a.mac
    return None


def matches(fields: Dict[str, object], packet: Dict[str, object]) -> bool:
    """True when every match field equals the packet's value (bitwise under the mask for a (value, mask) pair);
    a field the packet does not carry never matches."""
    for k, v in fields.items():
        if isinstance(v, tuple):
            if packet.get(k) is None or packet[k] & v[1] != v[0]:
                return False
        elif packet.get(k) != v:
            return False
    return True


class PacketWalk:
    """One packet followed through the rules and the hosts' routes: every branch, the paths that reach dst_ip and
    the problems met on the others."""

    def __init__(self, topo: Topology, rules: RuleSet, configs: Dict[str, HostConfig], dst_ip: str,
                 l4: Dict[str, object], failed: Sequence[Link]):
        self.topo, self.configs, self.dst_ip, self.l4 = topo, configs, dst_ip, l4
        self.result = PacketPaths()
        gone = set(failed)
        self.down_ports = {(n, p) for l in topo.links if (l.lower, l.upper) in gone
                           for n, p in ((l.lower, l.lower_port), (l.upper, l.upper_port))}
        self.ports_by_intf = {i.name: (h.name, i.port) for h in topo.hosts for i in h.interfaces}
        self.flows_by_dpid: Dict[int, list] = {}
        for f in sorted(rules.flows, key=lambda f: -f.priority):
            self.flows_by_dpid.setdefault(f.dpid, []).append(f)
        self.groups = {(g.dpid, g.group_id): g for g in rules.groups}

    def at_host(self, name: str, path: List[str]) -> None:
        """Follow the packet from a host (its routes and ARP), or end a path where it reaches the destination."""
        node = self.topo.node(name)
        if any(i.ip == self.dst_ip for i in node.interfaces):
            self.result.paths.append(path)
            return
        cfg = self.configs[name]
        if len(path) > 1 and not cfg.forwarding:
            self.result.problems.append(f"{'>'.join(path)}: {name} does not forward IP")
            return
        egress = host_egress(cfg, self.dst_ip)
        if egress is None:
            self.result.problems.append(f"{'>'.join(path)}: {name} has no route to {self.dst_ip}")
            return
        dev, hop_ip = egress
        mac = arp_lookup(cfg, dev, hop_ip)
        if mac is None:
            self.result.problems.append(f"{'>'.join(path)}: {name} has no ARP entry for {hop_ip} on {dev}")
            return
        _, port = self.ports_by_intf[dev]
        if (name, port) in self.down_ports:
            self.result.problems.append(f"{'>'.join(path)}: {name} sends on {dev}, whose link is down")
            return
        peer, peer_port, _ = self.topo.peer(name, port)
        packet = {"eth_type": ETH_TYPE_IPV4, "eth_dst": mac, "ipv4_dst": self.dst_ip, **self.l4}
        self.at_switch(peer, peer_port, packet, path + [peer])

    def outputs(self, dpid: int, rule, name: str, in_port: int) -> List[Tuple[int, bool]]:
        """The ports a rule sends a packet out of, each with whether the rule sends it back out of its in port on
        purpose (OFPP_IN_PORT): a select group's live ports, a fast-failover group's first live bucket (none when
        every watched port is down)."""
        if rule.group is None:
            return [(rule.out_port, False)]
        group = self.groups[(dpid, rule.group)]
        live = [(in_port, True) if o == OFPP_IN_PORT else (o, False)
                for w, o in zip(group.ports, group.outputs()) if (name, w) not in self.down_ports]
        return live[:1] if group.kind == "ff" else live

    def at_switch(self, name: str, in_port: int, packet: Dict[str, object], path: List[str],
                  seen: frozenset = frozenset()) -> None:
        """Follow the packet through a switch: its first matching rule, every branch a group offers."""
        if len(path) > MAX_HOPS or (name, in_port) in seen:
            self.result.problems.append(f"{'>'.join(path)}: forwarding loop")
            return
        seen = seen | {(name, in_port)}
        sw = self.topo.node(name)
        packet = dict(packet, in_port=in_port)
        rule = next((f for f in self.flows_by_dpid.get(sw.dpid, []) if matches(f.fields(), packet)), None)
        if rule is None or rule.out_port == OFPP_CONTROLLER:
            self.result.problems.append(f"{'>'.join(path)}: table miss at {name} (PacketIn)")
            return
        outs = self.outputs(sw.dpid, rule, name, in_port)
        if not outs:
            self.result.problems.append(f"{'>'.join(path)}: every port of {name}'s group {rule.group} is down")
        for out, back in outs:
            if out == in_port and not back:
                self.result.problems.append(f"{'>'.join(path)}: {name} sends back out of its in_port")
                continue
            if (name, out) in self.down_ports:
                self.result.problems.append(f"{'>'.join(path)}: {name} sends out of port {out}, whose link is down")
                continue
            peer, peer_port, _ = self.topo.peer(name, out)
            if self.topo.is_host(peer):
                if path.count(peer) > 0:
                    self.result.problems.append(f"{'>'.join(path)}: forwarding loop through {peer}")
                    continue
                self.at_host(peer, path + [peer])
            else:
                self.at_switch(peer, peer_port, packet, path + [peer], seen)


def follow_packet(topo: Topology, rules: RuleSet, configs: Dict[str, HostConfig],
          src: str, dst_ip: str, tcp_ports: Optional[Tuple[int, int]] = None, failed: Sequence[Link] = (),
          proto: int = IP_PROTO_TCP) -> PacketPaths:
    """Send an IPv4 packet from host src to dst_ip and explore every forwarding branch: a TCP segment (or a
    datagram of `proto`) with these (source, destination) ports when given, whose ECMP choices are then known,
    else a packet without ports. Failed links carry nothing: a fast-failover group takes its first bucket whose
    watched port is up."""
    names = L4[proto]
    l4 = {"ip_proto": proto, names[0]: tcp_ports[0], names[1]: tcp_ports[1]} if tcp_ports else {}
    walk = PacketWalk(topo, rules, configs, dst_ip, l4, failed)
    walk.at_host(src, [src])
    return walk.result
