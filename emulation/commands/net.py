"""`dmlbed net SPEC --check | --cli`: bring a network up under the controller, test reachability and how
faithfully iperf3 flows get the shaped rate (or open Mininet's CLI), tear it down; net.json holds the report."""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from emulation.commands.base import SPEC, Command
from emulation.net import checks
from emulation.core.aqm import bdp_packets, describe, queue_forecast
from emulation.core.link_rates import described, rate_of
from emulation.core.patterns import PATTERN_HELP, Pattern, parse_patterns
from emulation.core.queue_samples import series_rows, summarize
from emulation.core.tcp import ETHERNET_HEADER
from emulation.core.topology import Topology
from emulation.core.units import SECONDS
from emulation.run.lifecycle import Lifecycle
from emulation.run.options import (CONTROLLER, LINKS, NETWORK, OUTPUT, REPLACE, WAIT, OptionError, RunConfig,
                                   command_option)
from emulation.run.outputs import output_folder
from emulation.results.files import write_atomic_csv
from emulation.run.pattern_traffic import fair_rates, run_patterns, summarize_patterns
from emulation.run.progress import log
from emulation.results.provenance import provenance
from emulation.run.queue_sampler import QueueSampler
from emulation.run.resolution import NetworkSettings
from emulation.run.sampling import CpuSampler, switch_pid
from emulation.run.validation import check_network, check_values, check_workers

MAX_DURATION_S = 600
REPORT = "net.json"
QUEUE_CSV = "incast-queue.csv"
SERIES_COLUMNS = ("t_s", "packets", "bytes", "ecn_marks", "drops")
INCAST_SOCKET_MIN_BYTES = 4 << 20
OVER_RATE = 1.05  # an incast's port sending more than this times the flow model's rate: the shaper did not hold
WARMUP_S = 1.5  # the incast's queue is judged after its flows' slow start (iperf3 leaves out their first second too)

def sender_counts(text) -> Tuple[int, ...]:
    """'3' -> (3,), '1-4' -> (1, 2, 3, 4), '1,2,8' -> (1, 2, 8); '0': none (ValueError naming what is valid)."""
    text = str(text).strip()
    try:
        if re.fullmatch(r"\d+-\d+", text):
            low, high = (int(x) for x in text.split("-"))
            counts = tuple(range(low, high + 1)) if low <= high else ()
        else:
            counts = tuple(int(x) for x in text.split(","))
    except ValueError:
        counts = ()
    if not counts or (len(counts) > 1 and 0 in counts) or len(set(counts)) != len(counts) or min(counts) < 0:
        raise ValueError(f"--incast '{text}' is invalid: give a sender count N, a range A-B or a list N,M,... of "
                         f"distinct counts from 1")
    return () if counts == (0,) else counts


