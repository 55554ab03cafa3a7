"""Reachability and iperf3 shaping-fidelity checks: which pairs and flows (pure), and running them."""

from __future__ import annotations

import json
import re
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Dict, List, Optional, Tuple

from controllers.flow_rules import compute_rules
from controllers.paths import follow_packet
from emulation.core.addressing import all_host_configs
from emulation.core.link_rates import rate_of
from emulation.core.tcp import wire_bytes
from emulation.core.topology import Topology

IPERF_BASE_PORT = 5201
CHECK_CLIENT_PORT = 20000  # the check's flows send from 20000, 20001, ...: below Linux's ephemeral range


@dataclass(frozen=True)
class Flow:
    """One iperf3 flow of the fidelity test and the rate the shaping should give it."""

    src: str
    src_ip: str
    dst: str
    dst_ip: str
    level: int
    shaped_mbps: float
    path: Tuple[str, ...] = ()
    client_port: Optional[int] = None  # the TCP port it sends from, which its ECMP path was traced with


def neighbours_on_level(topo: Topology, host, level: int):
    """The other hosts on host's level-`level` switch (BCube), in order."""
    return [h for h in topo.hosts if h.name != host.name and
            all(a == b for l, (a, b) in enumerate(zip(h.coords, host.coords)) if l != level)]


def reachability_pairs(topo: Topology, all_pairs: bool = False) -> List[Tuple[str, str]]:
    """(source host, destination ip) pairs to ping.

    BCube: every 1-hop neighbour on every level (by that level's address); with all_pairs also
    every address of every other host, which needs relaying. Other topologies: every ordered pair.
    """
    pairs = []
    if topo.kind != "bcube":
        return [(a.name, b.ip) for a in topo.hosts for b in topo.hosts if a.name != b.name]
    for host in topo.hosts:
        if all_pairs:
            pairs += [(host.name, i.ip) for other in topo.hosts if other.name != host.name
                      for i in other.interfaces]
        else:
            for level in range(topo.levels):
                pairs += [(host.name, other.interface(level).ip)
                          for other in neighbours_on_level(topo, host, level)]
    return pairs


def path_links(topo: Topology, path: List[str]):
    """The (from, to, level) hops along a node path."""
    hops = []
    for a, b in zip(path, path[1:]):
        link = next(l for l in topo.links if {l.lower, l.upper} == {a, b})
        hops.append((a, b, link.level))
    return hops


def routed_hops(topo: Topology, pairs: List[Tuple[str, str]],
                ports: Optional[List[Tuple[int, int]]] = None) -> List[List[Tuple[str, str, int]]]:
    """The (from, to, level) hops each (source host, destination ip) takes under the controller's rules (a TCP
    connection with these (source, destination) ports, where given: its ECMP choices are then known)."""
    rules, configs = compute_rules(topo), all_host_configs(topo)
    return [path_links(topo, follow_packet(topo, rules, configs, src, dst_ip, ports[i] if ports else None).paths[0])
            for i, (src, dst_ip) in enumerate(pairs)]


def fidelity_flows(topo: Topology, bw: Tuple[float, ...],
                   link_rates: Optional[Dict[Tuple[str, str], float]] = None) -> List[Flow]:
    """Every host sends one flow at once: to its next neighbour on every level (BCube), else to the
    next host on its level-0 switch. The expected rate is the fair share of the tightest link."""
    planned = []
    if topo.kind == "bcube":
        n = topo.params[0]
        for level in range(topo.levels):
            for host in topo.hosts:
                coords = list(host.coords)
                coords[level] = (coords[level] + 1) % n
                dst = topo.hosts[sum(d * n ** l for l, d in enumerate(coords))]
                planned.append((host, host.interface(level).ip, dst, dst.interface(level).ip, level))
    else:
        groups: Dict[str, List] = {}
        for link in topo.links:
            if link.level == 0 and topo.is_host(link.lower):
                groups.setdefault(link.upper, []).append(topo.node(link.lower))
        for members in groups.values():
            for i, host in enumerate(members):
                dst = members[(i + 1) % len(members)] if len(members) > 1 else \
                    topo.hosts[(host.index + 1) % len(topo.hosts)]
                planned.append((host, host.ip, dst, dst.ip, 0))
    pairs = [(src.name, dst_ip) for src, _, _, dst_ip, _ in planned]
    # each flow from a port of its own, so where equal-cost paths exist its share counts the flows its path meets
    ports = [(CHECK_CLIENT_PORT + i, IPERF_BASE_PORT + i) for i in range(len(planned))]
    routed = routed_hops(topo, pairs, ports)
    paths = dict(zip(pairs, routed))
    load: Dict[Tuple[str, str], int] = {}
    for hops in routed:
        for a, b, _lvl in hops:
            load[(a, b)] = load.get((a, b), 0) + 1
    flows = []
    for (src, src_ip, dst, dst_ip, level), (client, _) in zip(planned, ports):
        hops = paths[(src.name, dst_ip)]
        share = min(rate_of(a, b, lvl, bw, link_rates) / load[(a, b)] for a, b, lvl in hops)
        path = (src.name,) + tuple(b for _a, b, _lvl in hops)
        flows.append(Flow(src.name, src_ip, dst.name, dst_ip, level, round(share, 3), path, client))
    return flows


