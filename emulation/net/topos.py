"""Mininet Topo built from a dmlbed Topology; also Mininet's `mn` with dmlbed's topologies: `dmlbed-mn --topo
bcube,3,2 ...` (main below), or `mn --custom emulation/net/topos.py` where dmlbed is importable (PYTHONPATH=.)."""

import runpy
import shutil
import sys

from mininet.node import Host
from mininet.topo import Topo

from emulation.core.addressing import all_host_configs, config_commands
from emulation.core.link_rates import rate_of
from emulation.core.shaping import offloads_off_command
from emulation.core.topology import Topology, bcube, fat_tree, jellyfish, leaf_spine, rail, star, torus, tree
from emulation.net.nodes import ConnectCheckedController


class ConfiguredHost(Host):
    """A host that applies dmlbed's addresses, routes, static ARP and offload settings itself, so a
    plain `mn --custom emulation/topos.py` network is configured like dmlbed's own."""

    def config(self, dmlbed_cmds=(), **params):
        """Mininet's configuration, then dmlbed's commands."""
        result = super().config(**params)
        if dmlbed_cmds:
            self.cmd(" ; ".join(dmlbed_cmds))
        return result


class SpecTopo(Topo):
    """Hosts, switches (explicit dpids) and links of a Topology, with per-level link options."""

    def build(self, spec: Topology, bw=None, shaper_boxes=False, configure_hosts=False, host_queue=None,
              switch_queue=None, impairment=None, mtu=None, host_boxes=False, link_rates=None, boxed_links=(),
              ecn_mark=0, plain_links=()):
        """spec: the dmlbed Topology; bw: Mbit/s per link level (None = unshaped);
        shaper_boxes: run switch-to-switch links through a bridging namespace x<i> that shapes them;
        configure_hosts: hosts configure themselves (for `mn --custom`; dmlbed's own runs do it later);
        host_queue / switch_queue: HTB leaf packets at a host's egress / at switch-side queues;
        impairment: per-level netem delay/loss as the leaf of every shaped end (None: none);
        mtu: MTU of every interface of every link (None: the kernel's 1500);
        host_boxes: also run host links through a bridging namespace (its egress toward the host shapes
        switch->host, which AF_XDP transmits around on the switch's own port);
        link_rates: (lower, upper) -> Mbit/s of links shaped off their level's rate;
        boxed_links: (host, switch) links run through a bridging namespace even without host_boxes;
        ecn_mark: switch-side queues are RED marking ECN from this many packets (0: FIFOs);
        plain_links: (lower, upper) of switch-to-switch links whose switch ends are plain (AF_PACKET) ports, not
        AF_XDP ones."""
        self.add_hosts(spec, configure_hosts)
        for sw in spec.switches:
            self.addSwitch(sw.name, dpid=sw.dpid_hex)
        host_q = {"leaf_packets": host_queue} if host_queue else {}
        switch_q = {"leaf_packets": switch_queue} if switch_queue else {}
        if ecn_mark:
            switch_q["ecn_mark"] = ecn_mark
        if mtu:
            host_q, switch_q = dict(host_q, mtu=mtu), dict(switch_q, mtu=mtu)
        for i, link in enumerate(spec.links):
            opts = {"bw": rate_of(link.lower, link.upper, link.level, bw, link_rates)} if bw else {}
            netem = impairment.netem(link.level) if impairment is not None and bw else None
            # every shaped end gets netem: an end that AF_XDP transmits around never delays twice
            hq, sq = (dict(host_q, netem=netem), dict(switch_q, netem=netem)) if netem else (host_q, switch_q)
            if spec.is_host(link.lower) and (host_boxes or (link.lower, link.upper) in boxed_links):
                intf, box = spec.node(link.lower).interface(link.level), shaper_name(i)
                self.addHost(box, ip=None)
                self.addLink(link.lower, box, port1=link.lower_port, port2=0, intfName1=intf.name, addr1=intf.mac,
                             params1=hq, params2=sq, **opts)
                self.addLink(box, link.upper, port1=1, port2=link.upper_port, params1=sq, params2=sq, **opts)
            elif spec.is_host(link.lower):
                intf = spec.node(link.lower).interface(link.level)
                self.addLink(link.lower, link.upper, port1=link.lower_port, port2=link.upper_port,
                             intfName1=intf.name, addr1=intf.mac, params1=hq, params2=sq, **opts)
            elif shaper_boxes and (link.lower, link.upper) in plain_links:
                # the box shapes: a plain port would pass through its own qdisc too (AF_XDP sends around it)
                box, port, shaped = shaper_name(i), dict(sq, plain_port=True), dict(sq, **opts)
                self.addHost(box, ip=None)
                self.addLink(link.lower, box, port1=link.lower_port, port2=0, params1=port, params2=shaped)
                self.addLink(box, link.upper, port1=1, port2=link.upper_port, params1=shaped, params2=port)
            elif shaper_boxes:
                box = shaper_name(i)
                self.addHost(box, ip=None)
                self.addLink(link.lower, box, port1=link.lower_port, port2=0, params1=sq, params2=sq, **opts)
                self.addLink(box, link.upper, port1=1, port2=link.upper_port, params1=sq, params2=sq, **opts)
            else:
                self.addLink(link.lower, link.upper, port1=link.lower_port, port2=link.upper_port,
                             params1=sq, params2=sq, **opts)

    def add_hosts(self, spec: Topology, configure_hosts: bool) -> None:
        """The topology's hosts (with configure_hosts, each configuring its own addresses, routes and offloads)."""
        configs = all_host_configs(spec) if configure_hosts else {}
        for host in spec.hosts:
            opts = {}
            if configure_hosts:
                cmds = config_commands(configs[host.name])
                cmds += [offloads_off_command(i.name) for i in host.interfaces]
                opts = {"cls": ConfiguredHost, "dmlbed_cmds": cmds}
            self.addHost(host.name, ip=f"{host.ip}/16", mac=host.interfaces[0].mac, **opts)