class Net(Command):
    name, help = "net", "bring a network up, check it, tear it down"
    description = ("With --check: every host pair's reachability (ping) and concurrent iperf3 flows on every "
                   "level, each flow's measured rate against its shaped rate, CPU and switch-thread load, "
                   "bring-up and teardown times (net.json). With --cli: Mininet's CLI on the running network.")
    examples = (
        ("bring BCube(3,2) up at 100 Mbit/s, check reachability and every link's rate, tear it down",
         "bcube:3,2 --bw 100 --check"),
        ("Hedera's stride-4 pattern on Fat-Tree(4) at 10 Mbit/s against a non-blocking switch",
         "fattree:4 --bw 10 --check --pattern stride:4"),
        ("1 to 8 senders into one host at once: its switch port's queue and the goodput per sender count beside the "
         "flow model (with --aqm red-ecn:20 --tcp-cc dctcp where the kernel has RED and DCTCP)",
         "star:9 --bw 100 --check --incast 1-8"),
        ("a star of 4 hosts in Mininet's CLI",
         "star:4 --cli"),
    )
    groups = (LINKS, NETWORK, CONTROLLER, OUTPUT, REPLACE, WAIT)
    own = (SPEC,
           command_option("check", "reachability + iperf3 fidelity test", False, kind=bool, exclusive="mode",
                          required=True),
           command_option("cli", "open the Mininet CLI", False, kind=bool, exclusive="mode", required=True),
           command_option("all_pairs", "BCube: also test relayed (multi-hop) pairs", False, kind=bool),
           command_option("duration", "iperf3 seconds per flow", 5.0, kind=float, low=0, low_open=True,
                          high=MAX_DURATION_S, quantity=SECONDS),
           command_option("incast", "then N hosts (h1..hN) send into h0 at once for --duration, h0's switch port "
                          "queue sampled (occupancy, ECN marks, drops) beside its closed form: the DCTCP experiment "
                          "with --aqm red-ecn:K --tcp-cc dctcp; a sweep as A-B or a list (1-15, 1,2,4,8): the "
                          "goodput per sender count beside the flow model's, each with its verdict", "0",
                          parse=sender_counts, metavar="N|A-B|N,M,..."),
           command_option("pattern", f"then {PATTERN_HELP}, for --duration; the aggregate against the flow model's "
                          f"on the same paths and a non-blocking switch's (repeatable)", kind=list,
                          metavar="stride:K|randbij|alltoall"),
           command_option("seeds", "run each --pattern with seeds 1..N (randbij's pairs and every flow's client "
                          "port, so its ECMP path, are drawn by the seed)", 1, kind=int, low=1, high=100))

    def prepare(self, args):
        values = self.values(args)
        return prepare(self.config(args, topology=values["spec"]), values["duration"], values["all_pairs"],
                       values["cli"], values["incast"], values["pattern"] or (), values["seeds"])

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
    incast: Tuple[int, ...] = ()  # sender counts, one incast each
    patterns: Tuple[Pattern, ...] = ()
    seeds: int = 1


def prepare(cfg: RunConfig, duration: float = 5.0, all_pairs: bool = False, interactive: bool = False,
            incast=(), patterns: Sequence[str] = (), seeds: int = 1) -> NetCheckJob:
    """The values and the network section, and an --out free of another check, before anything starts. An incast
    needs h0's switch port shaped: on the userspace datapath its link runs through a shaping namespace."""
    check_values(cfg, groups=Net.groups)
    network = check_network(cfg)
    if not 0 < duration <= MAX_DURATION_S:
        raise OptionError(f"--duration {duration:g} is out of range: give seconds in (0, {MAX_DURATION_S}]")
    incast = tuple(incast) if isinstance(incast, (tuple, list)) else sender_counts(incast)  # '3', 3, '1-15'
    if incast:
        if interactive:
            raise OptionError("--incast is a part of --check: give --check")
        wrong = [n for n in incast if not 1 <= n < len(network.topo.hosts)]
        if wrong:
            raise OptionError(f"--incast {wrong[0]} is out of range for {network.topo.spec}: give 1-"
                              f"{len(network.topo.hosts) - 1} senders into h0")
        network = replace(network, shape_ingress=True)
    if patterns and interactive:
        raise OptionError("--pattern is a part of --check: give --check")
    try:
        parsed = parse_patterns(patterns, len(network.topo.hosts))
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    check_workers(network, 0, ranks=0)  # the userspace switch's AF_XDP ports alone
    cfg = replace(cfg, out=output_folder(cfg.out, (REPORT,), "a network check", cfg.force, "net"))
    return NetCheckJob(cfg, network, duration, all_pairs, interactive, incast, parsed, seeds)


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
        if job.incast:
            done = [run_incast(enet, job, log, count) for count in job.incast]
            report["incast"] = done[-1]
            if len(done) > 1:
                report["incast_sweep"] = [sweep_row(d) for d in done]
        if job.patterns:
            report["patterns"] = run_patterns(enet, job.patterns, job.seeds, job.duration, log)
            report["pattern_summary"] = summarize_patterns(report["patterns"])
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


