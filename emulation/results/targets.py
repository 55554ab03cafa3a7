"""A config's `targets:` block (what `make benchmark` holds the machine to): each target a row's metric (or its ratio,
reduction or difference against another row's, read in the same sweep group or the one `relative_in` names) at most,
at least, between, equal to, one of, or containing a value; checked before anything runs (a bound every value of the
metric meets is refused) and judged by the one judge (judge.py) in every sweep group it applies to (`in`)."""

from __future__ import annotations

import math
import statistics
from typing import Dict, List, Optional, Sequence

from emulation.results import judge
from emulation.results.claims import METRIC_DOMAINS, RELATION_DOMAINS, RELATIONS, how_obtained, worst_fidelity

EVERY_ROW = "*"  # a target's row: every row of the group that has the metric must meet it
# Metrics a benchmark reads beyond the papers' (a run's fidelity figures, its ranks' start-up, a command's report)
BENCH_DOMAINS = {"gst_cv": (0.0, math.inf), "spurious_rto_per_worker_iteration": (0.0, math.inf),
                 "pss_mib_per_rank": (0.0, math.inf), "first_iteration_s": (0.0, math.inf),
                 "exposed_s": (0.0, math.inf), "fidelity_min": (0.0, math.inf), "fidelity_median": (0.0, math.inf),
                 "goodput_fidelity_min": (0.0, math.inf), "wall_s": (0.0, math.inf), "peak_rss_mib": (0.0, math.inf),
                 "gst_ratio_at_goodput": (0.0, math.inf), "wait_mean_s": (0.0, math.inf), "slowdown": (0.0, math.inf),
                 "most_waited_for_share": (0.0, 1.0), "iteration_mean_s": (0.0, math.inf), "exit_code": (0.0, 255.0),
                 "iterations": (0.0, math.inf), "leftover_count": (0.0, math.inf), "switch_rss_kb": (0.0, math.inf),
                 "switch_pid": (0.0, math.inf), "wire_payload_ratio": (0.0, math.inf),
                 "interfaces_over_engine": (0.0, math.inf), "communication_s": (0.0, math.inf)}
FIGURE = (-math.inf, math.inf)  # a command row's own figure (a dotted key of its JSON result): any number
DOMAINS = {**METRIC_DOMAINS, **BENCH_DOMAINS}
CHOICES = {"fidelity": ("faithful", "degraded", "not judged", "not faithful"), "correct": (True, False),
           "most_waited_for": None, "fidelity_scenario_note": None, "fidelity_cause": None}  # None: any text
BOUNDS = ("at_most", "at_least", "between", "equals", "one_of", "contains")
TARGET_KEYS = {"what", "row", "metric", "relative_to", "relation", "why", "in", "relative_in", "median_over", *BOUNDS}
MET = {True: "met", False: "missed", None: "no value"}


class TargetError(ValueError):
    """The `targets:` block is malformed; the message names the key."""


def targets(data: dict, labels: Sequence[str], sweep: Optional[dict] = None) -> List[dict]:
    """The checked targets of a config ([] when it has none); sweep: every sweep key's values its rows take (the
    config's sweep when not given)."""
    block = data.get("targets")
    if block is None:
        return []
    if not isinstance(block, list) or not block:
        raise TargetError("'targets' needs a non-empty list of targets")
    sweep = data.get("sweep") or {} if sweep is None else sweep
    return [target(t, f"targets[{i}]", labels, sweep) for i, t in enumerate(block)]


def target(t, where: str, labels: Sequence[str], sweep: Optional[dict] = None) -> dict:
    """One checked target, with its Bound (`in` and `relative_in` checked against the config's sweep)."""
    if not isinstance(t, dict):
        raise TargetError(f"{where} must be a mapping")
    unknown = set(t) - TARGET_KEYS
    if unknown:
        raise TargetError(f"{where}: unknown key '{sorted(unknown)[0]}' (valid: {', '.join(sorted(TARGET_KEYS))})")
    for key in ("what", "row", "metric"):
        if not t.get(key):
            raise TargetError(f"{where} needs '{key}'")
    for key in ("row", "relative_to"):
        if key in t and t[key] not in labels and not (key == "row" and t[key] == EVERY_ROW):
            raise TargetError(f"{where}: {key} '{t[key]}' is not a run label (labels: {', '.join(labels)}, or "
                              f"'{EVERY_ROW}' for every row)")
    for key in ("in", "relative_in"):
        check_group(t.get(key), key, sweep or {}, where)
    check_median_over(t, sweep or {}, where)
    if "relative_in" in t:
        t = {"relative_to": t["row"], **t}
    metric = t["metric"]
    if metric not in DOMAINS and metric not in CHOICES and "." not in metric:
        raise TargetError(f"{where}: metric '{metric}' is not one of {', '.join([*DOMAINS, *CHOICES])} (or a "
                          f"command row's figure, a dotted key of its JSON result)")
    relation = t.get("relation", "ratio" if "relative_to" in t else "value")
    if relation not in RELATIONS or (relation != "value") != ("relative_to" in t):
        raise TargetError(f"{where}: relation '{relation}' needs 'relative_to' (valid: {', '.join(RELATIONS)}; "
                          f"'value' takes no 'relative_to')")
    given = [k for k in BOUNDS if k in t]
    if len(given) != 1:
        raise TargetError(f"{where} needs exactly one of {', '.join(BOUNDS)}")
    domain = RELATION_DOMAINS.get(relation, DOMAINS.get(metric, FIGURE))
    return {**t, "relation": relation, "bound": bound_of(given[0], t[given[0]], metric, domain, where)}


