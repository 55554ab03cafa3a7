"""Bring an emulated network up in Mininet under dmlbed's controller, and always tear it down."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence

from mininet.link import TCIntf, TCLink
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host, OVSSwitch, RemoteController

from emulation.spec.addressing import all_host_configs, config_commands
from emulation.net.controller import ControllerProcess, stop_process_group
from emulation.net.runstate import RunState, clean as clean_stale
from emulation.spec.topology import Topology
from emulation.spec.shaping import (bridge_commands, ingress_commands, ingress_netem_commands, leaf_queue_command,
                                    offloads_off_command)
from emulation.spec.impairment import Impairment
from emulation.spec.tcp import TcpSettings
from emulation.net.topos import SpecTopo, shaper_name

OVS_CTL = "/usr/share/openvswitch/scripts/ovs-ctl"
PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NET_STOP_TIMEOUT_S = 60.0
# A PMD thread that finds little to poll sleeps up to this long: light traffic costs little CPU, a hop waits at
# most this (fattree:4, h0 to h15: ping 1.15 ms on average, against 3.0 ms with non-PMD ports).
PMD_MAX_SLEEP_US = 100
SHELL_EXIT_TIMEOUT_S = 5.0  # node shells exit within a second once hung up


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


class NetworkError(RuntimeError):
    """The emulated network could not be brought up."""


KILL_NAMESPACE_PROCESSES = ('me=$(readlink /proc/$$/ns/net); for p in /proc/[0-9]*; do q=${p#/proc/}; '
                            '[ "$q" != $$ ] && [ "$(readlink $p/ns/net 2>/dev/null)" = "$me" ] && kill -9 $q 2>/dev/null; '
                            'done; true')
NO_IPV6 = "sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1"


class QuietTCIntf(TCIntf):
    """TCIntf with a bounded FIFO of `leaf_packets` under HTB (a host NIC queue or a switch port buffer, as
    the link end asks) and without HTB's harmless 'quantum of class ... is big' warnings in the tc output."""

    def config(self, leaf_packets: int = TcpSettings().switch_queue_packets, netem: Optional[str] = None,
               mtu: Optional[int] = None, **params):
        """Mininet's configuration with this end's leaf queue size (and netem delay/loss as the leaf) and MTU."""
        self.leaf_packets = leaf_packets
        self.netem = netem
        if mtu:
            out = self.cmd(f"ip link set dev {self.name} mtu {mtu}")
            if out.strip():
                raise NetworkError(f"setting MTU {mtu} on {self.name} failed: {out.strip()}")
        return super().config(**params)

    def bwCmds(self, *args, **kwargs):
        """Mininet's HTB commands plus a pfifo (or netem) leaf of leaf_packets packets."""
        cmds, parent = super().bwCmds(*args, **kwargs)
        if cmds and parent.strip() == "parent 5:1":
            cmds.append(leaf_queue_command("%s", "%s", self.leaf_packets, self.netem))
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
    """OVS switch speaking OpenFlow 1.3 whose ports use AF_XDP on the userspace datapath, polled by a PMD thread.
    (Non-PMD ports are polled by OVS's main loop, which on every wake-up also tries accept() on each bridge's
    management socket: on Fat-Tree(4)'s 20 bridges that tripled the cost of a packet and saturated it.)"""

    port_type = "afxdp"

    def __init__(self, name, afxdp=False, **params):
        params.setdefault("protocols", "OpenFlow13")
        params.setdefault("failMode", "secure")
        super().__init__(name, **params)
        self.afxdp = afxdp

    def intfOpts(self, intf):
        """Mininet's port options, plus the interface's MTU and the AF_XDP port type when asked for."""
        opts = super().intfOpts(intf)
        if intf.params.get("mtu"):
            opts += f" mtu_request={intf.params['mtu']}"
        if self.afxdp:
            opts += f" type={self.port_type} options:xdp-mode=generic"
        return opts


def ovs_running() -> bool:
    """True when ovsdb-server and ovs-vswitchd answer."""
    return (shutil.which("ovs-vsctl") is not None and
            subprocess.run(["ovs-vsctl", "-t", "3", "show"], capture_output=True).returncode == 0)


