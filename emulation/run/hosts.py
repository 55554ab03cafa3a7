"""Where a job's processes run: an emulated network (emulation/net) or loopback processes, behind one protocol;
and the machine-wide lock an emulated network holds."""

from __future__ import annotations

import contextlib
import subprocess
from typing import Callable, Dict, List, Optional, Protocol, Tuple

from emulation.net.controller_process import stop_process_group
from emulation.run.limits import beyond_measured
from emulation.run.resolution import NetworkSettings


class Hosts(Protocol):
    """Where ranks run: an EmulatedNetwork (emulation/net/network.py) or LoopbackHosts."""

    datapath: str
    shaping: str
    placement: Dict[str, str]

    def popen(self, host: str, args: List[str], **kwargs) -> subprocess.Popen:
        """Start a process on a host; it is stopped when the hosts go down."""

    def packet_ins(self) -> int:
        """Data-plane PacketIns the controller saw."""

    def port_drops(self) -> Dict[str, int]:
        """Cumulative drop counters of the switches' ports."""

    def set_link_rate(self, link: Tuple[str, str], mbps: float) -> int:
        """Shape a link at a new rate from now on (a link event)."""

    def set_link_state(self, link: Tuple[str, str], up: bool) -> List[str]:
        """Take a link down or bring it up again (a link event)."""

    def share_nic(self, host: str, flows: List[Tuple[str, int]]) -> List[str]:
        """Split a host's egress evenly between the job's traffic and background flows (address, port) leaving it."""

    def controller_summary(self) -> Optional[dict]:
        """Which controller ran the switches (None without switches)."""

    def reroutes(self) -> List[dict]:
        """The controller's reroutes on port-status messages."""

    def tcp_summary(self) -> dict:
        """The hosts' TCP settings (for results)."""

    def impairment_summary(self) -> dict:
        """The links' delay and loss (for results)."""

    def cluster_summary(self) -> dict:
        """Servers and tunnels of an emulation across machines ({} on one machine)."""

    def namespace_pids(self) -> Dict[str, int]:
        """Host -> a pid in its network namespace (per-host counters from /proc/PID/net)."""

    def fork_namespace(self, host: str) -> Optional[int]:
        """The pid whose network namespace a rank forked on this machine enters (0: this process's own), or None
        where a rank cannot be forked from here (a host on another machine)."""

    def adopt(self, proc, host: str, what: str) -> None:
        """Stop proc (started outside popen) with the hosts; record it for `dmlbed clean`."""


class LoopbackHosts:
    """Every rank as a plain process on 127.0.0.1 (no emulation, no root): for development and tests."""

    datapath = "loopback"
    shaping = "none (loopback)"
    placement: Dict[str, str] = {}

    def __init__(self):
        self.procs: List[subprocess.Popen] = []

    def __enter__(self) -> "LoopbackHosts":
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            stop_process_group(proc.pid, proc, grace=1.0)

    def popen(self, host: str, args: List[str], **kwargs) -> subprocess.Popen:
        """Start a rank's process in its own session (stopped with its children)."""
        proc = subprocess.Popen(args, start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def fork_namespace(self, host: str) -> Optional[int]:
        """Every loopback rank stays in this namespace."""
        return 0

    def adopt(self, proc, host: str, what: str) -> None:
        """Stopped on exit like the ranks popen() started."""
        self.procs.append(proc)

    def packet_ins(self) -> int:
        """No controller on loopback."""
        return 0

    def port_drops(self) -> Dict[str, int]:
        """No switch on loopback."""
        return {}

    def set_link_rate(self, link: Tuple[str, str], mbps: float) -> int:
        """No links on loopback (validation refuses events there)."""
        raise RuntimeError("loopback runs have no links to change")

    def set_link_state(self, link: Tuple[str, str], up: bool) -> List[str]:
        """No links on loopback (validation refuses events there)."""
        raise RuntimeError("loopback runs have no links to take down")

    def controller_summary(self) -> Optional[dict]:
        """No switches, no controller."""
        return None

    def reroutes(self) -> List[dict]:
        """No switches, no reroutes."""
        return []

    def tcp_summary(self) -> dict:
        """Loopback runs use the machine's own TCP."""
        return {"congestion_control": "machine default (loopback)"}

    def impairment_summary(self) -> dict:
        """Loopback has no links to delay."""
        return {"applied": "none (loopback)"}

    def cluster_summary(self) -> dict:
        """One machine."""
        return {}

    def namespace_pids(self) -> Dict[str, int]:
        """Every rank shares this machine's namespace: no per-host counters."""
        return {}


def network_lock(network: NetworkSettings):
    """The machine-wide network lock for an emulated network; nothing for loopback processes."""
    if network.local:
        return contextlib.nullcontext()
    from emulation.net.lock import NetworkLock
    return NetworkLock(wait=network.wait)


def hosts_for(network: NetworkSettings, log: Callable[[str], None]) -> Hosts:
    """The hosts a job's processes start on: the emulated network at its shaped rates (spread over --cluster
    servers when given), or loopback processes."""
    if network.local:
        return LoopbackHosts()
    from emulation.net.kernel_probes import choose_datapath
    from emulation.net.network import EmulatedNetwork
    cluster = None
    if network.cluster:
        from emulation.net.cluster import Cluster
        cluster = Cluster(list(network.cluster), network.tunnel)
    else:  # the limits were measured on one machine
        note = beyond_measured(network.topo, choose_datapath(network.datapath), network.shaped, network.dilation,
                               network.shaped_link_rates)
        if note:
            log(f"note: {note}")
    return EmulatedNetwork(network.topo, network.shaped, datapath=network.datapath,
                           ingress_shaping=network.shape_ingress, log=log, tcp=network.tcp, cluster=cluster,
                           impairment=network.impairment, controller=network.controller,
                           link_rates=network.shaped_link_rates, changing=[e.link for e in network.events],
                           plain_links=network.plain_links)
