"""How faithful a run's emulation was, judged after the run from its evidence (the ranks' records and traces, the
CPU sampled live, the kernel's TCP and queue counters, the scenario's own load): links' achieved rate while they had
data to send (links.py), step skew, the measured/theory GST decomposed into its causes, and a verdict from a table
of cause rules."""

from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from enum import Enum
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple

from emulation.core.topology import Topology
from emulation.results.iterations import WARMUP
from emulation.results.links import (RECEIVER_LATE_S, LinkTally, Paths, decompose, iteration_links, link_group,
                                     phase_links, step_skew, wire_factors)

FAITHFUL_EMULATION_SHARE = 0.10   # link time lost to the emulator, as a share of theory
DEGRADED_EMULATION_SHARE = 0.35
FAITHFUL_LEVEL = 0.85             # achieved / shaped while a link has data to send
DEGRADED_LEVEL = 0.70
CPU_SATURATED_SAMPLES = 0.5       # share of saturated samples that makes CPU the cause
DROP_SHARE = 0.01                 # queue drops per segment sent above which TCP loss recovery distorts timing
OVER_BUDGET_SHARE = 0.05          # share of rank-iterations whose real compute overran --compute-time
OVER_RATE_LEVEL = 1.15            # achieved / shaped above which the shaper did not hold the rate
FAR_BELOW_THEORY = 0.25           # measured / theory GST below which the links cannot have been at their rate
CODEC_SHARE_NAMED = 0.25  # all ranks' compression CPU time over the cores, as a share of GST, named as the cause
SPURIOUS_RTO_PER_WORKER_ITERATION = 1.0  # spurious timeouts per worker and iteration worth a note
FASTER_THAN_MODEL = 0.85          # measured / the flow model of the scenario below which the run beat the network
STEADY_CV = 0.10                  # per-iteration GST CV above which timings are unsteady (the benchmark's bound)
TCP_KEYS = ("retrans_segs", "rto_timeouts", "loss_probes", "dsack_received", "qdisc_drops", "out_segs")


class Verdict(str, Enum):
    """What a timing may be trusted for; its value is the word summary.json holds."""

    FAITHFUL = "faithful"
    DEGRADED = "degraded"
    NOT_FAITHFUL = "not faithful"
    NOT_MEASURED = "not measured"

    def __str__(self) -> str:
        return self.value


UNFAITHFUL = (Verdict.DEGRADED, Verdict.NOT_FAITHFUL)  # verdicts a judged claim may not rest on
SEVERITY = {Verdict.FAITHFUL: 0, Verdict.DEGRADED: 1, Verdict.NOT_FAITHFUL: 2}


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
    out.update(link_readings(e, tally, foreign, changed_under))
    out.update(tcp_readings(e, changed_under, out.get("scenario_note")))
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


def link_readings(e: Evidence, tally: LinkTally, foreign, changed_under: List[int]) -> Dict[str, object]:
    """Per level (and tunnels) the links' fidelity, the scenario's notes, the step skew, the GST decomposed."""
    out: Dict[str, object] = {}
    tunnels = tally.per_level.pop("tunnels", None)
    out["levels"] = {f"L{level}": link_group(acc, e.bw[level]) for level, acc in sorted(tally.per_level.items())}
    if e.placement:
        out["tunnels"] = link_group(tunnels, None) if tunnels else {"note": "no data crossed machines"}
    notes = scenario_notes(e, tally, foreign, changed_under)
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


def scenario_notes(e: Evidence, tally: LinkTally, foreign, changed_under: List[int]) -> List[str]:
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
    if e.stragglers:
        notes.append(f"stragglers: {len(tally.skipped)} of {tally.judged} transfers waited for a receiver still "
                     f"computing (the scenario's drawn compute, not the emulator); links are judged on the others")
    return notes


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


def spurious_retransmissions(totals: Dict[str, int]) -> bool:
    """True when the receivers reported (D-SACK) nearly every retransmitted segment as a duplicate."""
    retrans = totals.get("retrans_segs") or 0
    return retrans > 0 and (totals.get("dsack_received") or 0) >= 0.9 * retrans