def ensure_ovs() -> None:
    """Start Open vSwitch (without needing its kernel module) when it is not running."""
    if ovs_running():
        return
    if not os.path.exists(OVS_CTL):
        raise NetworkError("Open vSwitch is not installed: run `make setup`")
    subprocess.run([OVS_CTL, "start"], capture_output=True)
    if not ovs_running():
        raise NetworkError(f"Open vSwitch did not start: run `{OVS_CTL} start` and check `ovs-vsctl show`")


def ovs_setting(key: str) -> Optional[str]:
    """A key of Open vSwitch's other_config, or None when unset."""
    r = subprocess.run(["ovs-vsctl", "--if-exists", "get", "open_vswitch", ".", f"other_config:{key}"],
                       capture_output=True, text=True)
    value = r.stdout.strip().strip('"')
    return value if r.returncode == 0 and value else None


def kernel_datapath_available() -> bool:
    """True when the openvswitch kernel module is (or can be) loaded."""
    if os.path.isdir("/sys/module/openvswitch"):
        return True
    if shutil.which("modprobe"):
        subprocess.run(["modprobe", "-q", "openvswitch"], capture_output=True)
    return os.path.isdir("/sys/module/openvswitch")


def choose_datapath(requested: str = "auto") -> str:
    """'kernel' where the kernel has the OVS module, else 'user' (userspace with AF_XDP ports)."""
    if requested not in ("auto", "kernel", "user"):
        raise NetworkError(f"datapath '{requested}' is invalid: use auto, kernel or user")
    if requested == "auto":
        return "kernel" if kernel_datapath_available() else "user"
    if requested == "kernel" and not kernel_datapath_available():
        raise NetworkError("datapath 'kernel' asked for but the openvswitch kernel module is missing: "
                           "use --datapath user")
    return requested


def qdisc_available(*qdisc: str) -> bool:
    """True when tc can create this qdisc (e.g. 'netem', 'delay', '1ms'), tried in a scratch namespace."""
    ns = f"dmlbed-probe-{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode:
        return False
    try:
        r = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "lo", "root", *qdisc],
                           capture_output=True)
        return r.returncode == 0
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def netem_available() -> bool:
    """True when the kernel has netem (needed for delay and loss)."""
    return qdisc_available("netem", "delay", "1ms")


def ecn_marking_qdisc() -> Optional[str]:
    """The first ECN-marking qdisc this kernel has (fq_codel, codel, red), or None."""
    for qdisc in (("fq_codel", "ecn"), ("codel", "ecn"), ("red", "limit", "400000", "min", "30000", "max", "90000",
                                                          "avpkt", "1000", "burst", "55", "ecn", "bandwidth", "10mbit")):
        if qdisc_available(*qdisc):
            return qdisc[0]
    return None