def incast_flows(topo: Topology, senders: int, bw: Tuple[float, ...],
                 link_rates: Optional[Dict[Tuple[str, str], float]] = None) -> List[checks.Flow]:
    """The first `senders` hosts after h0 each send one flow into h0, with the rate the flow model gives it:
    max-min fair shares of the links on the paths the controller's rules take."""
    receiver = topo.hosts[0]
    hops = checks.routed_hops(topo, [(h.name, receiver.ip) for h in topo.hosts[1:senders + 1]])
    rates = fair_rates(hops, bw, link_rates)
    return [checks.Flow(h.name, h.ip, receiver.name, receiver.ip, 0, round(float(rate), 3),
                 (h.name,) + tuple(b for _a, b, _lvl in path))
            for h, path, rate in zip(topo.hosts[1:senders + 1], hops, rates)]


def incast_socket_bytes(buffer_packets: int, mbps: float, rtt_s: float, mtu: int) -> int:
    """The most a socket of the incast may buffer, and hold unfreed (TCP Small Queues): enough for the whole port
    buffer and the pipe twice over (and the kernel's per-segment overhead), so the flows are limited by the network,
    as the experiment's long flows are, and not by what dmlbed's engine uses. On the kernel datapath a packet stays
    charged to its sender's socket until the receiver frees it (through veth pairs and the switch), so the small TSQ
    of dmlbed's hosts (5 ms of the NIC's rate) capped what each flow could queue anywhere on its path: in the VM,
    cubic's flows sat at 4-18 packets in flight with their windows open and hundreds of KB unsent, and never filled a
    100-packet buffer."""
    frames = buffer_packets + bdp_packets(mbps, rtt_s, mtu)
    return max(INCAST_SOCKET_MIN_BYTES, int(4 * frames * (mtu + ETHERNET_HEADER)))


def sender_socket(ss_text: str) -> Dict[str, object]:
    """What `ss -tin` says of a sender's bulk connection halfway through (the one with the most bytes acked): its
    window, round trip, and the shares of time it was limited by the receiver's window or its own send buffer."""
    best: Dict[str, object] = {}
    for block in re.split(r"\n(?=\S)", ss_text.strip()):
        fields = dict(re.findall(r"\b(cwnd|rtt|bytes_acked|ssthresh|rcv_space|snd_wnd|unacked|notsent):([\d.]+)",
                                 block))
        limited = dict(re.findall(r"\b(rwnd_limited|sndbuf_limited):\d+ms\(([\d.]+)%\)", block))
        row = {k: float(v) for k, v in fields.items()}
        row.update({f"{k}_pct": float(v) for k, v in limited.items()}, app_limited="app_limited" in block)
        if row.get("bytes_acked", 0) >= best.get("bytes_acked", 0):
            best = row
    return best


