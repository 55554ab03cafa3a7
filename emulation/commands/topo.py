"""`dmlbed topo SPEC`: a topology's hosts (with their addresses per level), switches and links; --export FILE
writes it as a topology file."""

from __future__ import annotations

from emulation.commands.base import SPEC, Command
from emulation.core.topology import Topology, parse
from emulation.core.topology_file import check_export, write_topology
from emulation.run.options import command_option

EXPORT = command_option("export", "write the topology as a file --topo reads back (.json, .yaml or .yml), every "
                                  "switch's level and datapath id and every link's ports included")


class Topo(Command):
    name, help = "topo", "print a topology"
    description = ("Lists the hosts with their address and MAC on every link level, the switches with their level, "
                   "role and datapath id, and the links with their ports; --json gives the same as data; --export "
                   "writes a topology file to edit and give to --topo.")
    examples = (
        ("BCube(4,2): 16 hosts with two NICs each (one a level), 8 switches, every address and link",
         "bcube:4,2"),
        ("a leaf-spine of 4 leaves, 4 hosts a leaf and 2 spines, written to a file to edit and give to --topo",
         "leafspine:4,4,2 --export leafspine.json"),
        ("Fat-Tree(4) as data",
         "fattree:4 --json"),
    )
    own = (SPEC, EXPORT)

    def prepare(self, args):
        topo = parse(args.spec)
        if args.export:
            check_export(topo, args.export)  # before anything is written
        return topo

    def execute(self, topo, args):
        data = topo.to_dict()
        if args.export:
            data["exported_to"] = write_topology(topo, args.export)
        data["counts"] = {"hosts": len(topo.hosts), "switches": len(topo.switches), "links": len(topo.links),
                          "switch_ports": topo.switch_ports(),
                          "fat_tree_switches_same_hosts": topo.fat_tree_switches_for_same_hosts()}
        if topo.kind == "leafspine":
            data["counts"]["oversubscription_at_equal_rates"] = topo.oversubscription((1.0, 1.0))
        return topo, data

    def show(self, result):
        print_topo(result[0])
        if result[1].get("exported_to"):
            print(f"\nwritten: {result[1]['exported_to']} (give it to --topo)")

    def as_json(self, result):
        return result[1]


def print_topo(topo: Topology) -> None:
    """Human-readable topology listing."""
    n = topo.switch_ports()
    print(f"{topo.spec}: {len(topo.hosts)} hosts, {len(topo.switches)} switches, {len(topo.links)} links, "
          f"{topo.levels} link level(s)")
    print(f"switches: {len(topo.switches)} here vs {topo.fat_tree_switches_for_same_hosts():g} in a "
          f"3-layer Fat-Tree of {n}-port switches for {len(topo.hosts)} servers (5N/n)")
    if topo.kind == "leafspine":
        leaves, per_leaf, spines = topo.params
        print(f"oversubscription: {topo.oversubscription((1.0, 1.0)):g} at one rate on every link; a leaf's "
              f"{per_leaf} host links over its {spines} spine links, so --bw B,R gives {per_leaf}B/({spines}R) "
              f"(--bw 100,{100 * per_leaf / spines:g}: 1)")
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
