"""How faithful a run's emulation was, judged after the run: CPU load while it ran (sampled live by sampling.py),
links' achieved rate while they had data to send, the kernel's TCP and queue counters, step skew, and the
measured/theory GST decomposed into its causes."""

from __future__ import annotations

import os
import statistics
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from emulation.core.link_rates import rate_of
from emulation.run.results import WARMUP
from emulation.core.topology import Topology

FAITHFUL_EMULATION_SHARE = 0.10   # link time lost to the emulator, as a share of theory
DEGRADED_EMULATION_SHARE = 0.35
FAITHFUL_LEVEL = 0.85             # achieved / shaped while a link has data to send
DEGRADED_LEVEL = 0.70
CRITICAL_NEED = 0.8               # links whose data needs this share of the bottleneck's time set the GST
CPU_SATURATED_SAMPLES = 0.5       # share of saturated samples that makes CPU the cause
DROP_SHARE = 0.01                 # queue drops per segment sent above which TCP loss recovery distorts timing
OVER_BUDGET_SHARE = 0.05          # share of rank-iterations whose real compute overran --compute-time
OVER_RATE_LEVEL = 1.15            # achieved / shaped above which the shaper did not hold the rate
FAR_BELOW_THEORY = 0.25           # measured / theory GST below which the links cannot have been at their rate
CODEC_SHARE_NAMED = 0.25  # all ranks' compression CPU time over the cores, as a share of GST, named as the cause
SPURIOUS_RTO_PER_WORKER_ITERATION = 1.0  # spurious timeouts per worker and iteration worth a note
STEADY_CV = 0.10                  # per-iteration GST CV above which timings are unsteady (the benchmark's bound)
RECEIVER_LATE_S = 0.005           # with stragglers: a receiver this late paced the transfer, not the link


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
    receives = [t for t in traces if t["iteration"] == i and t["dir"] == "recv" and t["end"] is not None]
    arrived = {(t["rank"], t["peer"], t["stream"], t["step"], t.get("phase")): t["end"] for t in receives}
    began = {(t["rank"], t["peer"], t["stream"], t["step"], t.get("phase")): t["start"] for t in receives}
    sends = [t for t in traces if t["iteration"] == i and t["dir"] == "send" and t["start"] is not None]
    factors = factors or wire_factors(topo, rows, sends, i, paths=paths)
    steps: Dict[Tuple[int, int, Optional[str]], List[dict]] = {}
    for t in sends:
        key = (t["peer"], t["rank"], t["stream"], t["step"], t.get("phase"))
        end = arrived.get(key, t["end"])
        late = receiver_late_s is not None and (began.get(key) or t["start"]) > t["start"] + receiver_late_s
        if late and skipped is not None:
            skipped.append(1)
        steps.setdefault((t["stream"], t["step"], t.get("phase")), []).append(  # phases: steps of plans apart
            {"links": paths.links(t["rank"], t["peer"], t["level"], t.get("ports")), "start": t["start"],
             "end": max(end, t["end"]), "payload": t["wire_bytes"],
             "wire": t["wire_bytes"] * factors.get((t["rank"], paths.egress(t)), 1.0), "late": late})
    out: Dict[Tuple[str, str], dict] = {}
    for transfers in steps.values():
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


def bottleneck_of(links: List[dict]) -> dict:
    """The link whose payload needs longest at the rate it could get; of links that need as long, the one carrying
    the most (the server's downlink, not one of the uplinks that share it fairly). Payload, not wire bytes: a rank's
    wire factor covers its whole iteration, so a worker that also relays the broadcast would look slower in the
    push."""
    longest = max(l["need_payload_s"] for l in links)
    return max((l for l in links if l["need_payload_s"] >= longest * (1 - 1e-6)), key=lambda l: l["payload"])


def median_of(dicts: List[Dict[str, float]], key: str) -> Optional[float]:
    """Median of one key over dicts."""
    values = [d[key] for d in dicts if d.get(key) is not None]
    return statistics.median(values) if values else None