def run_incast(enet, job: NetCheckJob, log: Callable[[str], None], senders: int) -> dict:
    """`senders` hosts into h0 for --duration with h0's switch port queue sampled; what the queue held beside its
    closed form, the flows' rates beside the flow model's fair shares, and a verdict that tells drops at h0's port
    (the network under study) apart from the emulator's faults."""
    topo, tcp = job.network.topo, enet.tcp
    flows = incast_flows(topo, senders, enet.bw, enet.link_rates)
    receiver = topo.hosts[0]
    link = next(l for l in topo.links if l.lower == receiver.name and l.level == 0)
    bottleneck = rate_of(link.lower, link.upper, 0, enet.bw, enet.link_rates)
    rtt = checks.base_rtt_s(enet, flows[0].src, receiver.ip)
    node, dev = enet.queue_toward(receiver.name)
    socket_max = incast_socket_bytes(tcp.switch_queue_packets, bottleneck, rtt or 0.0, tcp.mtu)
    for host in {receiver.name, *(f.src for f in flows)}:
        enet.host(host).cmd(f"sysctl -qw net.ipv4.tcp_wmem='4096 131072 {socket_max}' "
                            f"net.ipv4.tcp_rmem='4096 131072 {socket_max}' "
                            f"net.ipv4.tcp_limit_output_bytes={socket_max}")
    log(f"incast: {len(flows)} flows into {receiver.name} for {job.duration:g}s, sampling {dev}'s queue")
    window_start = time.time() + WARMUP_S
    sockets: Dict[str, str] = {}
    look = threading.Timer(WARMUP_S + (job.duration - WARMUP_S) / 2, lambda: sockets.update(
        {f.src: enet.host(f.src).cmd(f"ss -tinH dst {receiver.ip}") for f in flows}))
    with QueueSampler(enet, node, dev, os.path.join(job.cfg.out, "incast-queue.log"), job.duration) as sampler, \
            CpuSampler(switch=switch_pid()) as cpu:
        look.start()
        rows = checks.run_fidelity(enet, flows, job.duration)
        window_end = time.time()
    look.cancel()
    samples = sampler.samples()
    series = QUEUE_CSV if len(job.incast) == 1 else f"incast-{senders}-queue.csv"
    write_atomic_csv(os.path.join(job.cfg.out, series), list(SERIES_COLUMNS),
                     [[r[c] for c in SERIES_COLUMNS] for r in series_rows(samples, window_start - WARMUP_S)])
    buffer = tcp.switch_queue_packets
    forecast = queue_forecast(tcp.ecn_mark_packets, tcp.congestion_control, len(flows), buffer,
                              bdp_packets(bottleneck, rtt or 0.0, tcp.mtu))
    queue = dict(summarize(samples, buffer, window_start, window_end), **sampler.where())
    summary = checks.summarize_incast(rows, bottleneck)
    model = sum(f.shaped_mbps for f in flows)
    return dict(summary, receiver=receiver.name, senders=[f.src for f in flows], flow_model_mbps=round(model, 3),
                measured_over_flow_model=round((queue.get("sent_mbps") or summary["wire_mbps"]) / model, 4)
                if model else None,
                cpu=cpu.report(), **incast_verdict(summary["wire_mbps"], model, queue, cpu.report()),
                aqm=describe(tcp.ecn_mark_packets), tcp_cc=tcp.congestion_control, socket_buffer_max_bytes=socket_max,
                tsq_bytes=socket_max,
                base_rtt_ms=None if rtt is None
                else round(rtt * 1e3, 3), queue=queue,
                queue_closed_form=forecast.to_dict(), flows=rows, series=series,
                senders_tcp={src: sender_socket(text) for src, text in sockets.items()},
                window_s=[WARMUP_S, round(window_end - window_start + WARMUP_S, 3)])


def incast_verdict(wire_mbps: float, model_mbps: float, queue: dict, cpu: dict) -> Dict[str, object]:
    """Whose an incast's shortfall is: none (faithful: the receiver's port sent the flow model's aggregate); the
    network under study (drops at the receiver's port, the emulator's CPU and switch thread not saturated: incast
    losses, what the experiment is about); or the emulator (saturated, short without drops at that port, or above
    the shaped rate). The port's own count of what it sent is the aggregate where it was sampled: the flows' iperf3
    rates are each over its own window, and they start at different times, so their sum can exceed the link."""
    rate = queue.get("sent_mbps") or wire_mbps
    share = rate / model_mbps if model_mbps else 0.0
    if share > OVER_RATE:
        return {"verdict": "not faithful", "cause": f"emulator: the receiver's port sent {share:.2f} times the flow "
                                                    f"model's rate (the shaper did not hold it)"}
    drops = queue.get("drops") or 0
    saturated = max(cpu.get("saturated_share") or 0, cpu.get("switch_saturated_share") or 0)
    if saturated >= checks.CPU_SATURATED_SHARE:
        return {"verdict": "not faithful", "cause": f"emulator: CPU or switch thread saturated in {saturated:.0%} "
                                                    f"of samples"}
    if share >= checks.FAITHFUL:
        return {"verdict": "faithful", "cause": f"{drops} drops at the receiver's port (the network under study)"
                if drops else None}
    if drops:
        return {"verdict": "faithful", "cause": f"the network under study: {drops} drops at the receiver's port cut "
                                                f"the goodput to {share:.0%} of the flow model's (incast)"}
    return {"verdict": "not faithful", "cause": f"emulator: {share:.0%} of the flow model's rate without drops at the "
                                                f"receiver's port (the switching path)"}


