"""The verdict on a run's fidelity section: a table of cause rules, each reading the section's numbers (the
emulator's share against the flow model of the run's scenario, links below or above their rate, CPU and switch
thread, queues, TCP timers, compute) and making a verdict at least; the heaviest rule's words name the cause."""

from __future__ import annotations

from enum import Enum
from typing import Callable, Dict, NamedTuple, Optional, Tuple

FAITHFUL_EMULATION_SHARE = 0.10   # link time lost to the emulator, as a share of theory
DEGRADED_EMULATION_SHARE = 0.35
FAITHFUL_LEVEL = 0.85             # achieved / shaped while a link has data to send
DEGRADED_LEVEL = 0.70
CPU_SATURATED_SAMPLES = 0.5       # share of saturated samples that makes CPU the cause
DROP_SHARE = 0.01                 # queue drops per segment sent above which TCP loss recovery distorts timing
SWITCH_DROP_SHARE = 0.001         # switch-queue drops per segment sent below which loss cannot explain a slow run
                                  # (faithful runs of the benchmark lose up to 5 in 10,000 and match their model)
OVER_BUDGET_SHARE = 0.05          # share of rank-iterations whose real compute overran --compute-time
OVER_RATE_LEVEL = 1.15            # achieved / shaped above which the shaper did not hold the rate
FAR_BELOW_THEORY = 0.25           # measured / theory GST below which the links cannot have been at their rate
CODEC_SHARE_NAMED = 0.25  # all ranks' compression CPU time over the cores, as a share of GST, named as the cause
SPURIOUS_RTO_PER_WORKER_ITERATION = 1.0  # spurious timeouts per worker and iteration worth a note
FASTER_THAN_MODEL = 0.85          # measured / the flow model of the scenario below which the run beat the network
STEADY_CV = 0.10                  # per-iteration GST CV above which timings are unsteady (the benchmark's bound)


class Verdict(str, Enum):
    """What a timing may be trusted for; its value is the word summary.json holds."""

    FAITHFUL = "faithful"
    DEGRADED = "degraded"
    NOT_FAITHFUL = "not faithful"
    NOT_MEASURED = "not measured"
    NOT_JUDGED = "not judged"  # the scenario has effects the closed form lacks, and no flow model of it ran

    def __str__(self) -> str:
        return self.value


UNFAITHFUL = (Verdict.DEGRADED, Verdict.NOT_FAITHFUL, Verdict.NOT_JUDGED)  # verdicts a judged claim may not rest on
SEVERITY = {Verdict.FAITHFUL: 0, Verdict.DEGRADED: 1, Verdict.NOT_FAITHFUL: 2}


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
    link_share: Optional[float]  # what the links lost while they had data, as a share of theory (the decomposition)
    split: bool = False        # the time beyond the model is TCP's split of shared links (tcp_split)

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
    link_share = emulator_s / theory_s if theory_s and d else None
    share = max(0.0, over - 1) if over is not None else link_share
    r = Readings(fid, d, fid.get("cpu") or {}, theory_s, min(fidelities, default=None),
                 max(fidelities, default=None), share, fid.get("spurious_rto_per_worker_iteration") or 0,
                 fid.get("tcp_totals", {}), over, model.get("cv"), link_share)
    return r._replace(split=tcp_split(r))


def tcp_split(r: Readings) -> bool:
    """Slower than the fair-share flow model of a scenario with traffic beside the job, while the links delivered:
    they ran at their rate whenever they had data (the job's and the others' bytes together), and lost no more than
    FAITHFUL_EMULATION_SHARE of theory doing so. The time beyond the model is then how TCP split the shared links
    between connections (a ring step waits for its slowest), which max-min fair sharing does not model: the
    scenario's, up to DEGRADED_EMULATION_SHARE."""
    return (r.modelled and bool(r.fid.get("background")) and FAITHFUL_EMULATION_SHARE < r.share
            <= DEGRADED_EMULATION_SHARE and r.link_share is not None and r.link_share <= FAITHFUL_EMULATION_SHARE
            and (r.level_min is None or r.level_min >= FAITHFUL_LEVEL))


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
        slower = r.modelled and r.over >= 1.0 - FAITHFUL_EMULATION_SHARE  # as slow as the model, within its noise
        return Finding((r.level_max - 1) / 100 if slower else 5000.0 + r.level_max,
                       f"links carried {r.level_max:.2f} times their shaped rate: the shaper did not hold it, so the "
                       f"timings are not those of the asked-for links (on the userspace datapath switch->host is "
                       f"shaped only with --shape-ingress, which incast into a server needs)",
                       None if slower else Verdict.NOT_FAITHFUL)
    return None


def far_below_theory(r: Readings) -> Optional[Finding]:
    """GST far below a closed form that sends every value: the shapers did not hold (a filter's run sends less)."""
    ratio = r.fid.get("gst_ratio")
    if ratio is not None and ratio < FAR_BELOW_THEORY and not r.fid.get("payload_filtered"):
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
    if r.share is not None and r.share > FAITHFUL_EMULATION_SHARE and not r.split:
        words = (f"the run took {1 + r.share:.2f} times the flow model of its own scenario" if r.modelled else None)
        return Finding(0.01 if r.modelled else float("-inf"), words,  # named when no rule below names more
                       Verdict.NOT_FAITHFUL if r.share > DEGRADED_EMULATION_SHARE else Verdict.DEGRADED)
    return None