def host_counters(topo: Optional[Topology], rows: Dict[int, List[dict]], finals: Dict[int, dict],
                  leave_out: Sequence[int] = ()) -> Dict[str, dict]:
    """Per host: TCP retransmissions and timeouts over the run (but in the iterations left out: the scenario's), drops
    in its own queues."""
    out = {}
    for r, rank_rows in sorted(rows.items()):
        name = topo.hosts[r].name if topo is not None else f"rank{r}"
        tcp: Dict[str, int] = {}
        for i, row in enumerate(rank_rows):
            if row.get("iteration", i) in leave_out:
                continue
            for k, v in (row.get("tcp") or {}).items():
                tcp[k] = tcp.get(k, 0) + v
        qdisc = (finals.get(r, {}).get("net") or {}).get("qdisc", {})
        out[name] = {"retrans_segs": tcp.get("retrans_segs", 0), "rto_timeouts": tcp.get("rto_timeouts", 0),
                     "loss_probes": tcp.get("loss_probes", 0), "out_segs": tcp.get("out_segs", 0),
                     "dsack_received": tcp.get("dsack_received", 0),
                     "qdisc_drops": sum(q.get("drops", 0) for q in qdisc.values())}
    return out


def link_group(acc: Dict[str, float], shaped_mbps: Optional[float]) -> Dict[str, object]:
    """Shaped, available and achieved rate and fidelity of a group of links (a level, or the tunnels)."""
    return {"shaped_mbps": shaped_mbps,
            "available_mbps": round(acc["wire"] * 8 / acc["need"] / 1e6, 3) if acc["need"] else None,
            "achieved_mbps": round(acc["wire"] * 8 / acc["busy"] / 1e6, 3) if acc["busy"] else None,
            "fidelity": round(acc["need"] / acc["busy"], 4) if acc["busy"] else None,
            "critical_fidelity": round(acc["crit_need"] / acc["crit_busy"], 4) if acc["crit_busy"] else None}


