"""dmlbed's nodes and links on Mininet's Cluster Edition: hosts and switches on several machines, reached
over SSH, joined by SSH or GRE tunnels where a link crosses machines. A Cluster is handed to EmulatedNetwork
the way Mininet takes node classes: the network never imports this module."""

from __future__ import annotations

import os
import pwd
import shlex
import subprocess
from typing import Callable, Dict, List, Sequence, Tuple

from mininet.examples.cluster import RemoteGRELink, RemoteLink, RemoteMixin, RemoteOVSSwitch
from mininet.util import quietRun

from emulation.net.nodes import DmlSwitch, QuietHost, ShapedEnds
from emulation.net.kernel_probes import NetworkError, gretap_available
from emulation.core.placement import LOCAL, place
from emulation.core.topology import Topology

SSH_OPTIONS_ENV = "DMLBED_SSH_OPTIONS"  # extra ssh arguments, e.g. "-F /path/ssh_config" (like GIT_SSH_COMMAND)
TAP_BASE = 9100  # SSH tunnel tap numbers start here (renamed once moved into their node)
FORWARDED_ENV = ("PYTHONPATH", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def ssh_base() -> List[str]:
    """Mininet's ssh command for remote nodes, with the user's extra options from DMLBED_SSH_OPTIONS."""
    base = list(RemoteMixin.sshbase)
    return base[:1] + shlex.split(os.environ.get(SSH_OPTIONS_ENV, "")) + base[1:]


def ssh_batch() -> List[str]:
    """ssh_base() without a terminal (-tt): for commands whose output is read, and for tunnels."""
    return [c for c in ssh_base() if c != "-tt"]


class ClusterNodeMixin:
    """What dmlbed adds to Mininet's remote nodes: its ssh options, and processes started on another machine
    in the run's folder with its environment (ssh passes neither, and joins arguments with spaces)."""

    def __init__(self, name, **params):
        self.sshbase = ssh_base()
        super().__init__(name, **params)

    def _popen(self, cmd, sudo=True, tt=True, cwd=None, env=None, **params):
        """Mininet's remote popen, with the command quoted for the remote shell and run in cwd with env."""
        if getattr(self, "isRemote", False) and sudo:
            if isinstance(cmd, str):
                cmd = cmd.split()
            env = env if env is not None else os.environ
            exports = [f"{k}={v}" for k, v in env.items() if k.startswith("DMLBED_") or k in FORWARDED_ENV]
            inner = f"cd {shlex.quote(cwd or os.getcwd())} && exec {shlex.join(['env'] + exports + list(cmd))}"
            cmd = [shlex.join(["sh", "-c", inner])]
            return super()._popen(cmd, sudo=sudo, tt=tt, **params)
        return super()._popen(cmd, sudo=sudo, tt=tt, cwd=cwd, env=env, **params)


class ClusterHost(ClusterNodeMixin, RemoteMixin, QuietHost):
    """A dmlbed host that may live on another machine."""


class ClusterSwitch(ClusterNodeMixin, RemoteOVSSwitch, DmlSwitch):
    """dmlbed's OVS switch (OpenFlow 1.3, AF_XDP ports on the userspace datapath) on any machine. Its ports are
    non-PMD: a PMD thread polls without rest unless the machine's OVS has pmd-maxsleep set, and dmlbed does not
    change other machines' OVS configuration."""

    port_type = "afxdp-nonpmd"


class ShapedGRELink(ShapedEnds, RemoteGRELink):
    """An HTB-shaped link: a veth pair on one machine, Mininet's GRE tunnel (MTU 1450) between two."""


class ShapedSSHLink(ShapedEnds, RemoteLink):
    """An HTB-shaped link: a veth pair on one machine, Mininet's SSH Ethernet tunnel between two. Mininet names
    both tunnel ends tap9, which collide when both "servers" are this machine (a test over SSH to 127.0.0.1),
    so each tunnel here gets its own pair of tap numbers; ssh also gets dmlbed's options."""

    next_tap = TAP_BASE
    record = None  # a network's own subclass records this machine's taps for `dmlbed clean` before they exist

    @classmethod
    def _free_taps(cls) -> Tuple[int, int]:
        """Two tap numbers no interface of this machine uses."""
        taps = []
        while len(taps) < 2:
            if not os.path.exists(f"/sys/class/net/tap{cls.next_tap}"):
                taps.append(cls.next_tap)
            cls.next_tap += 1
        return taps[0], taps[1]

    def makeTunnel(self, node1, node2, intfname1, intfname2, addr1=None, addr2=None):
        """Mininet's SSH tunnel (tap devices, `ssh -o Tunnel=Ethernet -w A:B`, moved and renamed into the nodes)."""
        if node2.server == LOCAL:
            return self.makeTunnel(node2, node1, intfname2, intfname1, addr2, addr1)
        taps = self._free_taps()
        local = [f"tap{t}" for node, t in zip((node1, node2), taps)
                 if node.server == LOCAL or str(node.serverIP).startswith("127.")]
        if self.record and local:  # an interrupted bring-up leaves them in the root namespace
            self.record(local)
        for node, tap in zip((node1, node2), taps):
            out = node.rcmd(f"ip tuntap add dev tap{tap} mode tap user {node.user}")
            if out.strip():
                raise NetworkError(f"creating tap{tap} on {node.server} failed: {out.strip()}")
        cmd = ssh_batch() + ["-n", "-o", "Tunnel=Ethernet", "-w", f"{taps[0]}:{taps[1]}",
                             f"{node2.user}@{node2.serverIP}", "echo @"]
        self.cmd = cmd
        tunnel = node1.rpopen(cmd, sudo=False)
        first = tunnel.stdout.read(1).decode(errors="replace")
        if first != "@":
            tunnel.kill()
            raise NetworkError(f"SSH tunnel {node1.server} -> {node2.server} did not come up "
                               f"({(first + tunnel.stdout.read().decode(errors='replace')).strip()[-200:]}): the "
                               f"server's sshd needs PermitTunnel yes")
        for node, tap, name, addr in ((node1, taps[0], intfname1, addr1), (node2, taps[1], intfname2, addr2)):
            self.moveIntf(f"tap{tap}", node)
            out = node.cmd(f"ip link set tap{tap} name {name}" + (f" address {addr}" if addr else ""))
            if out.strip():
                raise NetworkError(f"renaming tap{tap} to {name} on {node} failed: {out.strip()}")
        return tunnel


def route_source(ip: str) -> str:
    """The source address this machine uses to reach ip."""
    out = quietRun(f"ip route get {ip}")
    return out.split(" src ")[1].split()[0] if " src " in out else ""


def controller_address(servers: Sequence[str], server_ips: Dict[str, str]) -> str:
    """Where switches on every server reach the controller: 127.0.0.1 when all servers are this machine, else
    this machine's source address towards the first other server."""
    for server in servers:
        ip = server_ips[server]
        if server != LOCAL and not ip.startswith("127."):
            return route_source(ip) or "127.0.0.1"
    return "127.0.0.1"


def server_ips(servers: Sequence[str]) -> Dict[str, str]:
    """Each server's IPv4 address; NetworkError naming a server that does not resolve."""
    ips = {}
    for server in servers:
        ip = RemoteMixin.findServerIP(server) if server != LOCAL else "127.0.0.1"
        if not ip:
            raise NetworkError(f"--cluster server '{server}' does not resolve to an IPv4 address")
        ips[server] = ip
    return ips


def precheck(servers: Sequence[str], server_ips: Dict[str, str], project: str, timeout_s: float = 20.0) -> None:
    """Each remote server answers over SSH without a password, runs sudo, has Open vSwitch and mnexec, and
    holds the project at the same path; NetworkError naming the first that does not."""
    probe = (f"sudo -n true && command -v mnexec >/dev/null && sudo -n ovs-vsctl -t 3 show >/dev/null "
             f"&& test -d {shlex.quote(project)} && echo dmlbed-ok")
    for server in servers:
        if server == LOCAL:
            continue
        cmd = ssh_batch() + ["-n", f"{ssh_user()}@{server_ips[server]}", probe]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
            ok, detail = "dmlbed-ok" in r.stdout, (r.stderr.strip() or r.stdout.strip())[-200:]
        except subprocess.TimeoutExpired:
            ok, detail = False, f"no answer in {timeout_s:.0f}s"
        if not ok:
            raise NetworkError(f"cluster server {server} is not ready ({detail or 'check failed'}): it needs "
                               f"passwordless ssh and sudo, Open vSwitch running, Mininet, and this project at "
                               f"{project} (docs/how-to/several-machines.md)")


def recording(link: type, record: Callable[[List[str]], None]) -> type:
    """One network's own link class: its tunnels record this machine's taps with record before making them."""
    return type(link.__name__, (link,), {"record": staticmethod(record)})


def link_class(tunnel: str, server_ips: Dict[str, str]):
    """The link class for --tunnel; NetworkError when GRE cannot work here."""
    if tunnel == "ssh":
        return ShapedSSHLink
    if any(ip.startswith("127.") for s, ip in server_ips.items() if s != LOCAL):
        raise NetworkError("--tunnel gre needs servers on other machines (both ends on this machine would be the "
                           "same tunnel): use --tunnel ssh")
    if not gretap_available():
        raise NetworkError("--tunnel gre: this kernel has no GRE Ethernet tunnels (ip_gre): use --tunnel ssh")
    return ShapedGRELink


def ssh_user() -> str:
    """Whom to log in as on the servers: the user behind sudo, else the current user (as Mininet does)."""
    return os.environ.get("SUDO_USER") or pwd.getpwuid(os.getuid()).pw_name


class Cluster:
    """An emulation spread over this machine and SSH servers: the servers (this machine first), the tunnel kind,
    and where every node lives once the network places them."""

    def __init__(self, servers: Sequence[str], tunnel: str = "ssh"):
        self.servers = list(servers)
        self.tunnel = tunnel
        self.server_ips: Dict[str, str] = {}
        self.placement: Dict[str, str] = {}
        self.topo: Topology = None
        self.link = None

    def prepare(self, project: str) -> str:
        """Resolve and check every server before anything starts; returns the address switches on every server
        reach the controller at."""
        self.server_ips = server_ips(self.servers)
        self.link = link_class(self.tunnel, self.server_ips)
        precheck(self.servers, self.server_ips, project)
        return controller_address(self.servers, self.server_ips)

    def node_classes(self, topo: Topology, state, colocated: Dict[str, str], log: Callable[[str], None]):
        """Link, host and switch constructors placing every node on its server (colocated: extra node -> the
        node whose server it shares, e.g. a shaping box and the switch below it); records the remote switches and
        this machine's tunnel taps in the run record (state) for `dmlbed clean`."""
        self.topo = topo
        self.placement = place(topo, self.servers)
        for name, beside in colocated.items():
            self.placement[name] = self.placement[beside]
        link = recording(self.link, state.add_interfaces)
        user = ssh_user()
        for server in self.servers[1:]:
            ssh = ssh_batch() + ["-n", f"{user}@{self.server_ips[server]}"]
            state.add_remote(server, ssh, [s.name for s in topo.switches if self.placement[s.name] == server])

        def on_server(cls):
            return lambda name, **p: cls(name, server=self.placement[name],
                                         serverIP=self.server_ips[self.placement[name]], user=user, **p)
        hosts = self.hosts_per_server()
        log("placement: " + "; ".join(
            f"{s}: {hosts[s]} hosts, {sum(self.placement[w.name] == s for w in topo.switches)} switches"
            for s in self.servers))
        return link, on_server(ClusterHost), on_server(ClusterSwitch)

    def hosts_per_server(self) -> Dict[str, int]:
        """How many hosts each server runs."""
        return {s: sum(self.placement[h.name] == s for h in self.topo.hosts) for s in self.servers}

    def summary(self) -> dict:
        """The servers, the tunnel kind and the hosts on each (for results)."""
        return {"servers": self.servers, "tunnel": self.tunnel, "hosts_per_server": self.hosts_per_server()}
