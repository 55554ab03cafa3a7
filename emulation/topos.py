"""Mininet Topo built from a dmlbed Topology; also the `mn --custom emulation/topos.py` entry point."""

import os
import sys

from mininet.topo import Topo

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from emulation.topology import Topology, bcube, fat_tree, star, tree  # noqa: E402


class SpecTopo(Topo):
    """Hosts, switches (explicit dpids) and links of a Topology, with per-level link options."""

    def build(self, spec: Topology, bw=None):
        """spec: the dmlbed Topology; bw: Mbit/s per link level (None = unshaped)."""
        for host in spec.hosts:
            self.addHost(host.name, ip=f"{host.ip}/16", mac=host.interfaces[0].mac)
        for sw in spec.switches:
            self.addSwitch(sw.name, dpid=sw.dpid_hex)
        for link in spec.links:
            opts = {"bw": bw[link.level]} if bw else {}
            if spec.is_host(link.lower):
                intf = spec.node(link.lower).interface(link.level)
                opts.update(intfName1=intf.name, addr1=intf.mac)
            self.addLink(link.lower, link.upper, port1=link.lower_port, port2=link.upper_port, **opts)


topos = {
    "bcube": lambda n=3, k=2: SpecTopo(spec=bcube(int(n), int(k))),
    "fattree": lambda k=4: SpecTopo(spec=fat_tree(int(k))),
    "star": lambda n=9: SpecTopo(spec=star(int(n))),
    "tree": lambda *fanouts: SpecTopo(spec=tree(tuple(int(f) for f in fanouts) or (3, 2, 2))),
}