class Finding(NamedTuple):
    """What one cause rule found: its weight among the causes (the heaviest is named), its words (None: it moves
    the verdict without being a cause of its own), and the verdict it makes at least (None: it only names a cause)."""

    weight: float
    text: Optional[str]
    makes: Optional[Verdict]


class Readings(NamedTuple):
    """The fidelity section's numbers the cause rules read, worked out once."""

    fid: Dict[str, object]
    d: Dict[str, object]
    cpu: Dict[str, object]
    theory_s: float
    level_min: Optional[float]
    level_max: Optional[float]
    share: Optional[float]
    spurious: float
    totals: Dict[str, int]
    over: Optional[float]      # measured over the flow model of the run's own scenario (None: no model)
    model_cv: Optional[float]  # the spread of that ratio over the judged iterations

    @property
    def modelled(self) -> bool:
        """The share is what the run lost against the flow model of its own scenario."""
        return self.over is not None


def readings(fid: Dict[str, object], theory_s: float) -> Readings:
    """The numbers every rule reads. What the emulator added to the GST: the bottleneck's slow sending and idle
    time, less the work it did before the window opened (its early sending ran below rate too, but not in the GST:
    clipping the credit on its own charged ranks' early start, as on a graph whose ECMP collisions load one link
    from the first step, to it)."""
    d = fid.get("decomposition_median_s") or {}
    fidelities = [l["critical_fidelity"] for l in fid.get("levels", {}).values() if l.get("critical_fidelity")]
    emulator_s = max(0.0, max(0.0, d.get("below_rate_s") or 0) + (d.get("idle_s") or 0) - (d.get("early_s") or 0))
    model = fid.get("scenario_model") or {}
    over = model.get("measured_over_model")
    share = max(0.0, over - 1) if over is not None else emulator_s / theory_s if theory_s and d else None
    return Readings(fid, d, fid.get("cpu") or {}, theory_s, min(fidelities, default=None),
                    max(fidelities, default=None), share, fid.get("spurious_rto_per_worker_iteration") or 0,
                    fid.get("tcp_totals", {}), over, model.get("cv"))


def unsteady(r: Readings) -> bool:
    """The per-iteration GST varies beyond STEADY_CV: against the flow model of the scenario when there is one (its
    drawn compute and on/off flows vary both), else against theory without background flows."""
    if r.modelled:
        return r.model_cv is not None and r.model_cv > STEADY_CV
    cv = r.fid.get("gst_cv")
    return cv is not None and cv > STEADY_CV and not r.fid.get("background")


def over_rate(r: Readings) -> Optional[Finding]:
    """Links above the rate their per-step paths give them: a shaper that did not hold, unless the run was no faster
    than the flow model of its scenario (traffic a link event or a reroute moved onto other paths than the per-step
    ones looks faster than it is; an unshaped link makes the run faster than the model)."""
    if r.level_max is not None and r.level_max > OVER_RATE_LEVEL:
        slower = r.modelled and r.over >= 1.0
        return Finding((r.level_max - 1) / 100 if slower else 5000.0 + r.level_max,
                       f"links carried {r.level_max:.2f} times their shaped rate: the shaper did not hold it, so the "
                       f"timings are not those of the asked-for links (on the userspace datapath switch->host is "
                       f"shaped only with --shape-ingress, which incast into a server needs)",
                       None if slower else Verdict.NOT_FAITHFUL)
    return None


def far_below_theory(r: Readings) -> Optional[Finding]:
    ratio = r.fid.get("gst_ratio")
    if ratio is not None and ratio < FAR_BELOW_THEORY:
        return Finding(4000.0 + 1 / max(ratio, 1e-12),
                       f"GST is {ratio:.2g} of theory: faster than the shaped links can carry the data",
                       Verdict.NOT_FAITHFUL)
    return None


