"""The data a topology is made of: hosts, interfaces, switches, links and the Topology holding them (pure)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

MAX_HOSTS = 131072  # the flow model and theory answer at this size; the emulated network has its own limits
PREFIX_LEN = 16

# The top byte of a dpid says which kind of switch it is, so dpids stay unique
# across roles and can be read by eye in `ovs-ofctl` output.
ROLE_CODES = {"bcube": 0x0B, "star": 0x05, "tree": 0x07,
              "edge": 0x0E, "aggregation": 0x0A, "core": 0x0C, "leaf": 0x1E, "spine": 0x5E, "switch": 0xF1,
              "torus": 0x70, "jellyfish": 0x1F, "rail": 0x7A}


class TopologyError(ValueError):
    """A topology spec or parameter is invalid; the message names it and the valid range."""


@dataclass(frozen=True)
class Interface:
    """One network interface of a host: its link level, name, addresses and port index."""

    host: str
    level: int
    port: int
    name: str
    ip: str
    mac: str


@dataclass(frozen=True)
class Host:
    """A server; coords are its BCube digits, fat-tree (pod, edge, slot) or tree path."""

    name: str
    index: int
    coords: Tuple[int, ...]
    interfaces: Tuple[Interface, ...]

    def interface(self, level: int) -> Interface:
        """The host's interface on link level `level` (BCube) or its only interface."""
        for intf in self.interfaces:
            if intf.level == level:
                return intf
        if len(self.interfaces) == 1:
            return self.interfaces[0]
        raise KeyError(f"{self.name} has no level-{level} interface")

    @property
    def ip(self) -> str:
        """The host's primary (level-0) address."""
        return self.interfaces[0].ip


@dataclass(frozen=True)
class Switch:
    """A switch with an explicit datapath id, its level and role in the topology."""

    name: str
    dpid: int
    level: int
    index: int
    role: str

    @property
    def dpid_hex(self) -> str:
        """The dpid as the 16-digit hex string Mininet and OVS expect."""
        return format(self.dpid, "016x")


@dataclass(frozen=True)
class Link:
    """A link from a lower node (host or switch) to the switch above it, with port numbers."""

    lower: str
    lower_port: int
    upper: str
    upper_port: int
    level: int


