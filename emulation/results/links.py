"""What each link carried, and could have carried, in an iteration of an emulated run: the directed links of every
traced transfer (from the controller's rules and the hosts' routes), its wire bytes, busy time and the time its data
needs at the rate the link could give it, and the measured GST decomposed on the bottleneck link."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from emulation.core.link_rates import rate_of
from emulation.core.topology import Topology

RECEIVER_LATE_S = 0.005           # with stragglers: a receiver this late paced the transfer, not the link
CRITICAL_NEED = 0.8               # links whose data needs this share of the bottleneck's time set the GST


def measured_window(rows: Dict[int, List[dict]], warmup: int) -> Optional[Tuple[float, float]]:
    """Wall-clock span of the iterations the medians keep: from the first start of iteration `warmup` (0 when
    there are too few) to the last end of the last iteration every rank finished."""
    done = min((len(v) for v in rows.values()), default=0)
    if not done:
        return None
    first = warmup if done > warmup else 0
    starts = [rs[first]["start"] for rs in rows.values() if rs[first].get("start") is not None]
    ends = [rs[done - 1]["end"] for rs in rows.values() if rs[done - 1].get("end") is not None]
    return (min(starts), max(ends)) if starts and ends else None


def merged(intervals: List[Tuple[float, float]]) -> List[Tuple[float, float]]:
    """The union of intervals as disjoint intervals."""
    out: List[Tuple[float, float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def union_length(intervals: List[Tuple[float, float]]) -> float:
    """Total length covered by intervals."""
    return sum(b - a for a, b in merged(intervals))


def interface_of(topo: Topology, rank: int, level: int) -> str:
    """The name of a host's interface on a link level."""
    return topo.hosts[rank].interface(level).name


class Paths:
    """The directed links a transfer crosses, from the controller's rules and the hosts' routes (cached per
    source, destination address and TCP ports). With the connection's ports the ECMP choices are known and the
    path is one; without them (older records), only the links common to every path ECMP offers."""

    def __init__(self, topo: Topology, link_rates: Optional[Dict[Tuple[str, str], float]] = None,
                 network: Optional[Topology] = None):
        self.network = network or topo  # the whole network's rules route a job on some hosts, and flows beside it
        self.topo = topo
        self.level_of = {}
        for l in topo.links:
            self.level_of[(l.lower, l.upper)] = self.level_of[(l.upper, l.lower)] = l.level
        self.failed: Optional[Tuple[Tuple[str, str], ...]] = None
        self.link_rates = link_rates or {}

    @property
    def link_rates(self) -> Dict[Tuple[str, str], float]:
        """The links off their level's rate (0: down, routed around as the controller reroutes)."""
        return self._link_rates

    @link_rates.setter
    def link_rates(self, rates: Dict[Tuple[str, str], float]) -> None:
        from controllers.flow_rules import compute_rules
        from emulation.core.addressing import all_host_configs
        from emulation.core.events import failed_links
        failed = failed_links(rates)
        if failed != self.failed:
            self.failed, self.rules = failed, compute_rules(self.network, failed)
            self.configs = all_host_configs(self.network, failed)  # BCube's hosts route around the links down
            self.cache: Dict[tuple, Tuple[Tuple[str, str], ...]] = {}
        self._link_rates = rates

    def rate(self, link: Tuple[str, str], bw: Sequence[float]) -> float:
        """Shaped Mbit/s of a directed link: its level's, or its own (--link-rate)."""
        return rate_of(link[0], link[1], self.level_of[link], bw, self.link_rates)

    def links(self, rank: int, peer: int, level: int,
              ports: Optional[Sequence[int]] = None) -> Tuple[Tuple[str, str], ...]:
        """Directed links (from, to) of rank's transfer to peer's interface on `level` over a connection with
        these (source, destination) TCP ports."""
        tcp_ports = tuple(ports) if ports else None
        key = (rank, peer, level, tcp_ports)
        if key not in self.cache:
            dst = self.topo.hosts[peer].interface(level).ip
            self.cache[key] = self.follow(self.topo.hosts[rank].name, dst, tcp_ports)
        return self.cache[key]

    def egress(self, t: dict) -> int:
        """The level of the interface a traced send left its host by: its level's, unless the host routes it out of
        another (a BCube host whose link on that level is down)."""
        hops = self.links(t["rank"], t["peer"], t["level"], t.get("ports"))
        return self.level_of.get(hops[0], t["level"]) if hops else t["level"]

    def between(self, a: str, b: str, ports: Optional[Sequence[int]] = None) -> Tuple[Tuple[str, str], ...]:
        """Directed links of a connection from host a to host b's primary address (any host of the network)."""
        return self.follow(a, self.network.node(b).ip, tuple(ports) if ports else None)

    def follow(self, source: str, dst_ip: str, tcp_ports) -> Tuple[Tuple[str, str], ...]:
        """The links a packet from host source to dst_ip crosses (those common to every ECMP path without ports)."""
        from controllers.paths import follow_packet
        found = follow_packet(self.network, self.rules, self.configs, source, dst_ip, tcp_ports, self.failed).paths
        hops = [set(zip(p, p[1:])) for p in found]
        common = set.intersection(*hops) if hops else set()
        return tuple(hop for hop in zip(found[0], found[0][1:]) if hop in common) if found else ()


