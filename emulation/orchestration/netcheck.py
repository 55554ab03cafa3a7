"""`dmlbed net SPEC --check | --cli`: bring a network up under the controller, test reachability and how
faithfully iperf3 flows get the shaped rate (or open Mininet's CLI), tear it down."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from emulation.net import checks
from emulation.orchestration.options import (NET, OptionError, RunConfig, check_impairment, check_mtu, check_topology,
                                             check_values, controller_choice)
from emulation.orchestration.ranks import hosts_for, network_lock
from emulation.orchestration.sampling import CpuSampler, switch_pid
from emulation.spec.impairment import Impairment
from emulation.spec.topology import Topology, parse_bandwidth

MAX_DURATION_S = 600


@dataclass(frozen=True)
class NetCheckJob:
    """A checked `net` command."""

    cfg: RunConfig
    topo: Topology
    bw: Sequence[float]
    impairment: Impairment
    duration: float = 5.0
    all_pairs: bool = False
    interactive: bool = False


def prepare(cfg: RunConfig, duration: float = 5.0, all_pairs: bool = False, interactive: bool = False) -> NetCheckJob:
    """Check everything `net` needs before anything starts."""
    check_values(cfg, only=NET)
    topo = check_topology(cfg.topology, emulated=True)
    bw = parse_bandwidth(cfg.bw, topo)
    if not 0 < duration <= MAX_DURATION_S:
        raise OptionError(f"--duration {duration:g} is out of range: give seconds in (0, {MAX_DURATION_S}]")
    impairment = check_impairment(cfg, topo, emulated=True)
    check_mtu(cfg)
    controller_choice(cfg)
    return NetCheckJob(cfg, topo, bw, impairment, duration, all_pairs, interactive)


def execute(job: NetCheckJob, log: Callable[[str], None] = lambda m: None) -> Optional[dict]:
    """Bring the network up and check it (None after an interactive session)."""
    topo, bw, cfg = job.topo, job.bw, job.cfg
    report = {"topology": topo.spec, "hosts": len(topo.hosts), "switches": len(topo.switches),
              "links": len(topo.links), "shaped_mbps": bw[0] if len(set(bw)) == 1 else list(bw),
              "bw_by_level": list(bw)}
    with network_lock(cfg), hosts_for(cfg, topo, bw, job.impairment, log) as enet:
        report.update(datapath=enet.datapath, shaping=enet.shaping, bring_up_s=round(enet.bring_up_s, 3),
                      tcp=enet.tcp_summary(), impairment=enet.impairment_summary())
        if job.interactive:
            log("Mininet CLI: the controller is running; type exit to tear down")
            enet.interactive()
            return None
        log("testing reachability")
        report.update(checks.run_reachability(enet, checks.reachability_pairs(topo, job.all_pairs)))
        flows = checks.fidelity_flows(topo, bw)
        log(f"running {len(flows)} concurrent iperf3 flows for {job.duration:g}s")
        with CpuSampler(switch=switch_pid()) as cpu:
            report["flows"] = checks.run_fidelity(enet, flows, job.duration)
        report["cpu"] = cpu.report()
        report.update(checks.summarize_fidelity(report["flows"], report["cpu"]))
        if enet.placement:
            cluster = enet.cluster_summary()
            report["cluster"] = dict(checks.mark_tunnels(report["flows"], enet.placement), tunnel=cluster["tunnel"],
                                     hosts_per_server=cluster["hosts_per_server"], placement=enet.placement)
        report["packet_in"] = enet.packet_ins()
        if report["packet_in"]:
            report["packet_in_samples"] = enet.controller.status().get("packet_in_samples", [])
        report["controller"] = enet.controller_choice.summary()
    report["teardown_s"] = round(enet.teardown_s, 3)
    return report


def passed(report: Optional[dict]) -> bool:
    """Every tested pair reachable and, under dmlbed's proactive controller, no data-plane PacketIn (a user's
    controller may learn from PacketIns: they are reported; an interactive session passes)."""
    if report is None:
        return True
    own = report.get("controller", {}).get("kind", "dmlbed") == "dmlbed"
    return report["pairs_reachable"] == report["pairs_tested"] and (report["packet_in"] == 0 or not own)