@dataclass(frozen=True)
class Topology:
    """A complete topology: nodes, links and the spec string it came from."""

    kind: str
    params: Tuple[int, ...]
    hosts: Tuple[Host, ...]
    switches: Tuple[Switch, ...]
    links: Tuple[Link, ...]
    bystanders: Tuple[Host, ...] = ()  # hosts of the network that are not this job's (see job_view)
    source: str = ""  # the file a topology was read from (its spec), empty for a generated family
    graph: bool = False  # switch links form any graph (torus, Jellyfish, such a file): shortest-path routing
    routing: str = "ecmp"  # up/down routing's choice among several up ports: ecmp (hashed ports) | dmodk (destination)
    _by_name: Dict[str, object] = field(default=None, compare=False, repr=False, hash=False)

    def __post_init__(self):
        index = {h.name: h for h in self.bystanders}
        index.update({h.name: h for h in self.hosts})
        index.update({s.name: s for s in self.switches})
        object.__setattr__(self, "_by_name", index)

    @property
    def spec(self) -> str:
        """The short spec string, e.g. 'bcube:3,2'; a topology file's absolute path."""
        return self.source or f"{self.kind}:{','.join(str(p) for p in self.params)}"

    @property
    def levels(self) -> int:
        """Number of link levels (k for BCube, 3 for Fat-Tree, len(fanouts) for trees)."""
        return 1 + max(link.level for link in self.links)

    def node(self, name: str):
        """The host or switch called `name`."""
        return self._by_name[name]

    def is_host(self, name: str) -> bool:
        """True when `name` is a host."""
        return isinstance(self._by_name.get(name), Host)

    def switch_by_dpid(self, dpid: int) -> Switch:
        """The switch with datapath id `dpid`."""
        for sw in self.switches:
            if sw.dpid == dpid:
                return sw
        raise KeyError(f"no switch with dpid {dpid:#x}")

    def links_of(self, name: str) -> List[Link]:
        """Every link that has `name` at one end."""
        return [l for l in self.links if name in (l.lower, l.upper)]

    def peer(self, name: str, port: int) -> Tuple[str, int, Link]:
        """The node and port at the other end of `name`'s port `port`."""
        for link in self.links:
            if link.lower == name and link.lower_port == port:
                return link.upper, link.upper_port, link
            if link.upper == name and link.upper_port == port:
                return link.lower, link.lower_port, link
        raise KeyError(f"{name} has no port {port}")

    def host_by_ip(self, ip: str) -> Optional[Host]:
        """The host owning address `ip`, or None."""
        for host in self.hosts:
            if any(i.ip == ip for i in host.interfaces):
                return host
        return None

    def fat_tree_switches_for_same_hosts(self) -> float:
        """Switches a 3-layer Fat-Tree of n-port switches needs for as many servers (5N/n)."""
        return 5 * len(self.hosts) / self.switch_ports()

    def ports_on_switches(self) -> int:
        """Switch ports of every switch together: one per host link, two per switch-to-switch link."""
        return sum(1 + (not self.is_host(link.lower)) for link in self.links)

    def switch_ports(self) -> int:
        """The largest number of ports used on any switch (n for BCube)."""
        counts: Dict[str, int] = {}
        for link in self.links:
            counts[link.upper] = counts.get(link.upper, 0) + 1
            if not self.is_host(link.lower):
                counts[link.lower] = counts.get(link.lower, 0) + 1
        return max(counts.values())

    def radices(self) -> List[int]:
        """The hierarchy digits of the hosts, least significant first (hosts are numbered in this order):
        BCube n per level; Fat-Tree slot, edge switch, pod; tree fanouts above 1; leaf-spine hosts per leaf,
        leaves; star the host count."""
        if self.kind == "bcube":
            n, k = self.params
            return [n] * k
        if self.kind == "fattree":
            k = self.params[0]
            return [k // 2, k // 2, k]
        if self.kind == "tree":
            return [f for f in self.params if f > 1] or [1]
        if self.kind == "leafspine":
            leaves, per_leaf, _ = self.params
            return [f for f in (per_leaf, leaves) if f > 1] or [1]
        return [len(self.hosts)]

    def oversubscription(self, bw: Sequence[float]) -> Optional[float]:
        """A leaf's host-facing over its spine-facing capacity at these per-level rates (leaf-spine only)."""
        if self.kind != "leafspine":
            return None
        _, per_leaf, spines = self.params
        return per_leaf * bw[0] / (spines * bw[min(1, len(bw) - 1)])

    def to_dict(self) -> dict:
        """A JSON-ready description of the topology."""
        return {
            "spec": self.spec, "kind": self.kind, "params": list(self.params), "source": self.source,
            "graph": self.graph, "routing": self.routing,
            "hosts": [asdict(h) for h in self.hosts],
            "switches": [dict(asdict(s), dpid_hex=s.dpid_hex) for s in self.switches],
            "links": [asdict(l) for l in self.links],
        }

    def to_json(self) -> str:
        """Serialize to JSON (from_json inverts it)."""
        return json.dumps(self.to_dict(), indent=1)


def from_json(text: str) -> Topology:
    """Rebuild a topology from to_json output."""
    data = json.loads(text)
    hosts = tuple(Host(h["name"], h["index"], tuple(h["coords"]),
                       tuple(Interface(**i) for i in h["interfaces"])) for h in data["hosts"])
    switches = tuple(Switch(s["name"], s["dpid"], s["level"], s["index"], s["role"])
                     for s in data["switches"])
    links = tuple(Link(**l) for l in data["links"])
    return Topology(data["kind"], tuple(data["params"]), hosts, switches, links, source=data.get("source", ""),
                    graph=data.get("graph", False), routing=data.get("routing", "ecmp"))


def host_address(index: int, level: int) -> Tuple[str, str]:
    """The (ip, mac) of host `index`'s level-`level` interface: 10.L.x.y and 02:00:LL:..."""
    n = index + 1
    ip = f"10.{level}.{n >> 8}.{n & 0xFF}"
    mac = f"02:00:{level:02x}:{(n >> 16) & 0xFF:02x}:{(n >> 8) & 0xFF:02x}:{n & 0xFF:02x}"
    return ip, mac


def make_host(index: int, coords: Tuple[int, ...], levels: Tuple[int, ...]) -> Host:
    """A host named h<index> with one interface per level in `levels`."""
    name = f"h{index}"
    intfs = []
    for port, level in enumerate(levels):
        ip, mac = host_address(index, level)
        intfs.append(Interface(name, level, port, f"{name}-eth{port}", ip, mac))
    return Host(name, index, tuple(coords), tuple(intfs))


def make_switch(name: str, role: str, level: int, index: int) -> Switch:
    """A switch whose dpid encodes role, level and index."""
    dpid = (ROLE_CODES[role] << 48) | (level << 32) | (index + 1)
    return Switch(name, dpid, level, index, role)


def _check_hosts(count: int, what: str) -> None:
    if count > MAX_HOSTS:
        raise TopologyError(f"{what} has {count} hosts; at most {MAX_HOSTS} are supported")