def report(topo: Optional[Topology], bw: Sequence[float], theory_s: float, iterations: List[dict],
           rows: Dict[int, List[dict]], traces: List[dict], finals: Dict[int, dict], cpu: Dict[str, object],
           emulated: bool, switch_port_drops: Optional[Dict[str, int]] = None,
           placement: Optional[Dict[str, str]] = None,
           link_rates: Optional[Dict[Tuple[str, str], float]] = None,
           stragglers: bool = False, background: Sequence[dict] = (),
           network: Optional[Topology] = None,
           schedule: Optional[Callable[[int], Optional[Tuple[Dict[Tuple[str, str], float], float]]]] = None
           ) -> Dict[str, object]:
    """The fidelity section of summary.json, with a verdict and its dominant cause; with a placement over
    several machines, also the links through tunnels on their own; stragglers: the scenario draws compute per rank
    (or slows ranks), so transfers that waited for a receiver still computing are the scenario's, not judged;
    background: traffic beside the job (background flows, other jobs' transfers): per flow its ends, its TCP
    ports (None: any path ECMP offers), its received bytes over time, optionally a label; its share of the links is
    the scenario's;
    network: the whole network when the job runs on some of its hosts (topo is then the job's view);
    schedule: links that change during the run: per iteration the shaped link rates and the closed-form GST in force
    (None for an iteration the network changed under, which is not judged)."""
    kept = [it for it in iterations[WARMUP:]] or iterations
    in_force = {it["iteration"]: schedule(it["iteration"]) for it in kept} if schedule else {}
    changed_under = sorted(i for i, s in in_force.items() if s is None)
    kept = [it for it in kept if it["iteration"] not in changed_under] or kept[:0]
    theories = [in_force[it["iteration"]][1] if schedule else theory_s for it in kept]
    if schedule and theories:
        theory_s = statistics.median(theories)
    ratios = [it["gst_s"] / t for it, t in zip(kept, theories) if t]  # each iteration against its own closed form
    out: Dict[str, object] = {
        "gst_ratio": statistics.median(ratios) if ratios else None,
        "gst_cv": (statistics.pstdev(ratios) / statistics.mean(ratios)) if len(ratios) > 1 and statistics.mean(ratios)
        else None,
        "cpu": cpu,
        "compute_over_budget": sum(it.get("compute_over_budget", 0) for it in kept),
        "compute_rank_iterations": sum(it.get("workers", 1) for it in kept)}
    codec = [it["split"]["codec_s"] for it in kept if "codec_s" in (it.get("split") or {})]
    if codec:  # CPU seconds per rank and iteration that an accelerator would spend compressing
        out["codec_cpu_s"] = round(statistics.median(codec), 4)
        out["codec_cores_s"] = round(out["codec_cpu_s"] * len(rows) / (os.cpu_count() or 1), 4)  # all ranks
    if not emulated or topo is None:
        out.update(verdict="not measured", cause="loopback run: no emulated network")
        return out
    if not kept:  # nothing to judge: a verdict here would vouch for timings no iteration gave
        out.update(verdict="not measured", cause="no iteration finished: nothing was measured" if not iterations
                   else "every iteration had the network change under it")
        return out
    parts, skews = [], []
    per_level: Dict[int, Dict[str, float]] = {}
    paths = Paths(topo, link_rates, network)
    late_s, skipped, judged = RECEIVER_LATE_S if stragglers else None, [], 0
    index = {h.name: h.index for h in topo.hosts}
    # a flow from one of the job's hosts leaves its level-0 interface, whose counters then hold its bytes too
    senders = [(index[b["src"]], 0) for b in background if b["src"] in index]
    foreign = [(frozenset(paths.between(b["src"], b["dst"], b.get("ports"))), list(b["received"]))
               for b in background]
    shared_bottleneck, used_links = 0, set()
    for it, theory_i in zip(kept, theories):
        i = it["iteration"]
        if schedule:
            paths.link_rates = in_force[i][0]
        mine = [t for t in traces if t["iteration"] == i]
        factors = wire_factors(topo, rows, [t for t in mine if t["dir"] == "send" and t["start"] is not None], i,
                               senders, paths)
        links = iteration_links(topo, rows, mine, i, bw, paths, factors, late_s, skipped, foreign)
        judged += sum(1 for t in mine if t["dir"] == "send" and t["start"] is not None)
        longest = max((l["need_s"] for l in links), default=0.0)
        used_links.update(tuple(l["link"].split(">")) for l in links)
        for l in links:
            a, b = l["link"].split(">")
            groups = [l["level"]] + (["tunnels"] if placement and placement[a] != placement[b] else [])
            for group in groups:
                acc = per_level.setdefault(group, dict.fromkeys(("wire", "busy", "need", "crit_busy", "crit_need"),
                                                                0.0))
                acc["wire"] += l["wire"]
                acc["busy"] += l["busy_s"]
                acc["need"] += l["need_s"]
                if l["need_s"] >= CRITICAL_NEED * longest:
                    acc["crit_busy"] += l["busy_s"]
                    acc["crit_need"] += l["need_s"]
        d = decompose(it, links, theory_i, phase_links(topo, rows, mine, i, bw, paths, factors, late_s, foreign))
        if d and foreign:
            shared_bottleneck += any(tuple(d["bottleneck"].split(" ")[0].split(">")) in links_ for links_, _
                                     in foreign)
        if d:
            parts.append(d)
        skews += step_skew(mine, i)
    tunnels = per_level.pop("tunnels", None)
    out["levels"] = {f"L{level}": link_group(acc, bw[level]) for level, acc in sorted(per_level.items())}
    if placement:
        out["tunnels"] = link_group(tunnels, None) if tunnels else {"note": "no data crossed machines"}
    notes = []
    if foreign:
        crossed = sorted({b.get("label") or b["src"] + "-" + b["dst"] for b, (links_, _) in zip(background, foreign)
                          if links_ & used_links})
        notes.append(f"traffic beside the job: {', '.join(crossed) or 'no flow'} shared the job's links (the bottleneck "
                     f"in {shared_bottleneck} of {len(parts)} iterations); a link is judged by the job's bytes and theirs "
                     f"together, so the share TCP gave them, and how it varied, is the scenario's, not the emulator's")
    if schedule:
        notes.append("link events: each iteration judged at the link rates in force"
                     + (f"; iteration{'s' if len(changed_under) > 1 else ''} {', '.join(map(str, changed_under))} "
                        f"had the network change under {'them' if len(changed_under) > 1 else 'it'} and "
                        f"{'are' if len(changed_under) > 1 else 'is'} not judged" if changed_under else ""))
    if stragglers:
        notes.append(f"stragglers: {len(skipped)} of {judged} transfers waited for a receiver still computing (the "
                     f"scenario's drawn compute, not the emulator); links are judged on the others")
    if notes:
        out["scenario_note"] = "; ".join(notes)
    out["background"] = bool(foreign)
    out["step_skew_s"] = {"median": statistics.median(skews) if skews else None, "max": max(skews) if skews else None}
    if parts:
        out["decomposition_median_s"] = {k: median_of(parts, k) for k in
                                         ("theory_s", "measured_s", "plan_s", "headers_s", "below_rate_s", "idle_s",
                                          "early_s")}
        out["decomposition_median_s"]["bottleneck"] = statistics.mode(p["bottleneck"] for p in parts)
    hosts = host_counters(topo, rows, finals, changed_under)
    if changed_under:  # a link down or slower under an iteration: its retransmissions and timeouts are the event's
        everything = host_counters(topo, rows, finals)
        out["event_tcp"] = {k: sum(everything[h][k] - hosts[h][k] for h in hosts) for k in ("retrans_segs", "rto_timeouts")}
        if any(out["event_tcp"].values()):
            out["scenario_note"] = out.get("scenario_note", "") + (
                f"; the TCP retransmissions ({out['event_tcp']['retrans_segs']}) and timeouts "
                f"({out['event_tcp']['rto_timeouts']}) in the iterations the network changed under are the event's, "
                f"not counted against the emulator")
    out["hosts"] = hosts
    out["tcp_totals"] = {k: sum(h[k] for h in hosts.values()) for k in
                         ("retrans_segs", "rto_timeouts", "loss_probes", "dsack_received", "qdisc_drops", "out_segs")}
    out["switch_port_drops"] = switch_port_drops or {}
    out["spurious_rto"] = sum(spurious_timeouts(h) for h in hosts.values())
    worker_iterations = sum(len(r) for r in rows.values())
    out["spurious_rto_per_worker_iteration"] = round(out["spurious_rto"] / worker_iterations, 3) \
        if worker_iterations else None
    out.update(verdict_and_cause(out, len(kept), theory_s))
    return out


