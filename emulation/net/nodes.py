"""dmlbed's Mininet node and link classes: shaped links with bounded leaf queues, quiet hosts, OpenFlow 1.3
switches with AF_XDP ports toward hosts, and a controller node for an already-listening Ryu."""

from __future__ import annotations

import socket
import subprocess
from typing import List, Optional

from mininet.link import TCIntf, TCLink
from mininet.log import warn
from mininet.node import Host, OVSSwitch, RemoteController

from emulation.net.kernel_probes import NetworkError
from emulation.core.aqm import red_ecn_args
from emulation.core.shaping import leaf_queue_command
from emulation.core.tcp import DEFAULT_MTU, TcpSettings
from emulation.core.topology import Topology

NO_IPV6 = "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"


class ListeningController(RemoteController):
    """Ryu, already listening when Mininet adds it (ControllerProcess waited for its port). Mininet's own check
    pipes telnet's output through a UTF-8 decoder, and Ryu answers with a binary OpenFlow HELLO whose random
    transaction id fails that decoder about one bring-up in twenty (found by the soak)."""

    def checkListening(self):
        """Nothing to check: the port was open before Mininet was told about the controller."""

    def stop(self, *args, **kwargs):
        """End this node's own shell: RemoteController.stop does nothing, so Mininet left it running and every
        teardown waited SHELL_EXIT_TIMEOUT_S for it. (Ryu itself is ControllerProcess's to stop.)"""
        self.terminate()


class ConnectCheckedController(RemoteController):
    """Mininet's remote controller for `dmlbed-mn --controller remote,...`, its listening check a plain TCP connect:
    Mininet's telnet check decodes Ryu's binary OpenFlow HELLO as UTF-8 and `mn` dies on a random transaction id."""

    def isListening(self, ip, port):
        """True when a TCP connection to ip:port opens (warns as Mininet does when none does)."""
        try:
            with socket.create_connection((ip, port), timeout=2):
                return True
        except OSError:
            warn(f"Unable to contact the remote controller at {ip}:{port}\n")
            return False


class QuietTCIntf(TCIntf):
    """TCIntf with a bounded FIFO of `leaf_packets` under HTB (a host NIC queue or a switch port buffer, as
    the link end asks) and without HTB's harmless 'quantum of class ... is big' warnings in the tc output."""

    ecn_mark, frame_mtu = 0, DEFAULT_MTU  # a drop-tail leaf unless config asks for RED

    def config(self, leaf_packets: int = TcpSettings().switch_queue_packets, netem: Optional[str] = None,
               mtu: Optional[int] = None, ecn_mark: int = 0, **params):
        """Mininet's configuration with this end's leaf queue size (and netem delay/loss, or RED marking ECN at
        ecn_mark packets, as the leaf) and MTU."""
        self.leaf_packets = leaf_packets
        self.netem = netem
        self.ecn_mark = ecn_mark
        self.frame_mtu = mtu or DEFAULT_MTU
        if mtu:
            out = self.cmd(f"ip link set dev {self.name} mtu {mtu}")
            if out.strip():
                raise NetworkError(f"setting MTU {mtu} on {self.name} failed: {out.strip()}")
        return super().config(**params)

    def bwCmds(self, *args, **kwargs):
        """Mininet's HTB commands plus a pfifo (or netem, or RED) leaf of leaf_packets packets."""
        cmds, parent = super().bwCmds(*args, **kwargs)
        if cmds and parent.strip() == "parent 5:1":
            red = red_ecn_args(self.ecn_mark, self.leaf_packets, kwargs.get("bw") or 0, self.frame_mtu) \
                if self.ecn_mark else None
            cmds.append(leaf_queue_command("%s", "%s", self.leaf_packets, self.netem, red))
            parent = " parent 10: "
        return cmds, parent

    def tc(self, cmd, tc="tc"):
        """Run a tc command; return its output without quantum warnings."""
        out = super().tc(cmd, tc)
        return "\n".join(l for l in out.splitlines() if "quantum of class" not in l)


class ShapedEnds:
    """Link mix-in: both ends HTB-shaped (QuietTCIntf), checksum offload off on both."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("cls1", QuietTCIntf)
        kwargs.setdefault("cls2", QuietTCIntf)
        kwargs.update(txo=False, rxo=False)
        super().__init__(*args, **kwargs)


class ShapedLink(ShapedEnds, TCLink):
    """HTB-shaped veth link with checksum offload off on both ends."""


class QuietHost(Host):
    """Host whose namespace has IPv6 off before any interface appears, so it sends no ND/MLD frames."""

    def startShell(self, *args, **kwargs):
        """Start the shell, then disable IPv6 in the new namespace."""
        super().startShell(*args, **kwargs)
        self.cmd(NO_IPV6)


class DmlSwitch(OVSSwitch):
    """OVS switch speaking OpenFlow 1.3 whose host ports use AF_XDP on the userspace datapath, polled by a PMD thread
    (its ends of switch-to-switch links are plain ports where AF_XDP ones would not fit in memory:
    emulation/core/shaping.py).
    (Non-PMD ports are polled by OVS's main loop, which on every wake-up also tries accept() on each bridge's
    management socket: on Fat-Tree(4)'s 20 bridges that tripled the cost of a packet and saturated it.)"""

    port_type = "afxdp"

    def __init__(self, name, afxdp=False, **params):
        params.setdefault("protocols", "OpenFlow13")
        params.setdefault("failMode", "secure")
        super().__init__(name, **params)
        self.afxdp = afxdp

    def vsctl(self, *args, **kwargs):
        """ovs-vsctl run directly, not through the switch's shell: Mininet adds a bridge and all its ports in one
        command, and a terminal cuts a line at 4095 bytes, which a switch with about 30 AF_XDP ports passes (star:32
        never got its bridge, and its bring-up waited for a switch that did not exist)."""
        if getattr(self, "isRemote", False) or self.batch:
            return super().vsctl(*args, **kwargs)
        r = subprocess.run("ovs-vsctl " + " ".join(str(a) for a in args), shell=True, capture_output=True, text=True)
        return r.stdout + r.stderr

    def intfOpts(self, intf):
        """Mininet's port options, plus the interface's MTU and the AF_XDP port type unless the port is plain."""
        opts = super().intfOpts(intf)
        if intf.params.get("mtu"):
            opts += f" mtu_request={intf.params['mtu']}"
        if self.afxdp and not intf.params.get("plain_port"):
            opts += f" type={self.port_type} options:xdp-mode=generic"
        return opts


def switch_side_interfaces(topo: Topology) -> List[str]:
    """Root-namespace interface names Mininet creates for the topology's switch ports."""
    names = []
    for link in topo.links:
        names.append(f"{link.upper}-eth{link.upper_port}")
        if not topo.is_host(link.lower):
            names.append(f"{link.lower}-eth{link.lower_port}")
    return names