def mark_tunnels(rows: List[Dict[str, object]], placement: Dict[str, str]) -> Dict[str, object]:
    """With the emulation spread over machines: mark each measured flow whose path crosses machines (a tunnel)
    and summarise those flows' fidelity apart; {} on one machine."""
    if not placement:
        return {}
    for row in rows:
        path = row["path"]
        row["tunnel"] = any(placement[a] != placement[b] for a, b in zip(path, path[1:]))
    tunnel = [r["fidelity"] for r in rows if r["tunnel"]]
    return {"servers": sorted(set(placement.values()), key=lambda s: (s != "localhost", s)),
            "tunnel_flows": len(tunnel), "local_flows": len(rows) - len(tunnel),
            "tunnel_fidelity_min": min(tunnel) if tunnel else None,
            "tunnel_fidelity_median": round(statistics.median(tunnel), 4) if tunnel else None}


def run_reachability(enet, pairs: List[Tuple[str, str]], timeout_s: int = 2) -> Dict[str, object]:
    """Ping every pair (one shell loop per source host, all hosts at once); returns counts and failures."""
    by_src: Dict[str, List[str]] = {}
    for src, ip in pairs:
        by_src.setdefault(src, []).append(ip)
    for src, ips in by_src.items():
        loop = (f"for ip in {' '.join(ips)}; do if ping -c1 -W{timeout_s} -q $ip >/dev/null 2>&1; "
                f"then echo ok $ip; else echo fail $ip; fi; done")
        enet.host(src).sendCmd(loop)
    failed = []
    reachable = 0
    for src in by_src:
        for line in enet.host(src).waitOutput().splitlines():
            word, _, ip = line.strip().partition(" ")
            if word == "ok":
                reachable += 1
            elif word == "fail":
                failed.append(f"{src}->{ip}")
    return {"pairs_tested": len(pairs), "pairs_reachable": reachable, "unreachable": failed}


def run_fidelity(enet, flows: List[Flow], duration_s: float = 5.0,
                 client_ports: Optional[List[int]] = None) -> List[Dict[str, object]]:
    """Run all flows concurrently with iperf3 (each from its client port where given, so its ECMP path is known);
    returns each flow with measured Mbit/s and fidelity."""
    if client_ports is None and flows and all(f.client_port is not None for f in flows):
        client_ports = [f.client_port for f in flows]
    servers, clients = [], []
    try:
        for i, flow in enumerate(flows):
            port = IPERF_BASE_PORT + i
            servers.append(enet.popen(flow.dst, ["iperf3", "-s", "-1", "-B", flow.dst_ip, "-p", str(port)]))
        wait_listening(enet, flows)
        for i, flow in enumerate(flows):
            port = IPERF_BASE_PORT + i
            clients.append(enet.popen(flow.src, ["iperf3", "-c", flow.dst_ip, "-B", flow.src_ip, "-p", str(port),
                                                 "-t", f"{duration_s:g}", "-O", "1", "-J",
                                                 "-C", enet.tcp.congestion_control,
                                                 "--connect-timeout", "5000"] +
                                                (["--cport", str(client_ports[i])] if client_ports else [])))
        deadline = time.monotonic() + duration_s + 30
        results = []
        for flow, proc in zip(flows, clients):
            try:
                out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
                measured, retransmits, error = parse_iperf(out)
            except Exception as exc:  # a stuck client is a failed measurement, not a crash
                measured, retransmits, error = 0.0, None, f"iperf3 did not finish: {exc.__class__.__name__}"
            # The shaped rate counts frames on the wire; iperf3 counts payload: compare like with like.
            wire = wire_bytes(measured, enet.tcp.mtu)
            row = dict(asdict(flow), measured_mbps=round(measured, 3), wire_mbps=round(wire, 3),
                       fidelity=round(wire / flow.shaped_mbps, 4),
                       goodput_fidelity=round(measured / flow.shaped_mbps, 4), retransmits=retransmits)
            if error:
                row["error"] = error
            results.append(row)
        return results
    finally:
        for proc in clients + servers:
            enet.stop_process(proc)