def spurious_timeouts(host: Dict[str, int]) -> float:
    """A host's retransmission timeouts that were spurious, estimated: its timeouts times the share of its
    retransmitted segments the receivers reported (D-SACK) as duplicates."""
    retrans, timeouts = host.get("retrans_segs") or 0, host.get("rto_timeouts") or 0
    if not retrans or not timeouts:
        return 0.0
    return timeouts * min(1.0, (host.get("dsack_received") or 0) / retrans)


def spurious_retransmissions(totals: Dict[str, int]) -> bool:
    """True when the receivers reported (D-SACK) nearly every retransmitted segment as a duplicate."""
    retrans = totals.get("retrans_segs") or 0
    return retrans > 0 and (totals.get("dsack_received") or 0) >= 0.9 * retrans


def verdict_and_cause(fid: Dict[str, object], iterations: int, theory_s: float) -> Dict[str, object]:
    """faithful / degraded / not faithful, and the dominant cause of what the emulator added."""
    d = fid.get("decomposition_median_s") or {}
    cpu = fid.get("cpu") or {}
    cpu_saturated = (cpu.get("saturated_share") or 0) >= CPU_SATURATED_SAMPLES
    switch_saturated = (cpu.get("switch_saturated_share") or 0) >= CPU_SATURATED_SAMPLES
    level_min = min((l["critical_fidelity"] for l in fid.get("levels", {}).values() if l.get("critical_fidelity")),
                    default=None)
    level_max = max((l["critical_fidelity"] for l in fid.get("levels", {}).values() if l.get("critical_fidelity")),
                    default=None)
    over_rate = level_max is not None and level_max > OVER_RATE_LEVEL
    far_below = fid.get("gst_ratio") is not None and fid["gst_ratio"] < FAR_BELOW_THEORY
    spurious = fid.get("spurious_rto_per_worker_iteration") or 0
    totals = fid.get("tcp_totals", {})
    # What the emulator added to the GST: the bottleneck's slow sending and idle time, less the work it did before
    # the window opened (its early sending ran below rate too, but not in the GST: clipping the credit on its own
    # charged ranks' early start, as on a graph whose ECMP collisions load one link from the first step, to it).
    emulator_s = max(0.0, max(0.0, d.get("below_rate_s") or 0) + (d.get("idle_s") or 0) - (d.get("early_s") or 0))
    share = emulator_s / theory_s if theory_s and d else None
    causes = []
    if over_rate:
        causes.append((5000.0 + level_max, f"links carried {level_max:.2f} times their shaped rate: the shaper did not "
                                           f"hold it, so the timings are not those of the asked-for links (on the "
                                           f"userspace datapath switch->host is shaped only with --shape-ingress, "
                                           f"which incast into a server needs)"))
    if far_below:
        causes.append((4000.0 + 1 / max(fid["gst_ratio"], 1e-12),
                       f"GST is {fid['gst_ratio']:.2g} of theory: faster than the shaped links can carry the data"))
    cv = fid.get("gst_cv")
    # background flows change the job's share from one iteration to the next: a varying GST is then the scenario's
    unsteady = cv is not None and cv > STEADY_CV and not fid.get("background")
    if unsteady:
        why = f"per-iteration GST varies (CV {cv:.2f})"
        if spurious > SPURIOUS_RTO_PER_WORKER_ITERATION:
            why += (f" with {spurious:.1f} spurious TCP retransmission timeouts per worker and iteration (the ACKs "
                    f"came later than the timer; nothing was lost)")
        causes.append((0.5 + cv, why))
    if cpu_saturated:
        # Saturated resources are root causes; slow or idle links are what they look like from the network.
        causes.append((1000.0 + cpu["saturated_share"], f"CPU saturation: all cores busy in {cpu['saturated_share']:.0%} of samples"))
    gst = (fid.get("gst_ratio") or 0) * theory_s
    codec_share = (fid.get("codec_cores_s") or 0) / gst if gst else 0
    if codec_share > CODEC_SHARE_NAMED:  # the machine's cores were busy compressing for that share of the GST
        causes.append((1000.0 + codec_share, f"gradient compression on the CPU: {fid['codec_cpu_s']:.2f} s per rank "
                                             f"and iteration, all ranks together {codec_share:.0%} of the GST on this "
                                             f"machine's cores (the papers compress on the accelerator)"))
    if switch_saturated:
        causes.append((1000.0 + cpu["switch_saturated_share"], f"software switch saturated: its forwarding thread used a full core in "
                            f"{cpu['switch_saturated_share']:.0%} of samples (lower --bw or use --dilation)"))
    if level_min is not None and level_min < FAITHFUL_LEVEL:
        causes.append((2.0 + (FAITHFUL_LEVEL - level_min),
                       f"links reach only {level_min:.2f} of the shaped rate while sending"))
    if d:
        if (d.get("below_rate_s") or 0) > 0.02 * theory_s:
            causes.append((d["below_rate_s"] / theory_s, "links busy below the shaped rate (TCP or switching)"))
        idle = d.get("idle_s") or 0
        if idle > 0.02 * theory_s:
            if totals.get("rto_timeouts"):
                why = f"links idle during synchronization; {totals['rto_timeouts']} TCP retransmission timeouts"
                if spurious_retransmissions(totals):
                    why += (" (spurious: the receivers got every retransmitted segment twice, so nothing was lost and "
                            "the ACKs came later than the timer; a larger --rto-min avoids them)")
            elif (fid.get("step_skew_s") or {}).get("median"):
                why = f"links idle during synchronization (ranks start steps up to " \
                      f"{fid['step_skew_s']['median'] * 1000:.0f} ms apart, median)"
            else:
                why = "links idle during synchronization"
            causes.append((idle / theory_s, why))
    drop_share = (totals.get("qdisc_drops") or 0) / max(1, totals.get("out_segs") or 0)
    if drop_share > DROP_SHARE:
        causes.append((drop_share, f"{totals['qdisc_drops']} packets ({drop_share:.1%}) dropped in host queues"))
    over = fid.get("compute_over_budget") or 0
    over_share = over / max(1, fid.get("compute_rank_iterations") or 1)
    if over_share > OVER_BUDGET_SHARE:
        causes.append((0.01 + over_share, f"real compute exceeded --compute-time in {over} of "
                                          f"{fid.get('compute_rank_iterations')} rank-iterations after warm-up"))
    # A saturated CPU or switch thread warns (degraded); a run is not faithful when the network shows the damage.
    if (level_min is not None and level_min < DEGRADED_LEVEL) or \
            (share is not None and share > DEGRADED_EMULATION_SHARE) or over_rate or far_below:
        verdict = "not faithful"
    elif cpu_saturated or switch_saturated or (level_min is not None and level_min < FAITHFUL_LEVEL) or \
            (share is not None and share > FAITHFUL_EMULATION_SHARE) or drop_share > DROP_SHARE or \
            over_share > OVER_BUDGET_SHARE or unsteady:
        verdict = "degraded"
    else:
        verdict = "faithful"
    cause = max(causes)[1] if causes and verdict != "faithful" else None
    out = {"verdict": verdict, "cause": cause, "emulator_share": round(share, 4) if share is not None else None}
    if spurious > SPURIOUS_RTO_PER_WORKER_ITERATION and not unsteady:  # counted; judged by what it did to timings
        out["timer_note"] = (f"{spurious:.1f} spurious TCP retransmission timeouts per worker and iteration (ACKs "
                             f"later than --rto-min, nothing lost); the timings held steady (CV {cv or 0:.3f})")
    queue_drops = (fid.get("switch_port_drops") or {}).get("switch_queue_drops") or 0
    if queue_drops:  # congestion inside the network: part of what is studied, so it informs, it does not judge
        out["network_note"] = (f"{queue_drops} packets dropped at switch-side queues: congestion in the "
                               f"network under study (ECMP collisions, incast), which a flow model without loss "
                               f"does not show")
    return out


