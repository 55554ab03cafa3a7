"""How faithful a run's emulation was, judged after the run from its evidence (the ranks' records and traces, the
CPU sampled live, the kernel's TCP and queue counters, the scenario's own load): links' achieved rate while they had
data to send (links.py), step skew, the measured/theory GST decomposed into its causes, and a verdict from a table
of cause rules."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from emulation.core.topology import Topology
from emulation.results.cause_rules import Verdict, verdict_and_cause
from emulation.results.iterations import WARMUP
from emulation.results.links import (RECEIVER_LATE_S, LinkTally, Paths, decompose, hashed_connections,
                                     iteration_links, link_group, phase_links, step_skew, wire_factors)

TCP_KEYS = ("retrans_segs", "rto_timeouts", "loss_probes", "dsack_received", "qdisc_drops", "out_segs")


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


Schedule = Callable[[int], Optional[Tuple[Dict[Tuple[str, str], float], float]]]


@dataclass
class Evidence:
    """What a run left to judge it by. topo: the job's view (None: loopback); bw: shaped Mbit/s per level;
    theory_s: the closed-form GST (in the run's own time); iterations: per_iteration's rows (not dilated); rows,
    traces, finals: the ranks' records; cpu: the CPU sampler's report; emulated: False for loopback.
    placement: node -> machine with several machines (links through tunnels are judged apart too);
    link_rates: links off their level's rate; stragglers: the scenario draws compute per rank (or slows ranks), so
    transfers that waited for a receiver still computing are the scenario's, not judged;
    background: traffic beside the job (background flows, other jobs' transfers): per flow its ends, its TCP ports
    (None: any path ECMP offers), its received bytes over time, optionally a label; its share of the links is the
    scenario's; network: the whole network when the job runs on some of its hosts;
    schedule: links that change during the run: per iteration the shaped link rates and the closed-form GST in force
    (None for an iteration the network changed under, which is not judged)."""

    topo: Optional[Topology]
    bw: Sequence[float]
    theory_s: float
    iterations: List[dict]
    rows: Dict[int, List[dict]]
    traces: List[dict]
    finals: Dict[int, dict]
    cpu: Dict[str, object]
    emulated: bool
    switch_port_drops: Optional[Dict[str, int]] = None
    placement: Optional[Dict[str, str]] = None
    link_rates: Optional[Dict[Tuple[str, str], float]] = None
    stragglers: bool = False
    background: Sequence[dict] = ()
    network: Optional[Topology] = None
    schedule: Optional[Schedule] = None
    scenario: Optional[Dict[str, object]] = None  # the flow model of the run's scenario: per iteration its GST (in
    # the run's own time) under "gst_s", or why there is none under "none"
    filtered: bool = False  # the closed form sends every value; the run's filter drops a share its updates decide


def report(e: Evidence) -> Dict[str, object]:
    """The fidelity section of summary.json, with a verdict and its dominant cause."""
    kept = e.iterations[WARMUP:] or e.iterations
    in_force = {it["iteration"]: e.schedule(it["iteration"]) for it in kept} if e.schedule else {}
    changed_under = sorted(i for i, s in in_force.items() if s is None)
    kept = [it for it in kept if it["iteration"] not in changed_under] or kept[:0]
    theories = [in_force[it["iteration"]][1] if e.schedule else e.theory_s for it in kept]
    theory_s = statistics.median(theories) if e.schedule and theories else e.theory_s
    out = timing_readings(e, kept, theories)
    out.update(scenario_readings(e, kept))
    if not e.emulated or e.topo is None:
        out.update(verdict=Verdict.NOT_MEASURED.value, cause="loopback run: no emulated network")
        return out
    if not kept:  # nothing to judge: a verdict here would vouch for timings no iteration gave
        out.update(verdict=Verdict.NOT_MEASURED.value, cause="no iteration finished: nothing was measured"
                   if not e.iterations else "every iteration had the network change under it")
        return out
    foreign = [(frozenset(Paths(e.topo, e.link_rates, e.network).between(b["src"], b["dst"], b.get("ports"))),
                list(b["received"])) for b in e.background]
    tally = tally_links(e, kept, theories, in_force, foreign)
    model_s = (out.get("scenario_model") or {}).get("gst_median_s")
    out.update(link_readings(e, tally, foreign, changed_under, model_s / theory_s if model_s and theory_s else None))
    out.update(tcp_readings(e, changed_under, out.get("scenario_note")))
    if e.filtered:
        out["payload_filtered"] = True
    unmodelled = scenario_effects(e, tally, foreign) if model_s is None else []
    if unmodelled:
        out["unmodelled"] = unmodelled
    out.update(verdict_and_cause(out, len(kept), theory_s))
    return out


def timing_readings(e: Evidence, kept: List[dict], theories: List[float]) -> Dict[str, object]:
    """GST against theory per judged iteration (its median and spread), the CPU, the compute budget, the codec."""
    ratios = [it["gst_s"] / t for it, t in zip(kept, theories) if t]  # each iteration against its own closed form
    out: Dict[str, object] = {
        "gst_ratio": statistics.median(ratios) if ratios else None,
        "gst_cv": (statistics.pstdev(ratios) / statistics.mean(ratios)) if len(ratios) > 1 and statistics.mean(ratios)
        else None,
        "cpu": e.cpu,
        "compute_over_budget": sum(it.get("compute_over_budget", 0) for it in kept),
        "compute_rank_iterations": sum(it.get("workers", 1) for it in kept)}
    codec = [it["split"]["codec_s"] for it in kept if "codec_s" in (it.get("split") or {})]
    if codec:  # CPU seconds per rank and iteration that an accelerator would spend compressing
        out["codec_cpu_s"] = round(statistics.median(codec), 4)
        out["codec_cores_s"] = round(out["codec_cpu_s"] * len(e.rows) / (os.cpu_count() or 1), 4)  # all ranks
    return out


def scenario_readings(e: Evidence, kept: List[dict]) -> Dict[str, object]:
    """The judged iterations' measured GST against the flow model of the run's own scenario: their median ratio and
    its spread (the scenario's own variation, drawn compute or on/off flows, is in both)."""
    if not e.scenario:
        return {}
    if "none" in e.scenario:
        return {"scenario_model": {"none": e.scenario["none"]}}
    gsts = e.scenario.get("gst_s") or []
    ratios = [it["gst_s"] / gsts[it["iteration"]] for it in kept
              if it["iteration"] < len(gsts) and gsts[it["iteration"]] > 0]
    if not ratios:
        return {"scenario_model": {"none": "the flow model of this run gave no iteration to compare"}}
    mean = statistics.mean(ratios)
    return {"scenario_model": {
        "gst_median_s": statistics.median(gsts[it["iteration"]] for it in kept if it["iteration"] < len(gsts)),
        "measured_over_model": round(statistics.median(ratios), 4),
        "cv": round(statistics.pstdev(ratios) / mean, 4) if len(ratios) > 1 else None,
        "folder": e.scenario.get("folder")}}


def tally_links(e: Evidence, kept: List[dict], theories: List[float], in_force: dict, foreign) -> LinkTally:
    """Every judged iteration's links, decomposition and step skew."""
    paths = Paths(e.topo, e.link_rates, e.network)
    late_s = RECEIVER_LATE_S if e.stragglers else None
    index = {h.name: h.index for h in e.topo.hosts}
    # a flow from one of the job's hosts leaves its level-0 interface, whose counters then hold its bytes too
    senders = [(index[b["src"]], 0) for b in e.background if b["src"] in index]
    tally = LinkTally()
    for it, theory_i in zip(kept, theories):
        i = it["iteration"]
        if e.schedule:
            paths.link_rates = in_force[i][0]
        mine = [t for t in e.traces if t["iteration"] == i]
        sends = [t for t in mine if t["dir"] == "send" and t["start"] is not None]
        factors = wire_factors(e.topo, e.rows, sends, i, senders, paths)
        links = iteration_links(e.topo, e.rows, mine, i, e.bw, paths, factors, late_s, tally.skipped, foreign)
        tally.judged += len(sends)
        tally.hashed.update(hashed_connections(sends, paths))
        tally.add(links, e.placement)
        d = decompose(it, links, theory_i, phase_links(e.topo, e.rows, mine, i, e.bw, paths, factors, late_s,
                                                       foreign))
        if d and foreign:
            bottleneck = tuple(d["bottleneck"].split(" ")[0].split(">"))
            tally.shared_bottleneck += any(bottleneck in links_ for links_, _ in foreign)
        if d:
            tally.parts.append(d)
        tally.skews += step_skew(mine, i)
    return tally


def link_readings(e: Evidence, tally: LinkTally, foreign, changed_under: List[int],
                  model_over_theory: Optional[float]) -> Dict[str, object]:
    """Per level (and tunnels) the links' fidelity, the scenario's notes, the step skew, the GST decomposed
    (model_over_theory: the judged iterations' flow model of the scenario over their closed form, None: no model)."""
    out: Dict[str, object] = {}
    tunnels = tally.per_level.pop("tunnels", None)
    out["levels"] = {f"L{level}": link_group(acc, e.bw[level]) for level, acc in sorted(tally.per_level.items())}
    if e.placement:
        out["tunnels"] = link_group(tunnels, None) if tunnels else {"note": "no data crossed machines"}
    notes = scenario_notes(e, tally, foreign, changed_under, model_over_theory)
    if notes:
        out["scenario_note"] = "; ".join(notes)
    out["background"] = bool(foreign)
    skews = tally.skews
    out["step_skew_s"] = {"median": statistics.median(skews) if skews else None, "max": max(skews) if skews else None}
    if tally.parts:
        out["decomposition_median_s"] = {k: median_of(tally.parts, k) for k in
                                         ("theory_s", "measured_s", "plan_s", "headers_s", "below_rate_s", "idle_s",
                                          "early_s")}
        out["decomposition_median_s"]["bottleneck"] = statistics.mode(p["bottleneck"] for p in tally.parts)
    return out


def scenario_notes(e: Evidence, tally: LinkTally, foreign, changed_under: List[int],
                   model_over_theory: Optional[float]) -> List[str]:
    """What the scenario itself did (traffic beside the job, link events, stragglers), said apart."""
    notes = []
    if foreign:
        crossed = sorted({b.get("label") or b["src"] + "-" + b["dst"] for b, (links_, _) in zip(e.background, foreign)
                          if links_ & tally.used_links})
        notes.append(f"traffic beside the job: {', '.join(crossed) or 'no flow'} shared the job's links (the "
                     f"bottleneck in {tally.shared_bottleneck} of {len(tally.parts)} iterations); a link is judged by "
                     f"the job's bytes and theirs together, so the share TCP gave them, and how it varied, is the "
                     f"scenario's, not the emulator's")
    if e.schedule:
        many = len(changed_under) > 1
        notes.append("link events: each iteration judged at the link rates in force"
                     + (f"; iteration{'s' if many else ''} {', '.join(map(str, changed_under))} had the network "
                        f"change under {'them' if many else 'it'} and {'are' if many else 'is'} not judged"
                        if changed_under else ""))
    if tally.hashed and model_over_theory:
        notes.append(f"ECMP: {len(tally.hashed)} connections each took the equal-cost path its TCP ports hashed to; "
                     f"the flow model replays those paths ({model_over_theory:.2f} of the closed form, which spreads "
                     f"traffic evenly), so the links they loaded unevenly are the scenario's, not the emulator's")
    if e.stragglers:
        notes.append(f"stragglers: {len(tally.skipped)} of {tally.judged} transfers waited for a receiver still "
                     f"computing (the scenario's drawn compute, not the emulator); links are judged on the others")
    return notes


def scenario_effects(e: Evidence, tally: LinkTally, foreign) -> List[str]:
    """What the run's scenario does that the closed form does not model."""
    effects = [("traffic beside the job", bool(foreign)), ("link events", bool(e.schedule)),
               ("drawn compute (stragglers)", e.stragglers), ("hashed ECMP paths", bool(tally.hashed)),
               ("a filtered payload (the share a filter drops depends on the updates)", e.filtered)]
    return [name for name, present in effects if present]


def tcp_readings(e: Evidence, changed_under: List[int], scenario_note: Optional[str]) -> Dict[str, object]:
    """The hosts' TCP and queue counters (the iterations the network changed under apart: the event's), the
    switches' drops and the spurious timeouts."""
    out: Dict[str, object] = {}
    hosts = host_counters(e.topo, e.rows, e.finals, changed_under)
    if changed_under:  # a link down or slower under an iteration: its retransmissions and timeouts are the event's
        everything = host_counters(e.topo, e.rows, e.finals)
        out["event_tcp"] = {k: sum(everything[h][k] - hosts[h][k] for h in hosts) for k in ("retrans_segs",
                                                                                            "rto_timeouts")}
        if any(out["event_tcp"].values()):
            out["scenario_note"] = (scenario_note or "") + (
                f"; the TCP retransmissions ({out['event_tcp']['retrans_segs']}) and timeouts "
                f"({out['event_tcp']['rto_timeouts']}) in the iterations the network changed under are the event's, "
                f"not counted against the emulator")
    out["hosts"] = hosts
    out["tcp_totals"] = {k: sum(h[k] for h in hosts.values()) for k in TCP_KEYS}
    out["switch_port_drops"] = e.switch_port_drops or {}
    out["spurious_rto"] = sum(spurious_timeouts(h) for h in hosts.values())
    worker_iterations = sum(len(r) for r in e.rows.values())
    out["spurious_rto_per_worker_iteration"] = round(out["spurious_rto"] / worker_iterations, 3) \
        if worker_iterations else None
    return out


def spurious_timeouts(host: Dict[str, int]) -> float:
    """A host's retransmission timeouts that were spurious, estimated: its timeouts times the share of its
    retransmitted segments the receivers reported (D-SACK) as duplicates."""
    retrans, timeouts = host.get("retrans_segs") or 0, host.get("rto_timeouts") or 0
    if not retrans or not timeouts:
        return 0.0
    return timeouts * min(1.0, (host.get("dsack_received") or 0) / retrans)


def one_line(fid: Dict[str, object]) -> str:
    """The line printed after every run."""
    parts = [f"fidelity: {fid.get('verdict')}"]
    if fid.get("gst_ratio") is not None:
        parts.append(f"GST/theory {fid['gst_ratio']:.2f}")
    if fid.get("gst_cv") is not None:
        parts.append(f"CV {fid['gst_cv']:.2f}")
    over = (fid.get("scenario_model") or {}).get("measured_over_model")
    if over is not None:
        parts.append(f"GST/model of the scenario {over:.2f}")
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
