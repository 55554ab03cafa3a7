"""`dmlbed topo SPEC`: a topology's hosts (with their addresses per level), switches and links."""

from __future__ import annotations

from emulation.commands.base import SPEC, Command
from emulation.core.topology import Topology, parse


class Topo(Command):
    name, help = "topo", "print a topology"
    description = ("Lists the hosts with their address and MAC on every link level, the switches with their level, "
                   "role and datapath id, and the links with their ports; --json gives the same as data.")
    own = (SPEC,)

    def prepare(self, args):
        return parse(args.spec)

    def execute(self, topo, args):
        data = topo.to_dict()
        data["counts"] = {"hosts": len(topo.hosts), "switches": len(topo.switches), "links": len(topo.links),
                          "switch_ports": topo.switch_ports(),
                          "fat_tree_switches_same_hosts": topo.fat_tree_switches_for_same_hosts()}
        return topo, data

    def show(self, result):
        print_topo(result[0])

    def as_json(self, result):
        return result[1]


def print_topo(topo: Topology) -> None:
    """Human-readable topology listing."""
    n = topo.switch_ports()
    print(f"{topo.spec}: {len(topo.hosts)} hosts, {len(topo.switches)} switches, {len(topo.links)} links, "
          f"{topo.levels} link level(s)")
    print(f"switches: {len(topo.switches)} here vs {topo.fat_tree_switches_for_same_hosts():g} in a "
          f"3-layer Fat-Tree of {n}-port switches for {len(topo.hosts)} servers (5N/n)")
    print("\nhosts:")
    for h in topo.hosts:
        addrs = "  ".join(f"L{i.level} {i.name} {i.ip} {i.mac}" for i in h.interfaces)
        print(f"  {h.name:<6} coords={','.join(map(str, h.coords)):<10} {addrs}")
    print("\nswitches:")
    for s in topo.switches:
        print(f"  {s.name:<8} level={s.level} role={s.role:<11} dpid={s.dpid_hex}")
    print("\nlinks:")
    for link in topo.links:
        print(f"  L{link.level} {link.lower}:{link.lower_port} <-> {link.upper}:{link.upper_port}")


COMMAND = Topo()