def wire_factors(topo: Topology, rows: Dict[int, List[dict]], sends: List[dict], i: int,
                 shared: Sequence[Tuple[int, int]] = (), paths: Optional[Paths] = None) -> Dict[Tuple[int, int], float]:
    """Per (rank, interface level): bytes the interface sent in iteration i over the payload sent through it
    (headers, ACKs and retransmissions), from the kernel's interface counters. shared: interfaces a background flow
    also sends from, whose counters hold its bytes too: they take the median factor of the others."""
    payload: Dict[Tuple[int, int], int] = {}
    for t in sends:
        key = (t["rank"], paths.egress(t) if paths else t["level"])
        payload[key] = payload.get(key, 0) + t["wire_bytes"]
    out = {}
    for (rank, level), n in payload.items():
        row = rows[rank][i] if i < len(rows.get(rank, [])) else {}
        wire = row.get("tx_bytes", {}).get(interface_of(topo, rank, level), 0)
        out[(rank, level)] = max(1.0, wire / n) if n else 1.0
    if shared:
        clean = [v for k, v in out.items() if k not in shared]
        typical = statistics.median(clean) if clean else 1.0
        for key in shared:
            if key in out:
                out[key] = typical
    return out


def iteration_links(topo: Topology, rows: Dict[int, List[dict]], traces: List[dict], i: int,
                    bw: Sequence[float], paths: Optional[Paths] = None,
                    factors: Optional[Dict[Tuple[int, int], float]] = None,
                    receiver_late_s: Optional[float] = None, skipped: Optional[List[int]] = None,
                    foreign: Sequence[Load] = ()) -> List[dict]:
    """Per directed link that carried data in iteration i: payload and wire bytes, busy time, and the time the
    data needs at the rate the link could give it. A transfer occupies every link of its path from its first
    byte sent to its last byte received (the sender's own end only says when the data entered its socket
    buffer). The rate a link could give is worked out per step: every transfer gets the smallest fair share
    (shaped rate / transfers sharing the link) along its path, and a link offers the sum of its transfers'
    shares, at most its shaped rate -- so a host link feeding a slow upper level is judged against that level.
    factors: the iteration's wire factors, when traces hold only part of it (one phase).
    receiver_late_s: with stragglers in the scenario, a transfer whose receiver began receiving this much later
    than its sender began sending waited for a rank still computing: it counts towards the sharing but not towards
    the link's busy time or need (the link was paced by the receiver, not the emulator); skipped counts them.
    foreign: the scenario's own load (background flows, other jobs): on a link they cross, the spans in which they
    sent (within the job's use of it) count as busy and their bytes towards its need, so a link that was full is
    judged full, however TCP split it, and a link busy with them is not idle."""
    paths = paths or Paths(topo)
    out: Dict[Tuple[str, str], dict] = {}
    for transfers in step_transfers(topo, rows, traces, i, paths, factors, receiver_late_s, skipped).values():
        add_step(out, transfers, paths, bw)
    for link, e in out.items():
        crossing = [series for links, series in foreign if link in links]
        if crossing:  # the link also carried the scenario's flows: judge the link as a whole while either used it
            lo, hi = min(a for a, _ in e["intervals"]), max(b for _, b in e["intervals"])
            e["intervals"] = e["intervals"] + [(max(a, lo), min(b, hi)) for series in crossing
                                               for a, b in sending_spans(series) if min(b, hi) > max(a, lo)]
            extra = sum(moved(series, a, b) for series in crossing for a, b in merged(e["intervals"]))
            if extra:
                e["foreign_bytes"] = extra
                e["need_payload_s"] += extra / e["shaped"]
                e["need_s"] += extra / e["shaped"]
        e["busy_s"] = union_length(e["intervals"])
    return list(out.values())