def faster_than_model(r: Readings) -> Optional[Finding]:
    """A run faster than the flow model of its scenario lets the network be: links above their rate somewhere, or
    traffic the model has and the run had not."""
    if r.modelled and r.over < FASTER_THAN_MODEL:
        return Finding(3000.0 + 1 / r.over, f"the run took {r.over:.2f} of the flow model of its own scenario: "
                                            f"faster than its links at their rates allow, so a shaper did not hold "
                                            f"or traffic the scenario asks for did not run", Verdict.DEGRADED)
    return None


def varying(r: Readings) -> Optional[Finding]:
    if not unsteady(r):
        return None
    cv = r.model_cv if r.modelled else r.fid["gst_cv"]
    why = f"per-iteration GST varies (CV {cv:.2f}{' against the flow model of the scenario' if r.modelled else ''})"
    if r.spurious > SPURIOUS_RTO_PER_WORKER_ITERATION:
        why += (f" with {r.spurious:.1f} spurious TCP retransmission timeouts per worker and iteration (the ACKs "
                f"came later than the timer; nothing was lost)")
    return Finding(0.5 + cv, why, Verdict.DEGRADED)


def cpu_saturated(r: Readings) -> Optional[Finding]:
    # Saturated resources are root causes; slow or idle links are what they look like from the network.
    share = r.cpu.get("saturated_share") or 0
    if share >= CPU_SATURATED_SAMPLES:
        return Finding(1000.0 + share, f"CPU saturation: all cores busy in {share:.0%} of samples", Verdict.DEGRADED)
    return None


def codec_on_cpu(r: Readings) -> Optional[Finding]:
    gst = (r.fid.get("gst_ratio") or 0) * r.theory_s
    share = (r.fid.get("codec_cores_s") or 0) / gst if gst else 0
    if share > CODEC_SHARE_NAMED:  # the machine's cores were busy compressing for that share of the GST
        return Finding(1000.0 + share, f"gradient compression on the CPU: {r.fid['codec_cpu_s']:.2f} s per rank "
                                       f"and iteration, all ranks together {share:.0%} of the GST on this machine's "
                                       f"cores (the papers compress on the accelerator)", None)
    return None


def switch_saturated(r: Readings) -> Optional[Finding]:
    share = r.cpu.get("switch_saturated_share") or 0
    if share >= CPU_SATURATED_SAMPLES:
        return Finding(1000.0 + share, f"software switch saturated: its forwarding thread used a full core in "
                                       f"{share:.0%} of samples (lower --bw or use --dilation)", Verdict.DEGRADED)
    return None


def slow_links(r: Readings) -> Optional[Finding]:
    """Links below their per-step fair share; judged by it only without a flow model of the scenario, whose shares
    (flows finishing at different times, hash collisions, other jobs) the per-step ones do not follow."""
    if r.level_min is not None and r.level_min < FAITHFUL_LEVEL:
        makes = Verdict.NOT_FAITHFUL if r.level_min < DEGRADED_LEVEL else Verdict.DEGRADED
        return Finding((FAITHFUL_LEVEL - r.level_min) / 100 if r.modelled else 2.0 + (FAITHFUL_LEVEL - r.level_min),
                       f"links reach only {r.level_min:.2f} of the shaped rate while sending", None if r.modelled
                       else makes)
    return None


def emulator_share(r: Readings) -> Optional[Finding]:
    """The time the emulator added (against the flow model of the scenario, else the per-step decomposition against
    theory): it moves the verdict; its causes are named by the other rules (links below rate, idle links, CPU)."""
    if r.share is not None and r.share > FAITHFUL_EMULATION_SHARE:
        words = (f"the run took {1 + r.share:.2f} times the flow model of its own scenario" if r.modelled else None)
        return Finding(0.01 if r.modelled else float("-inf"), words,  # named when no rule below names more
                       Verdict.NOT_FAITHFUL if r.share > DEGRADED_EMULATION_SHARE else Verdict.DEGRADED)
    return None


def below_rate(r: Readings) -> Optional[Finding]:
    if r.d and (r.d.get("below_rate_s") or 0) > 0.02 * r.theory_s:
        return Finding(r.d["below_rate_s"] / r.theory_s, "links busy below the shaped rate (TCP or switching)", None)
    return None