def check_group(given, key: str, sweep: dict, where: str) -> None:
    """`in` (the sweep groups a target is judged in) or `relative_in` (where its reference row is read): a mapping
    of sweep keys to values the sweep has."""
    if given is None:
        return
    if not isinstance(given, dict) or not given:
        raise TargetError(f"{where}: {key} must be a mapping of sweep keys to values (e.g. {{mode: emulate}})")
    for k, v in given.items():
        if k not in sweep or v not in sweep[k]:
            valid = ", ".join(f"{name}: {values}" for name, values in sweep.items()) or "the config sweeps nothing"
            raise TargetError(f"{where}: {key} {k}={v!r} is not a value the config sweeps ({valid})")


def check_median_over(t: dict, sweep: dict, where: str) -> None:
    """`median_over`: a key the config sweeps (or repeats), over a named row's number, not one `in` fixes."""
    key = t.get("median_over")
    if key is None:
        return
    if key not in sweep:
        raise TargetError(f"{where}: median_over '{key}' is not a key the config sweeps or repeats (valid: "
                          f"{', '.join(sweep) or 'none: the config sweeps nothing'})")
    if key in (t.get("in") or {}) or key in (t.get("relative_in") or {}):
        raise TargetError(f"{where}: median_over '{key}' cannot also be fixed by 'in' or 'relative_in'")
    if t["row"] == EVERY_ROW or t["metric"] in CHOICES:
        raise TargetError(f"{where}: median_over takes a named row's number (not '{EVERY_ROW}' or {t['metric']})")


def bound_of(kind: str, value, metric: str, domain, where: str) -> judge.Bound:
    """The Bound a target gives, refused when it is not a value of the metric or every value would meet it."""
    if kind in ("one_of", "contains"):
        return text_bound(kind, value, metric, where)
    if metric in CHOICES or kind == "equals":
        choices = CHOICES.get(metric, ())
        allowed = isinstance(value, str) and bool(value) if choices is None else value in choices
        if kind != "equals" or not allowed:
            raise TargetError(f"{where}: {metric} takes 'equals' with " + (
                "a name" if choices is None else f"one of {', '.join(map(str, choices))}") if metric in CHOICES else
                f"{where}: 'equals' is for {', '.join(CHOICES)}; give {metric} a bound")
        return judge.Bound(equals=value)
    if kind == "between":
        if not (isinstance(value, list) and len(value) == 2 and all(number(v) for v in value) and value[0] <= value[1]):
            raise TargetError(f"{where}: between needs [low, high], got {value!r}")
        low, high = map(float, value)
    elif not number(value):
        raise TargetError(f"{where}: {kind} needs a number, got {value!r}")
    else:
        low, high = (float(value), math.inf) if kind == "at_least" else (-math.inf, float(value))
    floor, ceiling = domain
    if low <= floor and high >= ceiling:
        raise TargetError(f"{where}: {kind} {value} cannot be missed ({metric} takes values in [{floor:g}, "
                          f"{ceiling:g}])")
    return judge.Bound(low, high)


def text_bound(kind: str, value, metric: str, where: str) -> judge.Bound:
    """one_of (a verdict among several) or contains (a note holding these words): refused where it cannot fail."""
    choices = CHOICES.get(metric, ())
    if kind == "contains":
        if metric not in CHOICES or choices is not None or not isinstance(value, str) or not value:
            raise TargetError(f"{where}: contains takes words, for {', '.join(k for k, v in CHOICES.items() if v is None)}")
        return judge.Bound(contains=value)
    if metric not in CHOICES or choices is None or not isinstance(value, list) or not value or \
            not set(value) <= set(choices) or set(choices) <= set(value):
        raise TargetError(f"{where}: one_of takes some but not all of "
                          f"{', '.join(map(str, choices or ('faithful', 'degraded', 'not faithful')))}"
                          f" ({metric} " + ("has choices)" if choices else "is not a choice)"))
    return judge.Bound(one_of=tuple(value))


