"""What a run's link events did, the same way in every mode: when each took effect, the GST before and after it, and
the closed form at the link rates in force after it."""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from emulation.core.events import LinkEvent, rates_in_force, with_events
from emulation.core.link_rates import Overrides, link_name, rates_key
from emulation.run.resolution import Checked
from emulation.results.iterations import WARMUP


def closed_forms(checked: Checked) -> Callable[[Overrides], float]:
    """The closed-form GST with a set of links off their level's rate, worked out once per set."""
    from emulation.backends.heads import head
    cache: Dict[Tuple, float] = {}

    def gst(link_rates: Overrides) -> float:
        key = rates_key(link_rates)
        if key not in cache:
            network = replace(checked.network, link_rates=dict(link_rates), events=())
            cache[key] = head(replace(checked, network=network)).gst_theory_s
        return cache[key]
    return gst


def rates_after(checked: Checked, effect: Sequence[Optional[int]], iteration: int) -> Overrides:
    """The link rates an iteration ran at: the run's own, then every event that had taken effect by it."""
    return with_events(checked.network.link_rates, [e for e, k in zip(checked.network.events, effect)
                                                   if k is not None and k <= iteration])


def theory_timeline(checked: Checked, iterations: int, compute_s: float) -> Tuple[List[float], List[float]]:
    """When each iteration's synchronization begins and its closed-form GST as the events change the links
    (compute, then the GST, one iteration after another)."""
    theory = closed_forms(checked)
    sync_starts, gsts, t = [], [], 0.0
    for i in range(iterations):
        t += compute_s
        sync_starts.append(t)
        gsts.append(theory(rates_in_force(checked.network.link_rates, checked.network.events, i, t)))
        t += gsts[-1]
    return sync_starts, gsts


def took_effect(event: LinkEvent, sync_starts: Sequence[float], applied_s: Optional[float] = None) -> Optional[int]:
    """The first iteration whose synchronization ran wholly at the event's rate: its iteration, or the first whose
    synchronization began after its time; where the network changed at a measured time (applied_s, emulated), the
    first whose synchronization began after that (None: none did)."""
    first = event.iteration if event.iteration is not None else 0
    when = applied_s if applied_s is not None else event.at_s
    if when is None:
        return first
    return next((i for i in range(first, len(sync_starts)) if sync_starts[i] >= when), None)


def event_rows(checked: Checked, gsts: Sequence[float], effect: Sequence[Optional[int]],
               applied_s: Optional[Sequence[Optional[float]]] = None) -> List[dict]:
    """Per event: when it took effect, the median GST of the iterations before it (past warm-up, since the previous
    event) and after it (until the next), and the closed form after it."""
    theory = closed_forms(checked)
    marks = sorted({k for k in effect if k is not None})
    rows = []
    for n, (event, k) in enumerate(zip(checked.network.events, effect)):
        row = {"event": event.shown(), "link": link_name(event.link), "mbps": event.mbps,
               "iteration": event.iteration, "at_s": event.at_s, "took_effect_iteration": k}
        if event.state:
            row["theory_note"] = ("the closed form takes each level's slowest link that is up; it does not route "
                                  "around a link down (the flow model does, as the controller and BCube's hosts do)")
        if applied_s is not None:
            row["applied_s"] = None if applied_s[n] is None else round(applied_s[n], 6)
        if k is not None:
            earlier = [m for m in marks if m < k]
            later = [m for m in marks if m > k]
            before = list(gsts[max(WARMUP, earlier[-1] if earlier else 0):(k - 1 if applied_s is not None else k)])
            after = list(gsts[k:later[0] if later else len(gsts)])
            row["gst_before_median_s"] = statistics.median(before) if before else None
            row["gst_after_median_s"] = statistics.median(after) if after else None
            row["gst_before_iterations"], row["gst_after_iterations"] = len(before), len(after)
            row["gst_after_theory_s"] = theory(rates_after(checked, effect, k))
            if row["gst_before_median_s"] and row["gst_after_median_s"]:
                row["after_over_before"] = row["gst_after_median_s"] / row["gst_before_median_s"]
            if row["gst_after_median_s"] and row["gst_after_theory_s"]:
                row["after_over_theory"] = row["gst_after_median_s"] / row["gst_after_theory_s"]
        rows.append(row)
    return rows


