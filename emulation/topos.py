"""Mininet Topo built from a dmlbed Topology; also the `mn --custom emulation/topos.py` entry point."""

import os
import sys

from mininet.topo import Topo

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from emulation.topology import Topology, bcube, fat_tree, star, tree  # noqa: E402


class SpecTopo(Topo):
    """Hosts, switches (explicit dpids) and links of a Topology, with per-level link options."""

    def build(self, spec: Topology, bw=None, shaper_boxes=False):
        """spec: the dmlbed Topology; bw: Mbit/s per link level (None = unshaped);
        shaper_boxes: run switch-to-switch links through a bridging namespace x<i> that shapes them."""
        for host in spec.hosts:
            self.addHost(host.name, ip=f"{host.ip}/16", mac=host.interfaces[0].mac)
        for sw in spec.switches:
            self.addSwitch(sw.name, dpid=sw.dpid_hex)
        for i, link in enumerate(spec.links):
            opts = {"bw": bw[link.level]} if bw else {}
            if spec.is_host(link.lower):
                intf = spec.node(link.lower).interface(link.level)
                self.addLink(link.lower, link.upper, port1=link.lower_port, port2=link.upper_port,
                             intfName1=intf.name, addr1=intf.mac, **opts)
            elif shaper_boxes:
                box = shaper_name(i)
                self.addHost(box, ip=None)
                self.addLink(link.lower, box, port1=link.lower_port, port2=0, **opts)
                self.addLink(box, link.upper, port1=1, port2=link.upper_port, **opts)
            else:
                self.addLink(link.lower, link.upper, port1=link.lower_port, port2=link.upper_port, **opts)


def shaper_name(link_index: int) -> str:
    """Name of the bridging namespace that shapes switch-to-switch link number link_index."""
    return f"x{link_index}"


topos = {
    "bcube": lambda n=3, k=2: SpecTopo(spec=bcube(int(n), int(k))),
    "fattree": lambda k=4: SpecTopo(spec=fat_tree(int(k))),
    "star": lambda n=9: SpecTopo(spec=star(int(n))),
    "tree": lambda *fanouts: SpecTopo(spec=tree(tuple(int(f) for f in fanouts) or (3, 2, 2))),
}