def number(v) -> bool:
    """Whether v is a plain number (not a bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def table(target_list: List[dict], rows: List[dict], sweep_keys: Sequence[str]) -> List[dict]:
    """One row per target and sweep group (over `median_over`'s values, one per group of the other keys): the bound,
    ours, met / missed / no value, and how ours was obtained."""
    out = []
    for t in target_list:
        judged = len(out)
        over = t.get("median_over")
        for group in judge.groups(rows, [k for k in sweep_keys if k != over]):
            found = [judged_in(t, rows, g) for g in judge.groups(rows, sweep_keys) if judge.in_group(g, group)]
            found = [f for f in found if f is not None]
            if not found:
                continue
            used = [r for _, _, rs in found for r in rs]
            if over:
                values = [ours for ours, _, _ in found]
                ours = None if None in values else float(statistics.median(values))
                met, group = t["bound"].holds(ours), {**group, over: f"median of {len(values)}"}
            else:
                (ours, met, _), = found
            out.append({"what": t["what"], "row": t["row"], **group, "target": t["bound"].text(), "ours": ours,
                        "met": met, "verdict": MET[met], "how": how_obtained(used[0], worst_fidelity(used)),
                        "why": t.get("why", "")})
        if len(out) == judged:  # no row anywhere has the metric (or the target's row is not among them)
            out.append({"what": t["what"], "row": t["row"], **dict.fromkeys(sweep_keys), "target": t["bound"].text(),
                        "ours": "0/0 rows", "met": None, "verdict": MET[None], "how": "", "why": t.get("why", "")})
    return out


def judged_in(t: dict, rows: List[dict], group: dict) -> Optional[tuple]:
    """A target in one sweep group: (ours, met, the rows used), or None where it does not apply (not its group, no
    row there with the metric or the target's row)."""
    if not judge.in_group(group, t.get("in") or {}):
        return None
    if t["row"] == EVERY_ROW:  # every row that has the metric (a closed form checks no correctness)
        used = [r for r in rows if judge.in_group(r, group) and r.get(t["metric"]) is not None]
        if not used:  # a group none of whose rows has the metric (a config's command rows, only emulated)
            return None
        held = [t["bound"].holds(every_row_value(t, r, rows, group)) for r in used]
        return f"{sum(bool(h) for h in held)}/{len(used)} rows", None if None in held else all(held), used
    used = judge.rows_used(t, rows, group)
    if not used or used[0]["label"] != t["row"]:
        return None
    ours = judge.value_of(t, rows, group)
    return ours, t["bound"].holds(ours), used


def every_row_value(t: dict, row: dict, rows: List[dict], group: dict):
    """One row's value for a target on every row: its metric, or related to `relative_to`'s row (read in the
    reference group; relative_to '*': the row's own label there, e.g. each emulated row against its closed form)."""
    if not t.get("relative_to"):
        return row.get(t["metric"])
    label = row["label"] if t["relative_to"] == EVERY_ROW else t["relative_to"]
    return judge.value_of({**t, "row": row["label"], "relative_to": label}, rows, group)


def missed(rows: List[dict]) -> List[dict]:
    """The target rows not met (missed, or without a value)."""
    return [r for r in rows if r["met"] is not True]


def counts(rows: List[dict]) -> Dict[str, int]:
    """How many target rows were met, missed and without a value."""
    out: Dict[str, int] = {}
    for r in rows:
        out[r["verdict"]] = out.get(r["verdict"], 0) + 1
    return out


def bench_line(rows: List[dict]) -> str:
    """The count line: targets met of all, and those missed or without a value."""
    n = counts(rows)
    return (f"{n.get('met', 0)}/{len(rows)} targets met" + "".join(f", {n[v]} {v}" for v in ("missed", "no value")
                                                                   if n.get(v)))


def shown(value: Optional[object]) -> str:
    """A target's value as a table prints it."""
    return "-" if value is None else f"{value:.3g}" if number(value) else str(value)


def print_targets(rows: List[dict], sweep_keys: Sequence[str]) -> None:
    """The targets beside ours, one line each."""
    print("\ntargets:")
    for r in rows:
        group = " ".join(f"{k}={r[k]}" for k in sweep_keys if r.get(k) is not None)
        print(f"  {r['verdict']:<8} {r['what']}" + (f" ({group})" if group else "") +
              f": ours {shown(r['ours'])}, target {r['target']}; {r['how']}")