def one_line(fid: Dict[str, object]) -> str:
    """The line printed after every run."""
    parts = [f"fidelity: {fid.get('verdict')}"]
    if fid.get("gst_ratio") is not None:
        parts.append(f"GST/theory {fid['gst_ratio']:.2f}")
    if fid.get("gst_cv") is not None:
        parts.append(f"CV {fid['gst_cv']:.2f}")
    levels = fid.get("levels") or {}
    if levels:
        parts.append("links " + " ".join(f"{k} {v['critical_fidelity']:.2f}" for k, v in levels.items()
                                         if v.get("critical_fidelity")))
    cpu = fid.get("cpu") or {}
    if cpu.get("busy_mean") is not None:
        parts.append(f"CPU {cpu['busy_mean']:.0%}")
    if cpu.get("switch_thread_mean") is not None:
        parts.append(f"switch thread {cpu['switch_thread_mean']:.0%}")
    if fid.get("cause"):
        parts.append(f"cause: {fid['cause']}")
    if fid.get("network_note"):
        parts.append(f"network: {fid['network_note']}")
    if fid.get("scenario_note"):
        parts.append(f"scenario: {fid['scenario_note']}")
    if fid.get("timer_note"):
        parts.append(f"TCP: {fid['timer_note']}")
    return ", ".join(parts)