def step_transfers(topo: Topology, rows: Dict[int, List[dict]], traces: List[dict], i: int, paths: Paths,
                   factors: Optional[Dict[Tuple[int, int], float]], receiver_late_s: Optional[float],
                   skipped: Optional[List[int]]) -> Dict[tuple, List[dict]]:
    """Iteration i's sends by step (phases' steps apart): each one's links, from its first byte sent to its last
    byte received, its payload and wire bytes, and whether its receiver was late."""
    receives = [t for t in traces if t["iteration"] == i and t["dir"] == "recv" and t["end"] is not None]
    arrived = {(t["rank"], t["peer"], t["stream"], t["step"], t.get("phase")): t["end"] for t in receives}
    began = {(t["rank"], t["peer"], t["stream"], t["step"], t.get("phase")): t["start"] for t in receives}
    sends = [t for t in traces if t["iteration"] == i and t["dir"] == "send" and t["start"] is not None]
    factors = factors or wire_factors(topo, rows, sends, i, paths=paths)
    steps: Dict[tuple, List[dict]] = {}
    for t in sends:
        key = (t["peer"], t["rank"], t["stream"], t["step"], t.get("phase"))
        end = arrived.get(key, t["end"])
        late = receiver_late_s is not None and (began.get(key) or t["start"]) > t["start"] + receiver_late_s
        if late and skipped is not None:
            skipped.append(1)
        steps.setdefault((t["stream"], t["step"], t.get("phase")), []).append(
            {"links": paths.links(t["rank"], t["peer"], t["level"], t.get("ports")), "start": t["start"],
             "end": max(end, t["end"]), "payload": t["wire_bytes"],
             "wire": t["wire_bytes"] * factors.get((t["rank"], paths.egress(t)), 1.0), "late": late})
    return steps


def add_step(out: Dict[Tuple[str, str], dict], transfers: List[dict], paths: Paths, bw: Sequence[float]) -> None:
    """One step's transfers onto their links: every transfer gets the smallest fair share along its path, a link
    offers the sum of its transfers' shares (at most its shaped rate); late transfers count only in the sharing."""
    sharing: Dict[Tuple[str, str], int] = {}
    for t in transfers:
        for link in t["links"]:
            sharing[link] = sharing.get(link, 0) + 1
    offered: Dict[Tuple[str, str], float] = {}
    for t in transfers:
        share = min((paths.rate(l, bw) / sharing[l] for l in t["links"]), default=0.0)
        for link in t["links"]:
            offered[link] = offered.get(link, 0.0) + share
    for t in [t for t in transfers if not t["late"]]:
        for link in t["links"]:
            level, shaped = paths.level_of[link], paths.rate(link, bw)
            rate = min(shaped, offered[link]) * 1e6 / 8
            e = out.setdefault(link, {"link": ">".join(link), "level": level, "payload": 0, "wire": 0.0,
                                      "need_payload_s": 0.0, "need_s": 0.0, "intervals": [],
                                      "shaped": shaped * 1e6 / 8})
            e["payload"] += t["payload"]
            e["wire"] += t["wire"]
            e["need_payload_s"] += t["payload"] / rate
            e["need_s"] += t["wire"] / rate
            e["intervals"].append((t["start"], t["end"]))