def measured_schedule(checked: Checked, iterations: Sequence[dict], rows: Dict[int, List[dict]],
                      applied_wall: Sequence[Optional[float]], dilation: float):
    """An emulated run's events: when each took effect (the first iteration whose every rank began synchronizing
    after the change), each one's application in emulated seconds after the first iteration began, and the
    fidelity schedule (per iteration the shaped link rates and dilated closed form in force; None for an iteration
    the network changed under)."""
    events = checked.network.events
    if not iterations:
        return [None] * len(events), [None] * len(events), None
    first = iterations[0]["start"]
    sync_first = [(min(rows[r][it["iteration"]]["sync_start"] for r in rows if len(rows[r]) > it["iteration"])
                   - first) / dilation for it in iterations]
    ends = [(it["end"] - first) / dilation for it in iterations]
    applied = [None if t is None else (t - first) / dilation for t in applied_wall]
    effect = [took_effect(e, sync_first, a) for e, a in zip(events, applied)]
    theory = closed_forms(checked)

    def in_force(i: int):
        if any(a is not None and sync_first[i] < a < ends[i] for a in applied):
            return None
        rates = rates_after(checked, effect, i)
        return {k: v / dilation for k, v in rates.items()}, theory(rates) * dilation
    return effect, applied, in_force


RECOVERED_WITHIN = 0.10  # an iteration within 10% of the new steady state's median has recovered


def recovery(iterations: Sequence[dict], at: float, until: Optional[float], dilation: float) -> dict:
    """What an event at wall time `at` did to the iterations (raw: wall-clock start and end), in emulated seconds:
    the iteration it hit (the first to end after it), that iteration's time against the median before the event
    (past warm-up), the new steady state (the median after the hit one, until the next event) and recovery_s, from
    the event until the end of the last iteration more than 10% over that steady state."""
    hit = next((it for it in iterations if it["end"] > at), None)
    if hit is None:
        return {"affected_iteration": None}
    before = [it["iteration_s"] / dilation for it in iterations[WARMUP:] if it["end"] <= at]
    after = [it for it in iterations if it["iteration"] > hit["iteration"] and (until is None or it["end"] <= until)]
    steady = statistics.median([it["iteration_s"] / dilation for it in after]) if after else None
    out = {"affected_iteration": hit["iteration"], "affected_iteration_s": round(hit["iteration_s"] / dilation, 6),
           "iteration_before_median_s": round(statistics.median(before), 6) if before else None,
           "iteration_after_median_s": round(steady, 6) if steady else None}
    if before:
        out["affected_over_before_s"] = round(out["affected_iteration_s"] - out["iteration_before_median_s"], 6)
    if steady:
        slow = [it for it in [hit] + after if it["iteration_s"] / dilation > (1 + RECOVERED_WITHIN) * steady]
        out["recovery_s"] = round(max(0.0, (slow[-1]["end"] - at) / dilation), 6) if slow else 0.0
    return out


def flows_across(paths, transfers: Sequence[dict], link: Tuple[str, str], iteration: int) -> int:
    """How many of the job's connections sent across a link (either way) in one iteration, by their traced
    paths (links.Paths at the rates in force then)."""
    used = set()
    for t in transfers:
        if t["iteration"] == iteration and t["dir"] == "send" and t.get("ports"):
            hops = paths.links(t["rank"], t["peer"], t["level"], t["ports"])
            if link in hops or link[::-1] in hops:
                used.add((t["rank"], t["peer"], tuple(t["ports"])))
    return len(used)