def base_rtt_s(enet, src: str, dst_ip: str, count: int = 5) -> Optional[float]:
    """The smallest of a few ping round trips between two hosts on the idle network, seconds (None if none came
    back)."""
    out = enet.host(src).cmd(f"ping -c {count} -i 0.2 -q {dst_ip}")
    found = re.search(r"= ([\d.]+)/", out)
    return float(found.group(1)) / 1e3 if found else None


def summarize_incast(rows: List[Dict[str, object]], bottleneck_mbps: float) -> Dict[str, object]:
    """The flows' wire rate against the bottleneck's shaped rate, and how evenly they shared it (Jain's index)."""
    wire = [float(r["wire_mbps"]) for r in rows]
    jain = sum(wire) ** 2 / (len(wire) * sum(w * w for w in wire)) if any(wire) else None
    return {"bottleneck_mbps": bottleneck_mbps, "wire_mbps": round(sum(wire), 3),
            "throughput_of_rate": round(sum(wire) / bottleneck_mbps, 4), "jain_fairness": None if jain is None
            else round(jain, 4), "retransmits": sum(r.get("retransmits") or 0 for r in rows)}


def wait_listening(enet, flows: List[Flow], timeout_s: float = 10.0) -> None:
    """Wait until every iperf3 server port is listening in its host."""
    want: Dict[str, set] = {}
    for i, flow in enumerate(flows):
        want.setdefault(flow.dst, set()).add(IPERF_BASE_PORT + i)
    deadline = time.monotonic() + timeout_s
    while want and time.monotonic() < deadline:
        for host in list(want):
            out = enet.host(host).cmd("ss -Hltn")
            listening = {int(f.rsplit(":", 1)[1]) for line in out.splitlines()
                         for f in line.split()[3:4] if ":" in f}
            want[host] -= listening
            if not want[host]:
                del want[host]
        time.sleep(0.1)
    if want:
        raise RuntimeError(f"iperf3 servers did not start on {', '.join(sorted(want))}")


def parse_iperf(out: bytes) -> Tuple[float, Optional[int], Optional[str]]:
    """(received Mbit/s, TCP retransmissions, error) from iperf3 -J output."""
    try:
        data = json.loads(out.decode() if isinstance(out, bytes) else out)
    except ValueError:
        return 0.0, None, "iperf3 printed no JSON"
    if data.get("error"):
        return 0.0, None, data["error"]
    end = data["end"]
    return end["sum_received"]["bits_per_second"] / 1e6, end.get("sum_sent", {}).get("retransmits"), None


FAITHFUL, DEGRADED = 0.85, 0.70  # measured / shaped of the worst flow
CPU_SATURATED_SHARE = 0.5


def summarize_fidelity(rows: List[Dict[str, object]], cpu: Optional[Dict[str, object]] = None) -> Dict[str, object]:
    """Minimum and median of measured/shaped over all flows, retransmissions, and a verdict with its cause."""
    ratios = [r["fidelity"] for r in rows]
    if not ratios:
        return {"fidelity_min": None, "fidelity_median": None, "verdict": "not measured", "cause": "no flows"}
    worst = min(ratios)
    retrans = sum(r.get("retransmits") or 0 for r in rows)
    verdict = "faithful" if worst >= FAITHFUL else "degraded" if worst >= DEGRADED else "not faithful"
    cause = None
    if verdict != "faithful":
        saturated = (cpu or {}).get("saturated_share") or 0
        switch = (cpu or {}).get("switch_saturated_share") or 0
        if switch >= CPU_SATURATED_SHARE:
            cause = f"software switch saturated: its forwarding thread used a full core in {switch:.0%} of " \
                    f"samples (lower --bw)"
        elif saturated >= CPU_SATURATED_SHARE:
            cause = f"CPU saturation: all cores busy in {saturated:.0%} of samples (lower --bw)"
        elif retrans:
            cause = f"{retrans} TCP retransmissions: queues overflow"
        else:
            cause = "the switching path does not reach the shaped rate (lower --bw)"
    goodput = [r.get("goodput_fidelity", r["fidelity"]) for r in rows]
    return {"fidelity_min": worst, "fidelity_median": round(statistics.median(ratios), 4),
            "goodput_fidelity_min": min(goodput),
            "retransmits": retrans, "verdict": verdict, "cause": cause}