def sending_spans(series: List[Tuple[float, float]]) -> List[Tuple[float, float]]:
    """The spans of a cumulative (time, bytes) series in which its bytes grew."""
    return [(t0, t1) for (t0, b0), (t1, b1) in zip(series, series[1:]) if b1 > b0 and t1 > t0]


Load = Tuple[frozenset, List[Tuple[float, float]]]  # a background flow's links and its (time, bytes received)


def moved(series: List[Tuple[float, float]], a: float, b: float) -> float:
    """Bytes a cumulative (time, bytes) series grew by between a and b (linear between its points)."""
    def at(t: float) -> float:
        if not series or t <= series[0][0]:
            return series[0][1] if series else 0.0
        for (t0, b0), (t1, b1) in zip(series, series[1:]):
            if t <= t1:
                return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b1
        return series[-1][1]
    return max(0.0, at(b) - at(a))


def phase_links(topo: Topology, rows: Dict[int, List[dict]], traces: List[dict], i: int, bw: Sequence[float],
                paths: Paths, factors: Dict[Tuple[int, int], float],
                receiver_late_s: Optional[float] = None, foreign: Sequence[Load] = ()) -> Optional[List[List[dict]]]:
    """iteration_links of each phase of iteration i apart, in the order the phases started (None for one phase)."""
    first: Dict[str, float] = {}
    for t in traces:
        if t["iteration"] == i and t["start"] is not None:
            name = t.get("phase") or ""
            first[name] = min(first.get(name, t["start"]), t["start"])
    if len(first) < 2:
        return None
    return [iteration_links(topo, rows, [t for t in traces if (t.get("phase") or "") == name], i, bw, paths, factors,
                            receiver_late_s, foreign=foreign) for name in sorted(first, key=first.get)]


def step_skew(traces: List[dict], i: int) -> List[float]:
    """For each (stream, step) of iteration i: the spread of the ranks' first transfer start."""
    starts: Dict[Tuple[int, int], Dict[int, float]] = {}
    for t in traces:
        if t["iteration"] == i and t["start"] is not None:
            per = starts.setdefault((t["stream"], t["step"]), {})
            per[t["rank"]] = min(per.get(t["rank"], t["start"]), t["start"])
    return [max(v.values()) - min(v.values()) for v in starts.values() if len(v) > 1]


def clipped_union(intervals: List[Tuple[float, float]], lo: float, hi: float) -> float:
    """Length of the union of intervals inside [lo, hi]."""
    return union_length([(max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo)])


def decompose(iteration: dict, links: List[dict], theory_s: float,
              phases: Optional[List[List[dict]]] = None) -> Optional[Dict[str, float]]:
    """Measured GST = theory + plan + headers + below rate + idle - early, on the bottleneck link of the
    iteration (the one whose data needs longest at the rate it could get): plan = its payload time beyond
    theory; headers = its wire bytes beyond payload (headers, ACKs, retransmissions); below rate = busy time
    beyond what its wire bytes need (sending slower than it could); idle = the part of the GST window (last
    rank's start to last rank's end) in which the link had nothing to send; early = its busy time before that
    window opened (ranks that start early get work done while a straggler still computes).
    phases: the links of each phase of the synchronization apart (Parameter Flow's push, then its broadcast),
    when it has several: then the bottleneck is a chain, each phase's own in turn (one link would sit idle
    through the phases that load another); phases over before the window opens (iBatch's pulls) are left out.
    Synchronization in several windows (expert parallelism's all-to-alls in forward and backward, then its
    all-reduce: `windows`) is judged inside all of them; early is then the busy time before each window opened."""
    windows = merged([tuple(w) for w in iteration.get("windows") or [(iteration["sync_start"], iteration["sync_end"])]])
    lo = windows[0][0]
    groups = [g for g in (phases or [links]) if g and max(e for l in g for _, e in l["intervals"]) > lo]
    if not groups:
        return None
    chain = [bottleneck_of(g) for g in groups]
    intervals = [iv for b in chain for iv in b["intervals"]]
    busy_in = sum(clipped_union(intervals, a, b) for a, b in windows)
    early = clipped_union(intervals, float("-inf"), windows[-1][1]) - busy_in  # before a window opened
    need, need_payload = sum(b["need_s"] for b in chain), sum(b["need_payload_s"] for b in chain)
    measured = iteration["gst_s"]
    return {"theory_s": theory_s, "measured_s": measured, "plan_s": need_payload - theory_s,
            "headers_s": need - need_payload, "below_rate_s": busy_in + early - need,
            "idle_s": measured - busy_in, "early_s": early,
            "bottleneck": " then ".join(f"{b['link']} L{b['level']}" for b in chain)}


