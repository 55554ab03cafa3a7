"""A running emulated network's links changed in place: a link shaped at a new rate, taken down or brought up as
a cable fails, and a host's egress shared with background flows."""

from __future__ import annotations

import re
from typing import List, Tuple

from emulation.core.addressing import all_host_configs, route_changes
from emulation.core.link_rates import rate_of
from emulation.core.shaping import shared_nic_commands, shared_nic_rate_commands
from emulation.net.kernel_probes import NetworkError
from emulation.net.topos import shaper_name


class LinkControl:
    """The link changes of EmulatedNetwork (which holds topo, net, failed, shared_nics, impairment, bw, link_rates,
    tcp and provides _boxed, _run_in and host_tcp)."""

    def _mininet_links(self, key: Tuple[str, str]) -> list:
        """The Mininet links a topology link is made of: two through its shaping namespace, else one."""
        index = next(i for i, l in enumerate(self.topo.links) if (l.lower, l.upper) == key)
        link = self.topo.links[index]
        hops = [(link.lower, shaper_name(index)), (shaper_name(index), link.upper)] if self._boxed(link) else \
            [(link.lower, link.upper)]
        return [mn_link for a, b in hops for mn_link in self.net.linksBetween(self.net.get(a), self.net.get(b))]

    def set_link_rate(self, key: Tuple[str, str], mbps: float) -> int:
        """Shape a link at a new rate from now on (shaped Mbit/s): every HTB class that shapes either direction of
        it changed in place, queues kept; returns how many were changed."""
        changed = 0
        for mn_link in self._mininet_links(key):
            for intf in (mn_link.intf1, mn_link.intf2):
                if intf.params.get("plain_port"):  # a switch's plain port: its link's shaping namespace shapes
                    continue
                if intf.name in self.shared_nics:
                    self._run_in(intf.node.name, shared_nic_rate_commands(intf.name, mbps,
                                                                          self.shared_nics[intf.name]))
                    changed += 1
                    continue
                out = intf.tc(f"%s class change dev %s parent 5:0 classid 5:1 htb rate {mbps:g}Mbit burst 15k")
                if out.strip():
                    raise NetworkError(f"changing {key[0]}-{key[1]} to {mbps:g} Mbit/s on {intf.name} failed: "
                                       f"{out.strip().splitlines()[0]}")
                changed += 1
        return changed

    def set_link_state(self, key: Tuple[str, str], up: bool) -> List[str]:
        """Take a link down or bring it up again the way a cable fails: the interfaces between its two ends go
        down (a shaping namespace's both, else the switch's end), so the switches see their ports lose carrier;
        returns the interfaces changed."""
        switches = {s.name for s in self.topo.switches}
        changed, before = [], self.failed
        for mn_link in self._mininet_links(key):
            pair = (mn_link.intf1, mn_link.intf2)
            ends = [i for i in pair if i.node.name not in switches and not self.topo.is_host(i.node.name)] or \
                   [i for i in pair if i.node.name in switches][:1]
            for intf in ends:
                out = intf.node.cmd(f"ip link set {intf.name} {'up' if up else 'down'}")
                if out.strip():
                    raise NetworkError(f"taking {key[0]}-{key[1]} {'up' if up else 'down'} on {intf.name} "
                                       f"failed: {out.strip().splitlines()[0]}")
                changed.append(intf.name)
        self.failed = self.failed - {key} if up else self.failed | {key}
        self._reroute_hosts(before)
        return changed

    def _reroute_hosts(self, failed_before) -> None:
        """Hosts that route (BCube's relay) move their routes around the links down now, as BCube's source routing
        would (at once: no probing delay); elsewhere the hosts' routes stay."""
        before, after = all_host_configs(self.topo, tuple(failed_before)), all_host_configs(self.topo, tuple(self.failed))
        for host in self.topo.hosts:
            cmds = route_changes(before[host.name], after[host.name], self.host_tcp(host.name).route_options())
            if cmds:
                self._run_in(host.name, cmds)

    def share_nic(self, host: str, flows: List[Tuple[str, int]]) -> List[str]:
        """Background flows (destination address, port) leaving a host: its egress split evenly between the job's
        traffic and each flow (shared_nic_commands); the interfaces split. Not with delay or loss on the links (their
        leaf is netem): then the one FIFO stays."""
        if self.impairment.active:
            return []
        node, by_dev = self.net.get(host), {}
        for address, port in flows:
            found = re.search(r"\bdev (\S+)", node.cmd(f"ip route get {address}"))
            if found:
                by_dev.setdefault(found.group(1), []).append(port)
        intfs = {i.name: i for i in self.topo.node(host).interfaces}
        for dev, ports in by_dev.items():
            link = next(l for l in self.topo.links if l.lower == host and l.level == intfs[dev].level)
            mbps = rate_of(link.lower, link.upper, link.level, self.bw, self.link_rates)
            self._run_in(host, shared_nic_commands(dev, mbps, self.tcp.host_queue_packets, ports))
            self.shared_nics[dev] = len(ports) + 1
        return sorted(by_dev)