def idle_links(r: Readings) -> Optional[Finding]:
    idle = (r.d.get("idle_s") or 0) if r.d else 0
    if idle <= 0.02 * r.theory_s:
        return None
    if r.totals.get("rto_timeouts"):
        why = f"links idle during synchronization; {r.totals['rto_timeouts']} TCP retransmission timeouts"
        if spurious_retransmissions(r.totals):
            why += (" (spurious: the receivers got every retransmitted segment twice, so nothing was lost and "
                    "the ACKs came later than the timer; a larger --rto-min avoids them)")
    elif (r.fid.get("step_skew_s") or {}).get("median"):
        why = f"links idle during synchronization (ranks start steps up to " \
              f"{r.fid['step_skew_s']['median'] * 1000:.0f} ms apart, median)"
    else:
        why = "links idle during synchronization"
    return Finding(idle / r.theory_s, why, None)


def queue_drops(r: Readings) -> Optional[Finding]:
    share = (r.totals.get("qdisc_drops") or 0) / max(1, r.totals.get("out_segs") or 0)
    if share > DROP_SHARE:
        return Finding(share, f"{r.totals['qdisc_drops']} packets ({share:.1%}) dropped in host queues",
                       Verdict.DEGRADED)
    return None


def compute_over_budget(r: Readings) -> Optional[Finding]:
    over = r.fid.get("compute_over_budget") or 0
    share = over / max(1, r.fid.get("compute_rank_iterations") or 1)
    if share > OVER_BUDGET_SHARE:
        return Finding(0.01 + share, f"real compute exceeded --compute-time in {over} of "
                                     f"{r.fid.get('compute_rank_iterations')} rank-iterations after warm-up",
                       Verdict.DEGRADED)
    return None


# The cause rules, each reading the fidelity section: a saturated CPU or switch thread warns (degraded); a run is not
# faithful when the network shows the damage (links far below rate, the emulator's share of the GST, links above
# it). The verdict is the worst any rule makes; the cause named is the heaviest rule's words, unless faithful.
CAUSE_RULES: Tuple[Callable[[Readings], Optional[Finding]], ...] = (
    over_rate, far_below_theory, faster_than_model, varying, cpu_saturated, codec_on_cpu, switch_saturated,
    slow_links, emulator_share, below_rate, idle_links, queue_drops, compute_over_budget)


def verdict_and_cause(fid: Dict[str, object], iterations: int, theory_s: float) -> Dict[str, object]:
    """The verdict (faithful, degraded, not faithful) by the cause rules, and the dominant cause of what the emulator
    added."""
    r = readings(fid, theory_s)
    found = [f for f in (rule(r) for rule in CAUSE_RULES) if f is not None]
    verdict = max((f.makes for f in found if f.makes), key=SEVERITY.get, default=Verdict.FAITHFUL)
    causes = [(f.weight, f.text) for f in found if f.text]
    cause = max(causes)[1] if causes and verdict != Verdict.FAITHFUL else None
    out = {"verdict": verdict.value, "cause": cause,
           "emulator_share": round(r.share, 4) if r.share is not None else None,
           "judged_against": "the flow model of the run's scenario" if r.modelled else "per-step fair shares"}
    if r.spurious > SPURIOUS_RTO_PER_WORKER_ITERATION and not unsteady(r):  # counted; judged by what it did to timings
        out["timer_note"] = (f"{r.spurious:.1f} spurious TCP retransmission timeouts per worker and iteration (ACKs "
                             f"later than --rto-min, nothing lost); the timings held steady (CV "
                             f"{fid.get('gst_cv') or 0:.3f})")
    drops = (fid.get("switch_port_drops") or {}).get("switch_queue_drops") or 0
    if drops:  # congestion inside the network: part of what is studied, so it informs, it does not judge
        out["network_note"] = (f"{drops} packets dropped at switch-side queues: congestion in the network under "
                               f"study (ECMP collisions, incast), which a flow model without loss does not show")
    return out


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