def hashed_connections(sends: List[dict], paths: Paths) -> set:
    """The connections of these sends that had equal-cost paths to choose from, each on the one its TCP ports hashed
    to (rank, peer, level, ports)."""
    connections = {(t["rank"], t["peer"], t["level"], tuple(t["ports"])) for t in sends if t.get("ports")}
    return {c for c in connections if len(paths.links(*c[:3])) < len(paths.links(*c))}


def bottleneck_of(links: List[dict]) -> dict:
    """The link whose payload needs longest at the rate it could get; of links that need as long, the one carrying
    the most (the server's downlink, not one of the uplinks that share it fairly). Payload, not wire bytes: a rank's
    wire factor covers its whole iteration, so a worker that also relays the broadcast would look slower in the
    push."""
    longest = max(l["need_payload_s"] for l in links)
    return max((l for l in links if l["need_payload_s"] >= longest * (1 - 1e-6)), key=lambda l: l["payload"])


@dataclass
class LinkTally:
    """What the judged iterations' links added up to: per level (and "tunnels") the wire bytes, busy and needed
    time (all links and the critical ones), each iteration's decomposition, the step skews."""

    per_level: Dict[object, Dict[str, float]] = field(default_factory=dict)
    parts: List[dict] = field(default_factory=list)
    skews: List[float] = field(default_factory=list)
    skipped: List[int] = field(default_factory=list)
    judged: int = 0
    shared_bottleneck: int = 0
    used_links: set = field(default_factory=set)
    hashed: set = field(default_factory=set)  # the connections ECMP gave a choice of paths (their ports chose one)

    def add(self, links: List[dict], placement: Optional[Dict[str, str]]) -> None:
        """One iteration's links, each into its level's (and the tunnels') sums."""
        longest = max((l["need_s"] for l in links), default=0.0)
        self.used_links.update(tuple(l["link"].split(">")) for l in links)
        for l in links:
            a, b = l["link"].split(">")
            for group in [l["level"]] + (["tunnels"] if placement and placement[a] != placement[b] else []):
                acc = self.per_level.setdefault(group, dict.fromkeys(("wire", "busy", "need", "crit_busy",
                                                                      "crit_need"), 0.0))
                acc["wire"] += l["wire"]
                acc["busy"] += l["busy_s"]
                acc["need"] += l["need_s"]
                if l["need_s"] >= CRITICAL_NEED * longest:
                    acc["crit_busy"] += l["busy_s"]
                    acc["crit_need"] += l["need_s"]


def link_group(acc: Dict[str, float], shaped_mbps: Optional[float]) -> Dict[str, object]:
    """Shaped, available and achieved rate and fidelity of a group of links (a level, or the tunnels)."""
    return {"shaped_mbps": shaped_mbps,
            "available_mbps": round(acc["wire"] * 8 / acc["need"] / 1e6, 3) if acc["need"] else None,
            "achieved_mbps": round(acc["wire"] * 8 / acc["busy"] / 1e6, 3) if acc["busy"] else None,
            "fidelity": round(acc["need"] / acc["busy"], 4) if acc["busy"] else None,
            "critical_fidelity": round(acc["crit_need"] / acc["crit_busy"], 4) if acc["crit_busy"] else None}