def lossy_network(r: Readings) -> Optional[Finding]:
    """Beyond the flow model of the scenario after drops at switch-side queues: the model moves traffic as a lossless
    fluid, so TCP's recovery from them is what it lacks; named ahead of the symptoms (unsteady GST, links below rate)
    so the user sees which knob it is (the switches' buffers), while the machine's own faults still come first."""
    drops = (r.fid.get("switch_port_drops") or {}).get("switch_queue_drops") or 0
    lossy = drops > SWITCH_DROP_SHARE * max(1, r.totals.get("out_segs") or 0)
    if r.modelled and lossy and r.share is not None and r.share > FAITHFUL_EMULATION_SHARE and not r.split:
        return Finding(2.0 + r.share, f"TCP's recovery from {drops} packets dropped at switch-side queues, which the "
                                      f"lossless flow model of the scenario lacks: the run took {r.over:.2f} times "
                                      f"the model (give the switches the buffers of the network under study: "
                                      f"--queue)", None)
    return None


def within_model(r: Readings) -> bool:
    """The run took no more than its scenario's flow model allows: its links' idle or slow time is the scenario's
    (stragglers' waits, other traffic), so it names no cause."""
    return r.modelled and r.share is not None and r.share <= FAITHFUL_EMULATION_SHARE


def below_rate(r: Readings) -> Optional[Finding]:
    if within_model(r):
        return None
    if r.d and (r.d.get("below_rate_s") or 0) > 0.02 * r.theory_s:
        return Finding(r.d["below_rate_s"] / r.theory_s, "links busy below the shaped rate (TCP or switching)", None)
    return None


def idle_links(r: Readings) -> Optional[Finding]:
    idle = (r.d.get("idle_s") or 0) if r.d else 0
    if idle <= 0.02 * r.theory_s or within_model(r):
        return None
    if r.totals.get("rto_timeouts"):
        why = f"links idle during synchronization; {r.totals['rto_timeouts']} TCP retransmission timeouts"
        if spurious_retransmissions(r.totals):
            why += (" (spurious: the receivers got every retransmitted segment twice, so nothing was lost and "
                    "the ACKs came later than the timer; a larger --rto-min avoids them)")
    elif r.modelled:  # the scenario's own waits (stragglers, other traffic, events) are in the model: not these
        why = ("links idle during synchronization beyond the flow model of the scenario, which has its waits "
               "(stragglers, other traffic, link events) but not the software switch's latency per message or "
               "ranks slowed by this machine's CPU")
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
    slow_links, emulator_share, lossy_network, below_rate, idle_links, queue_drops, compute_over_budget)


# The rules that read the machine (its cores, the switch thread, host queues, the compute budget) or a GST no link
# could give, not timing against a model: all a run can be judged by when its scenario has no model.
MACHINE_RULES: Tuple[Callable[[Readings], Optional[Finding]], ...] = (
    far_below_theory, cpu_saturated, codec_on_cpu, switch_saturated, queue_drops, compute_over_budget)


def verdict_and_cause(fid: Dict[str, object], iterations: int, theory_s: float) -> Dict[str, object]:
    """The verdict (faithful, degraded, not faithful) by the cause rules, and the dominant cause of what the emulator
    added; where the scenario has effects the closed form lacks (fid["unmodelled"]) and no flow model of it ran,
    the machine's faults only, else "not judged", saying what has no model."""
    r = readings(fid, theory_s)
    unmodelled = fid.get("unmodelled") if not r.modelled else None
    found = [f for f in (rule(r) for rule in (MACHINE_RULES if unmodelled else CAUSE_RULES)) if f is not None]
    verdict = max((f.makes for f in found if f.makes), key=SEVERITY.get, default=Verdict.FAITHFUL)
    causes = [(f.weight, f.text) for f in found if f.text]
    cause = max(causes)[1] if causes and verdict != Verdict.FAITHFUL else None
    if unmodelled and verdict == Verdict.FAITHFUL:
        why = (fid.get("scenario_model") or {}).get("none")
        verdict, cause = Verdict.NOT_JUDGED, f"not judged: no model of {' and '.join(unmodelled)}" + \
            (f" ({why})" if why else "") + ", and the closed form has none of it"
    out = {"verdict": verdict.value, "cause": cause,
           "emulator_share": None if r.share is None or unmodelled else round(r.link_share, 4) if r.split
           else round(r.share, 4),
           "judged_against": "the flow model of the run's scenario" if r.modelled else
           "the machine only (no model of the scenario)" if unmodelled else "per-step fair shares"}
    if r.spurious > SPURIOUS_RTO_PER_WORKER_ITERATION and not unsteady(r):  # counted; judged by what it did to timings
        out["timer_note"] = (f"{r.spurious:.1f} spurious TCP retransmission timeouts per worker and iteration (ACKs "
                             f"later than --rto-min, nothing lost); the timings held steady (CV "
                             f"{fid.get('gst_cv') or 0:.3f})")
    if r.split and not unmodelled:
        out["scenario_note"] = "; ".join(filter(None, [fid.get("scenario_note"), (
            f"TCP's split of the shared links: the run took {r.over:.2f} times the flow model of its scenario, which "
            f"shares links max-min fairly, while its links ran at {r.level_min or 1:.2f} of their rate with data "
            f"to send and lost {r.link_share:.2f} of theory; the rest is how TCP shared them, not the emulator")]))
    drops = (fid.get("switch_port_drops") or {}).get("switch_queue_drops") or 0
    if drops:  # congestion inside the network: part of what is studied, so it informs, it does not judge
        out["network_note"] = (f"{drops} packets dropped at switch-side queues: congestion in the network under "
                               f"study (ECMP collisions, incast), which a flow model without loss does not show")
    return out