def available_congestion_controls() -> List[str]:
    """TCP congestion controls the kernel offers (the same list in every namespace)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            return f.read().split()
    except OSError:
        return []


class EmulatedNetwork:
    """Context manager: Mininet network for a Topology, shaped links, Ryu controller; torn down on exit."""

    def __init__(self, topo: Topology, bw: Sequence[float], datapath: str = "auto",
                 ingress_shaping: bool = False, install_timeout: float = 90.0,
                 log: Callable[[str], None] = lambda msg: None, tcp: TcpSettings = TcpSettings(),
                 cluster: Sequence[str] = (), tunnel: str = "ssh", impairment: Optional[Impairment] = None):
        self.topo = topo
        self.impairment = impairment or Impairment.none(topo.levels)
        self.servers = list(cluster)  # [] = this machine only; else 'localhost' first, then SSH servers
        self.tunnel = tunnel
        self.placement: Dict[str, str] = {}
        self.bw = tuple(bw)
        self.tcp = tcp
        self.tcp_report: dict = {}
        self.ingress_shaping = ingress_shaping
        self.requested_datapath = datapath
        self.install_timeout = install_timeout
        self.log = log
        self.datapath: Optional[str] = None
        self.net: Optional[Mininet] = None
        self.controller: Optional[ControllerProcess] = None
        self.state: Optional[RunState] = None
        self.workdir: Optional[str] = None
        self.procs: List[subprocess.Popen] = []
        self.server_ips: Dict[str, str] = {}
        self.tunnel_link = None
        self.bring_up_s = 0.0
        self.teardown_s = 0.0

    def __enter__(self) -> "EmulatedNetwork":
        start = time.monotonic()
        try:
            self._bring_up()
        except BaseException:
            self._teardown()
            raise
        self.bring_up_s = time.monotonic() - start
        return self

    def __exit__(self, *exc) -> None:
        self._teardown()

    def _bring_up(self) -> None:
        for action in clean_stale():
            self.log(f"clean: {action}")
        ensure_ovs()
        self.datapath = choose_datapath(self.requested_datapath)
        listen = "127.0.0.1"
        if self.servers:  # every server must be ready before anything starts
            from emulation.net import cluster
            self.server_ips = cluster.server_ips(self.servers)
            self.tunnel_link = cluster.link_class(self.tunnel, self.server_ips)
            cluster.precheck(self.servers, self.server_ips, PROJECT)
            listen = cluster.controller_address(self.servers, self.server_ips)
        self.state = RunState().create()
        self.workdir = tempfile.mkdtemp(prefix="dmlbed-")
        self.state.add_folders([self.workdir])
        if self.datapath == "user" and ovs_setting("pmd-maxsleep") is None:  # an admin's own value stays
            self.state.add_ovs_settings(["pmd-maxsleep"])
            subprocess.run(["ovs-vsctl", "set", "open_vswitch", ".",
                            f"other_config:pmd-maxsleep={PMD_MAX_SLEEP_US}"], capture_output=True, check=True)
        self.log(f"starting controller ({self.topo.spec}, datapath {self.datapath})")
        self.controller = ControllerProcess(self.topo, self.workdir, host=listen)
        self.state.add_pid(self.controller.start(), "ryu-manager")
        setLogLevel(os.environ.get("DMLBED_MININET_LOG", "warning"))
        afxdp = self.datapath == "user"
        if self.tcp.congestion_control not in available_congestion_controls():
            raise NetworkError(f"congestion control {self.tcp.congestion_control} is not in this kernel: "
                               f"valid are {', '.join(available_congestion_controls())}")
        if self.impairment.active and not netem_available():
            raise NetworkError("link delay/loss needs the kernel's netem qdisc (sch_netem), which this kernel lacks")
        link, host, switch = ShapedLink, QuietHost, DmlSwitch
        if self.servers:
            link, host, switch = self._cluster_classes(afxdp)
        self.net = Mininet(topo=SpecTopo(spec=self.topo, bw=self.bw, shaper_boxes=afxdp,
                                         host_queue=self.tcp.host_queue_packets,
                                         switch_queue=self.tcp.switch_queue_packets,
                                         impairment=self.impairment, mtu=self.tcp.mtu),
                           link=link, host=host,
                           switch=lambda name, **p: switch(name, datapath=self.datapath, afxdp=afxdp, **p),
                           controller=None, autoSetMacs=False, autoStaticArp=False,
                           build=False, waitConnected=False)
        self.net.addController("c0", controller=ListeningController, ip=self.controller.host,
                               port=self.controller.port)
        self.state.add_bridges([s.name for s in self.topo.switches])
        self.state.add_interfaces(switch_side_interfaces(self.topo))
        self.log(f"building {len(self.topo.hosts)} hosts, {len(self.topo.switches)} switches, "
                 f"{len(self.topo.links)} links")
        self.net.build()
        for host in self.net.hosts:
            if getattr(host, "isRemote", False):  # its pid is on the server; the local end is the ssh client
                self.state.add_pid(host.shell.pid, f"ssh shell of {host.name} on {host.server}")
            else:
                self.state.add_pid(host.pid, f"host {host.name}")
        for link in self.net.links:
            if hasattr(getattr(link, "tunnel", None), "pid"):
                self.state.add_pid(link.tunnel.pid, f"ssh tunnel {link.intf1}-{link.intf2}")
        self.net.start()
        self._quiet_switch_ports()
        self._configure_hosts(ingress_shaping=afxdp and self.ingress_shaping)
        if afxdp:
            self._configure_shapers()
        self.log("waiting for every switch to be programmed")
        self.controller.wait_installed(self.install_timeout)

    def _cluster_classes(self, afxdp: bool):
        """Link, host and switch constructors placing every node on its server (Mininet's Cluster Edition)."""
        from emulation.net import cluster
        from emulation.spec.placement import place
        self.placement = place(self.topo, self.servers)
        for i, l in enumerate(self.topo.links):
            if afxdp and not self.topo.is_host(l.lower):
                self.placement[shaper_name(i)] = self.placement[l.lower]
        cluster.ShapedSSHLink.record = self.state.add_interfaces
        user = cluster.ssh_user()
        for server in self.servers[1:]:
            ssh = cluster.ssh_batch() + ["-n", f"{user}@{self.server_ips[server]}"]
            self.state.add_remote(server, ssh, [s.name for s in self.topo.switches if self.placement[s.name] == server])

        def on_server(cls):
            return lambda name, **p: cls(name, server=self.placement[name],
                                         serverIP=self.server_ips[self.placement[name]], user=user, **p)
        hosts = self.hosts_per_server()
        self.log("placement: " + "; ".join(
            f"{s}: {hosts[s]} hosts, {sum(self.placement[w.name] == s for w in self.topo.switches)} switches"
            for s in self.servers))
        return (self.tunnel_link, on_server(cluster.ClusterHost),
                on_server(cluster.ClusterSwitch))

    def hosts_per_server(self) -> Dict[str, int]:
        """How many hosts each server runs ({} on one machine)."""
        return {s: sum(self.placement[h.name] == s for h in self.topo.hosts) for s in self.servers}

    def _quiet_switch_ports(self) -> None:
        """IPv6 off on root-namespace switch ports and bridge-local ports, so the kernel sends nothing into the switches."""
        names = switch_side_interfaces(self.topo) + [s.name for s in self.topo.switches]
        args = [f"net.ipv6.conf.{n}.disable_ipv6=1" for n in names if os.path.exists(f"/sys/class/net/{n}")]
        if args:
            subprocess.run(["sysctl", "-qw"] + args, capture_output=True)

    def _configure_hosts(self, ingress_shaping: bool) -> None:
        """Addresses, routes (with the TCP route options), static ARP, the host's TCP settings, no TX offload
        and (userspace datapath) ingress shaping; then read one host's TCP settings back."""
        configs = all_host_configs(self.topo)
        for spec_host in self.topo.hosts:
            cmds = self.tcp.sysctl_commands() + config_commands(configs[spec_host.name], self.tcp.route_options())
            for intf in spec_host.interfaces:
                cmds.append(offloads_off_command(intf.name))
                netem = self.impairment.netem(intf.level)
                if ingress_shaping:
                    cmds += ingress_commands(intf.name, f"ifb{intf.port}", self.bw[intf.level],
                                             self.tcp.switch_queue_packets, netem, self.tcp.mtu)
                elif netem and self.datapath == "user":  # AF_XDP sends switch->host around the switch's netem
                    cmds += ingress_netem_commands(intf.name, f"ifb{intf.port}", self.tcp.switch_queue_packets,
                                                   netem, self.tcp.mtu)
            self._run_in(spec_host.name, cmds)
        self.tcp_report = self._read_tcp(self.topo.hosts[0].name)
        wanted = {"slow_start_after_idle": self.tcp.slow_start_after_idle, "tsq_bytes": self.tcp.tsq_bytes,
                  "rto_min_on_routes": bool(self.tcp.rto_min_ms), "mtu": self.tcp.mtu}
        if any(self.tcp_report[k] != v for k, v in wanted.items()):
            raise NetworkError(f"host TCP settings did not apply: {self.tcp_report}")

    def _read_tcp(self, host: str) -> dict:
        """The TCP settings a host's namespace actually has (as the kernel reports them)."""
        h = self.net.get(host)
        out = {"namespace_default_congestion_control": h.cmd("sysctl -n net.ipv4.tcp_congestion_control").strip(),
               "slow_start_after_idle": h.cmd("sysctl -n net.ipv4.tcp_slow_start_after_idle").strip() == "1",
               "tsq_bytes": int(h.cmd("sysctl -n net.ipv4.tcp_limit_output_bytes").strip() or 0)}
        out["mtu"] = int(h.cmd(f"cat /sys/class/net/{self.topo.node(host).interfaces[0].name}/mtu").strip() or 0)
        routes = h.cmd("ip route show").splitlines()
        out["rto_min_on_routes"] = sum("rto_min" in r for r in routes) == len(routes) and bool(routes)
        return out

    def _configure_shapers(self) -> None:
        """Bridge the two ports of every switch-to-switch shaping namespace."""
        for i, link in enumerate(self.topo.links):
            if not self.topo.is_host(link.lower):
                box = shaper_name(i)
                self._run_in(box, bridge_commands([f"{box}-eth0", f"{box}-eth1"]))

    def _run_in(self, node: str, cmds: List[str]) -> None:
        """Run configuration commands in a node; raise NetworkError on the first failure."""
        out = self.net.get(node).cmd(" ; ".join(cmds) + " ; echo dmlbed-config-done")
        errors = [l for l in out.splitlines() if "Error" in l or "RTNETLINK" in l or "Cannot" in l]
        if "dmlbed-config-done" not in out or errors:
            raise NetworkError(f"configuring {node} failed: {(errors or [out.strip()[-200:]])[0]}")

    def interactive(self) -> None:
        """Mininet's own CLI on this network (returns when the user types exit)."""
        from mininet.cli import CLI
        CLI(self.net)

    def host(self, name: str):
        """The Mininet host called name."""
        return self.net.get(name)

    def popen(self, host_name: str, args: List[str], **kwargs) -> subprocess.Popen:
        """Start a process in a host's namespace; it is killed at teardown and recorded for `dmlbed clean`."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        proc = self.host(host_name).popen(args, **kwargs)
        self.procs.append(proc)
        self.state.add_pid(proc.pid, f"{args[0]} on {host_name}")
        return proc

    def stop_process(self, proc: subprocess.Popen) -> None:
        """Stop one process started with popen()."""
        stop_process_group(proc.pid, proc)
        if self.state is not None:
            self.state.drop_pid(proc.pid)

    @property
    def shaping(self) -> str:
        """Which directions of which links are shaped (AF_XDP transmits around switch-side qdiscs)."""
        if self.datapath == "kernel":
            return "all links, both directions"
        down = "switch->host at host ingress (IFB)" if self.ingress_shaping else "switch->host unshaped"
        return f"host->switch at host egress; switch<->switch both directions; {down}"

    def port_drops(self) -> Dict[str, int]:
        """Cumulative drop and error counters of the switches' ports (OVS interface statistics), summed by name."""
        names = set(switch_side_interfaces(self.topo))
        r = subprocess.run(["ovs-vsctl", "-t", "5", "--format=json", "--columns=name,statistics", "list",
                            "Interface"], capture_output=True, text=True)
        totals: Dict[str, int] = {}
        try:
            data = json.loads(r.stdout)["data"]
        except (ValueError, KeyError):
            return totals
        for name, stats in data:
            if name not in names:
                continue
            for key, value in stats[1]:
                if "drop" in key or "error" in key:
                    totals[key] = totals.get(key, 0) + int(value)
        totals["switch_queue_drops"] = self.queue_drops()
        return totals

    def queue_drops(self) -> int:
        """Packets the shaped switch-side queues dropped so far: the switch-to-switch links' queues (in their
        shaping namespaces on the userspace datapath; on the switch ports with the kernel datapath)."""
        if self.datapath == "user":
            outs = [self.net.get(shaper_name(i)).cmd("tc -s qdisc show") for i, link in enumerate(self.topo.links)
                    if not self.topo.is_host(link.lower)]
        else:
            outs = [subprocess.run(["tc", "-s", "qdisc", "show", "dev", name], capture_output=True,
                                   text=True).stdout for name in switch_side_interfaces(self.topo)]
        return sum(leaf_drops(out) for out in outs)

    def impairment_summary(self) -> dict:
        """The link delay and loss this network applies (for results)."""
        out = self.impairment.to_dict()
        if self.impairment.active and self.datapath == "user" and not self.ingress_shaping:
            out["applied"] += "; switch->host at the host's ingress (IFB with netem)"
        return out

    def tcp_summary(self) -> dict:
        """The TCP settings asked for, what a host reports having, and ECN availability (for results)."""
        ecn = ecn_marking_qdisc()
        return dict(self.tcp.to_dict(), applied=self.tcp_report,
                    ecn=f"available ({ecn})" if ecn else "unavailable: the kernel has no ECN-marking qdisc "
                                                         "(fq_codel, codel, red)")

    def packet_ins(self) -> int:
        """Data-plane PacketIns counted by the controller so far."""
        return self.controller.packet_ins() if self.controller else 0

    def _stop_mininet(self, errors: List[str]) -> None:
        for host in self.net.hosts:
            if getattr(host, "isRemote", False):  # processes started over ssh are not ours to signal locally
                try:
                    host.cmd(KILL_NAMESPACE_PROCESSES)
                except Exception as exc:  # keep tearing down whatever fails
                    errors.append(f"stopping processes in {host.name}: {exc}")
        shells = [n.shell for n in self.net.hosts + self.net.switches + self.net.controllers
                  if getattr(n, "shell", None) is not None]
        try:
            self.net.stop()
        except Exception as exc:  # keep tearing down whatever fails
            errors.append(f"mininet stop: {exc}")
        # Mininet hangs up its node shells without waiting for them: wait, so a finished run has left nothing.
        deadline = time.monotonic() + SHELL_EXIT_TIMEOUT_S
        for shell in shells:
            try:
                shell.wait(timeout=max(0.0, deadline - time.monotonic()))
            except Exception:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(shell.pid, signal.SIGKILL)
                with contextlib.suppress(Exception):
                    shell.wait(timeout=1.0)

    def _teardown(self) -> None:
        """Stop host processes, the network and the controller; runs on every exit path."""
        start = time.monotonic()
        # No signal (Ctrl-C, SIGTERM, a closed terminal) may cut the teardown short: that is what leaks processes.
        main = threading.current_thread() is threading.main_thread()  # signals are main-thread only
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        previous_term = signal.signal(signal.SIGTERM, signal.SIG_IGN) if main else None
        previous_hup = signal.signal(signal.SIGHUP, signal.SIG_IGN) if main else None
        errors = []
        try:
            for proc in self.procs:
                try:
                    stop_process_group(proc.pid, proc, grace=1.0)
                except Exception as exc:  # keep tearing down whatever fails
                    errors.append(f"process {proc.pid}: {exc}")
            self.procs = []
            if self.net is not None:
                # Mininet waits on its node shells; if something outside killed them (another
                # tool's `mn -c`), stop() blocks forever. Bound it: the run record undoes the rest.
                stopper = threading.Thread(target=self._stop_mininet, args=(errors,), daemon=True)
                stopper.start()
                stopper.join(NET_STOP_TIMEOUT_S)
                if stopper.is_alive():
                    errors.append(f"mininet stop did not finish in {NET_STOP_TIMEOUT_S:.0f}s; removed by record")
                self.net = None
            if self.controller is not None:
                self.controller.stop()
                self.controller = None
            if self.workdir:  # before the record's undo, which would report it as a leftover
                shutil.rmtree(self.workdir, ignore_errors=True)
                self.workdir = None
            if self.state is not None:
                self.state.restore_ovs_settings()  # like the work folder: undo would call it a leftover
                leftovers = self.state.undo()
                if leftovers:
                    self.log("teardown also removed: " + "; ".join(leftovers))
                self.state.remove()
                self.state = None
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
                signal.signal(signal.SIGTERM, previous_term)
                signal.signal(signal.SIGHUP, previous_hup)
            self.teardown_s = time.monotonic() - start
        if errors:
            self.log("teardown problems: " + "; ".join(errors))


def leaf_drops(tc_output: str) -> int:
    """Drops of the FIFO leaves in `tc -s qdisc show` output (HTB above them counts the same drops again)."""
    total = 0
    for block in re.split(r"\n(?=qdisc )", tc_output):
        if re.match(r"\s*qdisc [pb]fifo ", block):
            m = re.search(r"dropped (\d+)", block)
            total += int(m.group(1)) if m else 0
    return total


def switch_side_interfaces(topo: Topology) -> List[str]:
    """Root-namespace interface names Mininet creates for the topology's switch ports."""
    names = []
    for link in topo.links:
        names.append(f"{link.upper}-eth{link.upper_port}")
        if not topo.is_host(link.lower):
            names.append(f"{link.lower}-eth{link.lower_port}")
    return names
