"""`dmlbed net SPEC --check | --cli`: bring a network up under the controller, test reachability and how
faithfully iperf3 flows get the shaped rate (or open Mininet's CLI), tear it down; net.json holds the report."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from typing import Callable, Optional

from emulation.commands.base import SPEC, Command
from emulation.net import checks
from emulation.core.link_rates import described
from emulation.run.lifecycle import Lifecycle
from emulation.run.options import (CONTROLLER, LINKS, NETWORK, OUTPUT, REPLACE, WAIT, OptionError, RunConfig,
                                   command_option)
from emulation.run.outputs import output_folder
from emulation.run.progress import log
from emulation.run.provenance import provenance
from emulation.run.resolution import NetworkSettings
from emulation.run.sampling import CpuSampler, switch_pid
from emulation.run.validation import check_network, check_values

MAX_DURATION_S = 600
REPORT = "net.json"


class Net(Command):
    name, help = "net", "bring a network up, check it, tear it down"
    description = ("With --check: every host pair's reachability (ping) and concurrent iperf3 flows on every "
                   "level, each flow's measured rate against its shaped rate, CPU and switch-thread load, "
                   "bring-up and teardown times (net.json). With --cli: Mininet's CLI on the running network.")
    groups = (LINKS, NETWORK, CONTROLLER, OUTPUT, REPLACE, WAIT)
    own = (SPEC,
           command_option("check", "reachability + iperf3 fidelity test", False, kind=bool, exclusive="mode",
                          required=True),
           command_option("cli", "open the Mininet CLI", False, kind=bool, exclusive="mode", required=True),
           command_option("all_pairs", "BCube: also test relayed (multi-hop) pairs", False, kind=bool),
           command_option("duration", "iperf3 seconds per flow", 5.0, kind=float, low=0, low_open=True,
                          high=MAX_DURATION_S))

    def prepare(self, args):
        values = self.values(args)
        return prepare(self.config(args, topology=values["spec"]), values["duration"], values["all_pairs"],
                       values["cli"])

    def needs_root(self, job):
        return True

    def execute(self, job, args):
        return execute(job, log)

    def show(self, report):
        if report is not None:
            print_net_report(report)

    def exit_code(self, report):
        return 0 if passed(report) else 1


@dataclass(frozen=True)
class NetCheckJob:
    """A checked `net` command."""

    cfg: RunConfig
    network: NetworkSettings
    duration: float = 5.0
    all_pairs: bool = False
    interactive: bool = False


def prepare(cfg: RunConfig, duration: float = 5.0, all_pairs: bool = False, interactive: bool = False) -> NetCheckJob:
    """The values and the network section, and an --out free of another check, before anything starts."""
    check_values(cfg, groups=Net.groups)
    network = check_network(cfg)
    if not 0 < duration <= MAX_DURATION_S:
        raise OptionError(f"--duration {duration:g} is out of range: give seconds in (0, {MAX_DURATION_S}]")
    cfg = replace(cfg, out=output_folder(cfg.out, (REPORT,), "a network check", cfg.force, "net"))
    return NetCheckJob(cfg, network, duration, all_pairs, interactive)


def execute(job: NetCheckJob, log: Callable[[str], None] = lambda m: None) -> Optional[dict]:
    """Bring the network up and check it in one lifecycle; net.json is written even when bring-up fails (None is
    returned after an interactive session)."""
    topo, bw = job.network.topo, job.network.bw
    report = {"topology": topo.spec, "hosts": len(topo.hosts), "switches": len(topo.switches),
              "links": len(topo.links), "shaped_mbps": bw[0] if len(set(bw)) == 1 else list(bw),
              "bw_by_level": list(bw), "link_rates_mbps": described(job.network.link_rates),
              "interactive": job.interactive, "out": os.path.join(job.cfg.out, REPORT),
              "provenance": provenance()}
    started = time.monotonic()

    def body(life: Lifecycle) -> None:
        enet = life.hosts
        report.update(datapath=enet.datapath, shaping=enet.shaping, bring_up_s=round(enet.bring_up_s, 3),
                      tcp=enet.tcp_summary(), impairment=enet.impairment_summary())
        if job.interactive:
            log("Mininet CLI: the controller is running; type exit to tear down")
            enet.interactive()
            return
        log("testing reachability")
        report.update(checks.run_reachability(enet, checks.reachability_pairs(topo, job.all_pairs)))
        flows = checks.fidelity_flows(topo, bw, job.network.link_rates)
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

    def finish(life: Lifecycle) -> dict:
        if life.hosts is not None and hasattr(life.hosts, "teardown_s"):
            report["teardown_s"] = round(life.hosts.teardown_s, 3)
        report.update(error=life.error, duration_s=round(time.monotonic() - started, 3))
        return report

    Lifecycle(job.network, log, os.path.join(job.cfg.out, REPORT), reraise=True).run(
        body, finish, lambda: os.makedirs(job.cfg.out, exist_ok=True))
    return None if job.interactive else report


def passed(report: Optional[dict]) -> bool:
    """Every tested pair reachable and, under dmlbed's proactive controller, no data-plane PacketIn (a user's
    controller may learn from PacketIns: they are reported; an interactive session passes)."""
    if report is None:
        return True
    own = report.get("controller", {}).get("kind", "dmlbed") == "dmlbed"
    return report["pairs_reachable"] == report["pairs_tested"] and (report["packet_in"] == 0 or not own)


def print_net_report(report: dict) -> None:
    """Human-readable `net --check` report."""
    print(f"{report['topology']}: {report['hosts']} hosts, {report['switches']} switches, "
          f"datapath {report['datapath']}, shaped {report['shaped_mbps']} Mbit/s")
    print(f"shaping: {report['shaping']}")
    imp = report.get("impairment") or {}
    if imp.get("applied", "none") != "none":
        print(f"delay {imp['delay_ms']} ms, loss {imp['loss_pct']} % per level: {imp['applied']}")
    print(f"bring-up {report['bring_up_s']:.1f}s, teardown {report['teardown_s']:.1f}s")
    print(f"reachability: {report['pairs_reachable']}/{report['pairs_tested']} pairs")
    for bad in report.get("unreachable", [])[:10]:
        print(f"  unreachable: {bad}")
    if report["flows"]:
        print(f"\n{'src':<6} {'dst':<6} {'level':>5} {'shaped':>8} {'measured':>9} {'fidelity':>9}")
        for f in report["flows"]:
            print(f"{f['src']:<6} {f['dst']:<6} {f['level']:>5} {f['shaped_mbps']:>8.1f} "
                  f"{f['measured_mbps']:>9.1f} {f['fidelity']:>9.3f}" + ("  tunnel" if f.get("tunnel") else "") +
                  (f"  {f['error']}" if "error" in f else ""))
        print(f"\nfidelity (measured/shaped): min {report['fidelity_min']}, median {report['fidelity_median']}; "
              f"{report['verdict']}" + (f" ({report['cause']})" if report.get("cause") else ""))
    if report.get("cluster"):
        c = report["cluster"]
        per = ", ".join(f"{s}: {n} hosts" for s, n in c["hosts_per_server"].items())
        print(f"cluster ({c['tunnel']} tunnels): {per}; {c['tunnel_flows']} flows through tunnels, fidelity min "
              f"{c['tunnel_fidelity_min']}, median {c['tunnel_fidelity_median']}")
    print(f"data-plane PacketIns: {report['packet_in']}")
    print(f"report: {report['out']}")


COMMAND = Net()