def shaper_name(link_index: int) -> str:
    """Name of the bridging namespace that shapes switch-to-switch link number link_index."""
    return f"x{link_index}"


def _mn(spec: Topology) -> SpecTopo:
    return SpecTopo(spec=spec, configure_hosts=True)


# `sudo dmlbed-mn --topo bcube,3,2 --controller remote --link tc,bw=100 ...`
topos = {
    "bcube": lambda n=3, k=2: _mn(bcube(int(n), int(k))),
    "fattree": lambda k=4: _mn(fat_tree(int(k))),
    "star": lambda n=9: _mn(star(int(n))),
    "tree": lambda *fanouts: _mn(tree(tuple(int(f) for f in fanouts) or (3, 2, 2))),
    "leafspine": lambda leaves=4, per_leaf=4, spines=2: _mn(leaf_spine(int(leaves), int(per_leaf), int(spines))),
    "torus": lambda rows=4, cols=4, per_switch=1: _mn(torus(int(rows), int(cols), int(per_switch))),
    "jellyfish": lambda switches=8, degree=3, per_switch=2, seed=1: _mn(jellyfish(int(switches), int(degree),
                                                                                int(per_switch), int(seed))),
    "rail": lambda servers=8, rails=2, spines=1: _mn(rail(int(servers), int(rails), int(spines))),
}

# `--controller remote,...` without Mininet's telnet check (see ConnectCheckedController)
controllers = {"remote": ConnectCheckedController}


def main() -> None:
    """`dmlbed-mn ARGS`: Mininet's `mn ARGS` under this interpreter (which imports dmlbed) with this file as its
    --custom file, so `--topo bcube,3,2`, `fattree,4`, `star,9`, `tree,3,2,2`, `leafspine,4,4,2`, `torus,4,4`,
    `jellyfish,8,3,2` and `rail,8,2,1` are dmlbed's topologies."""
    mn = shutil.which("mn") or "/usr/bin/mn"
    sys.argv = [mn, "--custom", __file__, *sys.argv[1:]]
    runpy.run_path(mn, run_name="__main__")
