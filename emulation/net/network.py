"""Bring an emulated network up in Mininet under dmlbed's controller, and always tear it down."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from typing import Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from mininet.log import setLogLevel
from mininet.net import Mininet

from emulation.net.controller_process import ControllerProcess, RemoteController, make_controller, stop_process_group
from emulation.net.nodes import DmlSwitch, ListeningController, QuietHost, ShapedLink, switch_side_interfaces
from emulation.net.link_control import LinkControl
from emulation.net.kernel_probes import (NetworkError, available_congestion_controls, choose_datapath, ecn_marking_qdisc,
                                  ensure_ovs, leaf_drops, leaf_marks, netem_available, ovs_setting,
                                  red_available)
from emulation.net.runstate import RunState, clean as clean_stale
from emulation.net.topos import SpecTopo, shaper_name
from emulation.core.addressing import all_host_configs, command_batches, config_commands
from emulation.core.controller_choice import ControllerChoice
from emulation.core.impairment import Impairment
from emulation.core.link_rates import Overrides, rate_of, slowest_per_level
from emulation.core.shaping import bridge_commands, gso_bytes, ingress_netem_commands, offloads_off_command
from emulation.core.tcp import TcpSettings, route_rto_min_ms
from emulation.core.topology import Topology

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NET_STOP_TIMEOUT_S = 60.0
# A PMD thread that finds little to poll sleeps up to this long: light traffic costs little CPU, a hop waits at
# most this (fattree:4, h0 to h15: ping 1.15 ms on average, against 3.0 ms with non-PMD ports).
PMD_MAX_SLEEP_US = 100
SHELL_EXIT_TIMEOUT_S = 5.0  # node shells exit within a second once hung up
KILL_NAMESPACE_PROCESSES = ('me=$(readlink /proc/$$/ns/net); for p in /proc/[0-9]*; do q=${p#/proc/}; '
                            '[ "$q" != $$ ] && [ "$(readlink $p/ns/net 2>/dev/null)" = "$me" ] && kill -9 $q 2>/dev/null; '
                            'done; true')


class EmulatedNetwork(LinkControl):
    """Context manager: Mininet network for a Topology, shaped links, Ryu controller; torn down on exit."""

    def __init__(self, topo: Topology, bw: Sequence[float], datapath: str = "auto",
                 ingress_shaping: bool = False, install_timeout: float = 90.0,
                 log: Callable[[str], None] = lambda msg: None, tcp: TcpSettings = TcpSettings(),
                 cluster=None, impairment: Optional[Impairment] = None,
                 controller: ControllerChoice = ControllerChoice(), link_rates: Optional[Overrides] = None,
                 changing: Sequence[Tuple[str, str]] = (), plain_links: Sequence[Tuple[str, str]] = ()):
        self.topo = topo
        self.link_rates = dict(link_rates or {})  # (lower, upper) -> shaped Mbit/s of links off their level's rate
        self.changing = tuple(changing)  # (lower, upper) of links whose rate events change during the run
        self.plain_links = frozenset(plain_links)  # userspace datapath: switch-to-switch links on plain ports
        self.failed: FrozenSet[Tuple[str, str]] = frozenset()  # links a link event took down
        self.shared_nics: Dict[str, int] = {}  # host interface -> its HTB classes, where background flows share it
        self.controller_choice = controller
        self.impairment = impairment or Impairment.none(topo.levels)
        self.cluster = cluster  # None: this machine only; else an emulation.net.cluster.Cluster (node classes)
        self.bw = tuple(bw)
        self.tcp = tcp
        self.tcp_report: dict = {}
        self.ingress_shaping = ingress_shaping
        self.requested_datapath = datapath
        self.install_timeout = install_timeout
        self.log = log
        self.datapath: Optional[str] = None
        self.net: Optional[Mininet] = None
        self.controller: Optional[ControllerProcess | RemoteController] = None
        self.state: Optional[RunState] = None
        self.workdir: Optional[str] = None
        self.listen = "127.0.0.1"  # where the controller listens (this machine's address to the cluster's servers)
        self.procs: List[subprocess.Popen] = []
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
        """Machine, controller, kernel checks, Mininet's nodes, then wait until every switch is programmed."""
        self._prepare_machine()
        self._start_controller()
        self._check_kernel()
        afxdp = self.datapath == "user"
        self._build(afxdp)
        self._start(afxdp)

    def _prepare_machine(self) -> None:
        """Clean up after crashed runs, start Open vSwitch, choose the datapath, record this run's state."""
        for action in clean_stale():
            self.log(f"clean: {action}")
        ensure_ovs()
        self.datapath = choose_datapath(self.requested_datapath)
        # every server must be ready before anything starts
        self.listen = self.cluster.prepare(PROJECT) if self.cluster else "127.0.0.1"
        self.state = RunState().create()
        self.workdir = tempfile.mkdtemp(prefix="dmlbed-")
        self.state.add_folders([self.workdir])
        if self.datapath == "user" and ovs_setting("pmd-maxsleep") is None:  # an admin's own value stays
            self.state.add_ovs_settings(["pmd-maxsleep"])
            subprocess.run(["ovs-vsctl", "set", "open_vswitch", ".",
                            f"other_config:pmd-maxsleep={PMD_MAX_SLEEP_US}"], capture_output=True, check=True)

    def _start_controller(self) -> None:
        """Start (or reach) the controller the switches will connect to."""
        choice = self.controller_choice
        which = {"remote": f"the controller at {choice.host}:{choice.port}", "app": f"your controller app {choice.app}"}
        self.log(f"{'using' if choice.kind == 'remote' else 'starting'} {which.get(choice.kind, 'controller')} "
                 f"({self.topo.spec}, datapath {self.datapath})")
        self.controller = make_controller(choice, self.topo, self.workdir, self.listen)
        pid = self.controller.start()
        if pid is not None:
            self.state.add_pid(pid, "ryu-manager")

    def _check_kernel(self) -> None:
        """Refuse settings this kernel cannot emulate, naming what it lacks."""
        if self.tcp.congestion_control not in available_congestion_controls(load=self.tcp.congestion_control):
            raise NetworkError(f"congestion control {self.tcp.congestion_control} is not in this kernel: "
                               f"valid are {', '.join(available_congestion_controls())}")
        if self.impairment.active and not netem_available():
            raise NetworkError("link delay/loss needs the kernel's netem qdisc (sch_netem), which this kernel lacks")
        if self.tcp.ecn_mark_packets and not red_available():
            raise NetworkError("--aqm red-ecn needs the kernel's RED qdisc (sch_red), which this kernel lacks")

    def _build(self, afxdp: bool) -> None:
        """Mininet's hosts, switches and shaped links for the topology, recorded for `dmlbed clean`."""
        setLogLevel(os.environ.get("DMLBED_MININET_LOG", "warning"))
        link, host, switch = ShapedLink, QuietHost, DmlSwitch
        if self.cluster:
            boxes = {shaper_name(i): l.lower for i, l in enumerate(self.topo.links) if afxdp and self._boxed(l)}
            link, host, switch = self.cluster.node_classes(self.topo, self.state, boxes, self.log)
        self.net = Mininet(topo=SpecTopo(spec=self.topo, bw=self.bw, link_rates=self.link_rates, shaper_boxes=afxdp,
                                         host_queue=self.tcp.host_queue_packets,
                                         switch_queue=self.tcp.switch_queue_packets,
                                         impairment=self.impairment, mtu=self.tcp.mtu,
                                         host_boxes=self.host_boxes,
                                         boxed_links=self.boxed_host_links if afxdp else (),
                                         ecn_mark=self.tcp.ecn_mark_packets,
                                         plain_links=self.plain_links if afxdp else ()),
                           link=link, host=host,
                           switch=lambda name, **p: switch(name, datapath=self.datapath, afxdp=afxdp, **p),
                           controller=None, autoSetMacs=False, autoStaticArp=False,
                           build=False, waitConnected=False)
        self.net.addController("c0", controller=ListeningController, ip=self.controller.host,
                               port=self.controller.port)
        self.state.add_bridges([s.name for s in self.topo.switches])
        self.state.add_interfaces(switch_side_interfaces(self.topo))
        self.log(f"building {len(self.topo.hosts)} hosts, {len(self.topo.switches)} switches, "
                 f"{len(self.topo.links)} links{self._plain_note}")
        self.net.build()

    def _start(self, afxdp: bool) -> None:
        """Start the nodes, configure hosts and shapers, and wait until every switch is programmed."""
        for host in self.net.hosts:
            if getattr(host, "isRemote", False):  # its pid is on the server; the local end is the ssh client
                self.state.add_pid(host.shell.pid, f"ssh shell of {host.name} on {host.server}")
            else:
                self.state.add_pid(host.pid, f"host {host.name}")
        for link in self.net.links:
            if hasattr(getattr(link, "tunnel", None), "pid"):
                self.state.add_pid(link.tunnel.pid, f"ssh tunnel {link.intf1}-{link.intf2}")
        self._quiet_switch_ports()  # before the switches take their ports: a slow machine (a software-emulated VM)
        # otherwise sends IPv6 router solicitations from switch-to-switch veths into them, each a PacketIn
        self.net.start()
        self._quiet_switch_ports()  # the bridges' own ports exist from here
        self._configure_hosts()
        if afxdp:
            self._configure_shapers()
        self.log("waiting for every switch to be programmed" if self.controller_choice.own else
                 "waiting for every switch to connect to the controller")
        self.controller.wait_installed(self.install_timeout)

    @property
    def placement(self) -> Dict[str, str]:
        """Node -> server ({} on one machine)."""
        return self.cluster.placement if self.cluster else {}

    def cluster_summary(self) -> dict:
        """Servers, tunnel and hosts per server ({} on one machine)."""
        return self.cluster.summary() if self.cluster else {}

    def _quiet_switch_ports(self) -> None:
        """IPv6 off on root-namespace switch ports and bridge-local ports, so the kernel sends nothing into the switches."""
        names = switch_side_interfaces(self.topo) + [s.name for s in self.topo.switches]
        args = [f"net.ipv6.conf.{n}.disable_ipv6=1" for n in names if os.path.exists(f"/sys/class/net/{n}")]
        if args:
            subprocess.run(["sysctl", "-qw"] + args, capture_output=True)

    def _configure_hosts(self) -> None:
        """Addresses, routes (with the TCP route options), static ARP, the host's TCP settings, no TX offload
        and (userspace datapath, switch->host unshaped) the links' delay and loss at the host's ingress; then read
        one host's TCP settings back."""
        configs = all_host_configs(self.topo)
        for spec_host in self.topo.hosts:
            tcp = self.host_tcp(spec_host.name)
            cmds = tcp.sysctl_commands() + config_commands(configs[spec_host.name], tcp.route_options())
            nic = self.nic_rate(spec_host.name)
            for intf in spec_host.interfaces:
                cmds.append(offloads_off_command(intf.name, gso_bytes(nic, self.tcp.mtu) if nic else None))
                netem = self.impairment.netem(intf.level)
                boxed = self.host_boxes or any(l.lower == spec_host.name and l.level == intf.level and
                                               (l.lower, l.upper) in self.boxed_host_links for l in self.topo.links)
                if netem and self.datapath == "user" and not boxed:  # AF_XDP sends around the switch's
                    cmds += ingress_netem_commands(intf.name, f"ifb{intf.port}", self.tcp.switch_queue_packets,
                                                   netem, self.tcp.mtu)
            self._run_in(spec_host.name, cmds)
        first = self.topo.hosts[0].name
        self.tcp_report = self._read_tcp(first)
        tcp = self.host_tcp(first)
        wanted = {"slow_start_after_idle": tcp.slow_start_after_idle, "tsq_bytes": tcp.tsq_bytes,
                  "rto_min_ms": tcp.rto_min_ms or None, "quickack_on_routes": tcp.quickack, "mtu": tcp.mtu}
        if any(self.tcp_report[k] != v for k, v in wanted.items()):
            raise NetworkError(f"host TCP settings did not apply: {self.tcp_report}")

    def nic_rate(self, host: str) -> float:
        """A host's slowest NIC, shaped Mbit/s."""
        return min(rate_of(l.lower, l.upper, l.level, self.bw, self.link_rates) for l in self.topo.links
                   if l.lower == host)

    def host_tcp(self, host: str) -> TcpSettings:
        """A host's TCP settings, sized to its own NIC rate and the network's slowest link where left to the rate."""
        return self.tcp.sized(self.nic_rate(host), min(slowest_per_level(self.topo, self.bw, self.link_rates)))

    def _read_tcp(self, host: str) -> dict:
        """The TCP settings a host's namespace actually has (as the kernel reports them)."""
        h = self.net.get(host)
        out = {"namespace_default_congestion_control": h.cmd("sysctl -n net.ipv4.tcp_congestion_control").strip(),
               "slow_start_after_idle": h.cmd("sysctl -n net.ipv4.tcp_slow_start_after_idle").strip() == "1",
               "tsq_bytes": int(h.cmd("sysctl -n net.ipv4.tcp_limit_output_bytes").strip() or 0)}
        out["mtu"] = int(h.cmd(f"cat /sys/class/net/{self.topo.node(host).interfaces[0].name}/mtu").strip() or 0)
        routes = h.cmd("ip route show").splitlines()
        floors = {route_rto_min_ms(r) for r in routes}
        out["rto_min_ms"] = floors.pop() if len(floors) == 1 else None
        out["quickack_on_routes"] = sum("quickack 1" in r for r in routes) == len(routes) and bool(routes)
        return out

    @property
    def host_boxes(self) -> bool:
        """Whether host links run through shaping namespaces too (--shape-ingress on the userspace datapath)."""
        return self.datapath == "user" and self.ingress_shaping

    @property
    def boxed_host_links(self) -> Tuple[Tuple[str, str], ...]:
        """Host links at a rate of their own: through a shaping namespace on the userspace datapath even without
        --shape-ingress, so switch->host holds that rate too (a ring's slow member receives at it as well)."""
        return tuple(k for k in (*self.link_rates, *self.changing) if self.topo.is_host(k[0]))

    def _boxed(self, link) -> bool:
        """Whether a link runs through a shaping namespace (userspace datapath)."""
        return self.datapath == "user" and (not self.topo.is_host(link.lower) or self.host_boxes or
                                            (link.lower, link.upper) in self.boxed_host_links)

    def _configure_shapers(self) -> None:
        """Bridge the two ports of every shaping namespace."""
        for i, link in enumerate(self.topo.links):
            if self._boxed(link):
                box = shaper_name(i)
                self._run_in(box, bridge_commands([f"{box}-eth0", f"{box}-eth1"]))

    def _run_in(self, node: str, cmds: List[str]) -> None:
        """Run configuration commands in a node, in lines its shell reads whole; raise NetworkError on the first
        failure."""
        for batch in command_batches(cmds):
            out = self.net.get(node).cmd(" ; ".join(batch) + " ; echo dmlbed-config-done")
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

    def namespace_pids(self) -> Dict[str, int]:
        """Host name -> the pid of a process in its network namespace (its shell), whose /proc/PID/net/ shows the
        host's own counters from outside; {} for hosts on other machines."""
        return {h.name: h.pid for h in self.net.hosts if not getattr(h, "isRemote", False)}

    def fork_namespace(self, host_name: str) -> Optional[int]:
        """The pid of the host's shell, whose network namespace a forked rank enters; None for a remote host."""
        host = self.host(host_name)
        return None if getattr(host, "isRemote", False) else host.pid

    def adopt(self, proc, host_name: str, what: str) -> None:
        """Stop proc (started outside popen, e.g. forked into a host's namespace) at teardown; record it."""
        self.procs.append(proc)
        self.state.add_pid(proc.pid, f"{what} on {host_name}")

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
        down = "switch->host in a bridging namespace per host link" if self.ingress_shaping else \
            "switch->host unshaped"
        return f"host->switch at host egress; switch<->switch both directions{self._plain_note}; {down}"

    @property
    def _plain_note(self) -> str:
        """How many switch-to-switch links are on plain switch ports, and why ('' when none are)."""
        if self.datapath != "user" or not self.plain_links:
            return ""
        return (f" ({len(self.plain_links)} switch-to-switch links on plain switch ports: AF_XDP ports on every "
                f"link would not fit in memory)")

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
        outs = self._switch_queue_stats()
        totals["switch_queue_drops"] = sum(leaf_drops(out) for out in outs)
        if self.tcp.ecn_mark_packets:
            totals["ecn_marks"] = sum(leaf_marks(out) for out in outs)
        return totals

    def _switch_queue_stats(self) -> List[str]:
        """`tc -s qdisc show` of the shaped switch-side queues: in the shaping namespaces on the userspace datapath
        (switch-to-switch links, and host links with --shape-ingress), on the switch ports with the kernel
        datapath."""
        if self.datapath == "user":
            return [self.net.get(shaper_name(i)).cmd("tc -s qdisc show") for i, link in enumerate(self.topo.links)
                    if self._boxed(link)]
        return [subprocess.run(["tc", "-s", "qdisc", "show", "dev", name], capture_output=True,
                               text=True).stdout for name in switch_side_interfaces(self.topo)]

    def queue_toward(self, host: str, level: int = 0) -> Tuple[str, str]:
        """Where the switch-side queue in front of a host's NIC is: (the Mininet node it is on, a switch or a
        shaping namespace; its interface). It is shaped on the kernel datapath, and on the userspace one where the
        host link runs through a shaping namespace."""
        link = next(l for l in self.topo.links if l.lower == host and l.level == level)
        if self.datapath == "user" and not self._boxed(link):
            raise NetworkError(f"the switch port toward {host} is not shaped on the userspace datapath: its link "
                               f"needs a shaping namespace (--shape-ingress)")
        mn_link = self._mininet_links((link.lower, link.upper))[0]
        far = mn_link.intf2 if mn_link.intf1.node.name == host else mn_link.intf1
        return far.node.name, far.name

    def impairment_summary(self) -> dict:
        """The link delay and loss this network applies (for results)."""
        out = self.impairment.to_dict()
        if self.impairment.active and self.datapath == "user" and not self.ingress_shaping:
            out["applied"] += "; switch->host at the host's ingress (IFB with netem)"
        return out

    def reroutes(self) -> List[dict]:
        """What dmlbed's controller did on each port-status message that changed the links down: when it got it,
        when its flow mods went out, how many (none from another controller)."""
        return list(self.controller.status().get("reroutes", [])) if self.controller_choice.own else []

    def controller_summary(self) -> dict:
        """Which controller the switches ran under (for results)."""
        summary = self.controller_choice.summary()
        return dict(summary, routing=self.topo.routing) if self.controller_choice.own else summary

    def tcp_summary(self) -> dict:
        """The TCP settings asked for, what a host reports having, and ECN availability (for results)."""
        ecn = ecn_marking_qdisc()
        by_host = {h.name: self.host_tcp(h.name) for h in self.topo.hosts}
        sized = {k: sorted({getattr(t, k) for t in by_host.values()}) for k in ("tsq_bytes", "rto_min_ms")}
        return dict(self.tcp.to_dict(), sized={k: v[0] if len(v) == 1 else v for k, v in sized.items()},
                    applied=self.tcp_report,
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