def sweep_row(incast: dict) -> Dict[str, object]:
    """One sender count of an incast sweep: goodput beside the flow model's, drops, fairness, verdict."""
    q = incast["queue"]
    return {"senders": len(incast["senders"]), "wire_mbps": incast["wire_mbps"], "port_sent_mbps": q.get("sent_mbps"),
            "flow_model_mbps": incast["flow_model_mbps"],
            "measured_over_flow_model": incast["measured_over_flow_model"],
            "goodput_mbps": round(sum(f["measured_mbps"] for f in incast["flows"]), 3),
            "jain_fairness": incast["jain_fairness"], "retransmits": incast["retransmits"], "drops": q.get("drops"),
            "queue_p90_packets": q.get("p90_packets"), "verdict": incast["verdict"], "cause": incast["cause"]}


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
    if report.get("incast_sweep"):
        print(f"\nincast sweep into {report['incast']['receiver']} ({report['incast']['tcp_cc']}, aqm "
              f"{report['incast']['aqm']}):")
        print(f"{'senders':>7} {'goodput':>9} {'wire':>9} {'port':>9} {'model':>9} {'ratio':>6} {'Jain':>5} "
              f"{'drops':>6} verdict")
        for r in report["incast_sweep"]:
            port = r["port_sent_mbps"]
            print(f"{r['senders']:>7} {r['goodput_mbps']:>9.2f} {r['wire_mbps']:>9.2f} "
                  f"{'-' if port is None else format(port, '.2f'):>9} {r['flow_model_mbps']:>9.2f} "
                  f"{r['measured_over_flow_model']:>6.2f} {r['jain_fairness']:>5} {r['drops']!s:>6} {r['verdict']}"
                  + (f" ({r['cause']})" if r["cause"] else ""))
    elif report.get("incast"):
        print_incast(report["incast"])
    for name, p in (report.get("pattern_summary") or {}).items():
        low, high = p["measured_over_flow_model_range"] or (None, None)
        print(f"pattern {name} ({p['seeds']} seeds): {p['of_non_blocking_median']:.2f} of a non-blocking switch "
              f"(median; flow model {p['flow_model_of_non_blocking_median']:.2f}), measured/flow model "
              f"{'-' if low is None else f'{low:.2f}-{high:.2f}'}")
    print(f"data-plane PacketIns: {report['packet_in']}")
    print(f"report: {report['out']}")


def print_incast(inc: dict) -> None:
    """The incast's lines of the report."""
    q, form = inc["queue"], inc["queue_closed_form"]
    print(f"\nincast {', '.join(inc['senders'])} -> {inc['receiver']} ({inc['tcp_cc']}, aqm {inc['aqm']}): "
          f"{inc['wire_mbps']:.1f} of {inc['bottleneck_mbps']:g} Mbit/s ({inc['throughput_of_rate']:.0%}), "
          f"Jain fairness {inc['jain_fairness']}, {inc['retransmits']} retransmits")
    if "error" in q:
        print(f"queue at {q['interface']}: {q['error']}")
        return
    print(f"queue at {q['interface']} ({q['samples']} looks, every {q['period_s_median'] * 1e3:.0f} ms): median "
          f"{q['median_packets']:g}, p90 {q['p90_packets']:g}, max {q['max_packets']} of {q['buffer_packets']} "
          f"packets; {q['ecn_marks']} ECN marks, {q['drops']} drops")
    print(f"closed form ({form['law']}): {form['low_packets']:g}-{form['high_packets']:g} packets")


COMMAND = Net()
