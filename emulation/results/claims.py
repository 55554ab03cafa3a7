"""The papers' values beside ours: a compare config's `paper:` block, checked, evaluated and tabled. A claim only
counts when it could have failed: a range or an agreement band that holds the value of no effect is refused, a
claim resting on an emulated run that was degraded or not faithful is not judged (saying which), a claim that
follows from others is marked derived and not counted again, and each claim says what kind of evidence it is."""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple, Union

from emulation.results import judge as judge_rows

# Every metric a claim can be judged on, with the values it can take (floor, ceiling): a range that holds both
# ends, or that opens at the floor of a metric without a ceiling, cannot fail and is refused.
METRIC_DOMAINS = {
    "gst_median_s": (0.0, math.inf), "gst_theory_s": (0.0, math.inf), "gst_ratio": (0.0, math.inf),
    "compute_median_s": (0.0, math.inf), "iteration_median_s": (0.0, math.inf), "period_median_s": (0.0, math.inf),
    "jct_s": (0.0, math.inf),
    "throughput_sps": (0.0, math.inf), "wire_ratio": (0.0, math.inf), "first_step_wire_ratio": (0.0, math.inf),
    "forward_phase_s": (0.0, math.inf), "overlapped_s": (0.0, math.inf), "comm_exposed_s": (0.0, math.inf),
    "compute_exposed_s": (0.0, math.inf), "push_s": (0.0, math.inf), "broadcast_s": (0.0, math.inf),
    "dropped": (0.0, 1.0), "loss_first": (0.0, math.inf), "loss_last": (0.0, math.inf), "accuracy": (0.0, 1.0),
    "later_steps_wire_ratio": (0.0, math.inf), "comm_over_compute": (0.0, math.inf),
    "switch_ratio_fat_tree": (0.0, math.inf)}
METRICS = tuple(METRIC_DOMAINS)
RELATIONS = ("value", "ratio", "reduction", "difference")
RELATION_DOMAINS = {"ratio": (0.0, math.inf), "reduction": (-math.inf, 1.0), "difference": (-math.inf, math.inf)}
KINDS = ("paper", "model")  # whose claim: a paper's, or dmlbed's own model
# What agreeing would show: a paper's measurement reproduced, a model (the paper's formula, or dmlbed's) checked
# against a run or the flow model, or a property that holds by construction (counted, never a reproduction).
EVIDENCE = ("measurement", "model", "construction")
PAPERS = ("bml", "blueconnect", "ibatch", "parameter-flow", "terngrad")  # the texts the quotes come from
CLAIM_KEYS = {"what", "row", "metric", "paper", "relative_to", "relation", "from", "quote", "kind", "why",
              "out_of_reach", "evidence", "derived", "tolerance"}
MAX_SPAN = 100.0  # a range whose high end is more than this times its low end asserts next to nothing
TOLERANCE = 0.10  # ours/paper within this agrees, unless a claim sets its own
MAX_TOLERANCE = 0.5
NO_EFFECT = {"ratio": 1.0, "reduction": 0.0, "difference": 0.0}  # what a relation reads when the two rows do not differ
OUT_OF_REACH = "out of reach here"


def not_judged(fidelity: str) -> str:
    """A claim's verdict when the emulated run it rests on was not faithful, in the fidelity verdict's own word."""
    return f"not judged (emulation {fidelity})"


NOT_JUDGED = not_judged("not faithful")
NOT_JUDGED_LOOPBACK = "not judged (a time measured on loopback: no emulated network)"
NETWORK_TIMES = ("gst_median_s", "gst_ratio", "iteration_median_s", "period_median_s", "jct_s", "throughput_sps",
                 "broadcast_s", "comm_over_compute")  # metrics the network sets: a loopback run's value says nothing of them
UNFAITHFUL = ("degraded", "not judged", "not faithful")  # fidelity verdicts a judged claim may not rest on
FIDELITY_ORDER = {"faithful": 0, "degraded": 1, "not judged": 2, "not faithful": 3}

Value = Union[float, Tuple[float, float]]


class PaperError(ValueError):
    """The `paper:` block is malformed; the message names the key."""


def claims(data: dict, labels: Sequence[str]) -> List[dict]:
    """The checked claims of a config's `paper:` block ([] when it has none)."""
    block = data.get("paper")
    if block is None:
        return []
    if not isinstance(block, dict) or not isinstance(block.get("claims"), list) or not block["claims"]:
        raise PaperError("'paper' needs 'source' and a non-empty 'claims' list")
    if block.get("text") not in PAPERS:
        raise PaperError(f"paper.text '{block.get('text')}' names no paper (valid: {', '.join(PAPERS)})")
    return [claim(c, f"paper.claims[{i}]", labels, block) for i, c in enumerate(block["claims"])]


def claim(c, where: str, labels: Sequence[str], block: dict) -> dict:
    """One checked claim: a paper's measurement (with its verbatim quote), dmlbed's model, or out of reach here."""
    if not isinstance(c, dict):
        raise PaperError(f"{where} must be a mapping")
    unknown = set(c) - CLAIM_KEYS
    if unknown:
        raise PaperError(f"{where}: unknown key '{sorted(unknown)[0]}' (valid: {', '.join(sorted(CLAIM_KEYS))})")
    kind = c.get("kind", "paper")
    if kind not in KINDS:
        raise PaperError(f"{where}: kind '{kind}' is not one of {', '.join(KINDS)}")
    required = ("what", "from") + (("quote",) if kind == "paper" else ())
    if "out_of_reach" not in c:
        required += ("row", "metric", "paper")
    for key in required:
        if not c.get(key):
            raise PaperError(f"{where} needs '{key}'")
    evidence = c.get("evidence", "model" if kind == "model" else None)
    if "out_of_reach" not in c and evidence not in EVIDENCE:
        raise PaperError(f"{where} needs 'evidence': one of {', '.join(EVIDENCE)} (what agreeing would show)")
    if kind == "model" and evidence == "measurement":
        raise PaperError(f"{where}: dmlbed's own model is not a paper's measurement (evidence model or construction)")
    out = {**c, "kind": kind, "evidence": evidence or "", "source": block.get("source", ""), "text": block.get("text")}
    if "out_of_reach" in c:
        return out
    for key in ("row", "relative_to"):
        if key in c and c[key] not in labels:
            raise PaperError(f"{where}: {key} '{c[key]}' is not a run label (labels: {', '.join(labels)})")
    if c["metric"] not in METRICS:
        raise PaperError(f"{where}: metric '{c['metric']}' is not one of {', '.join(METRICS)}")
    relation = c.get("relation", "ratio" if "relative_to" in c else "value")
    if relation not in RELATIONS:
        raise PaperError(f"{where}: relation '{relation}' is not one of {', '.join(RELATIONS)}")
    if (relation != "value") != ("relative_to" in c):
        raise PaperError(f"{where}: relation '{relation}' {'needs' if relation != 'value' else 'takes no'} "
                         f"'relative_to'")
    value = paper_value(c["paper"], where)
    tolerance = c.get("tolerance", TOLERANCE)
    if not isinstance(tolerance, (int, float)) or isinstance(tolerance, bool) or not 0 < tolerance <= MAX_TOLERANCE:
        raise PaperError(f"{where}: tolerance {tolerance!r} is invalid: give a share in (0, {MAX_TOLERANCE:g}]")
    if isinstance(value, tuple):
        check_can_fail(value, RELATION_DOMAINS.get(relation, METRIC_DOMAINS[c["metric"]]), where)
    check_effect(value, relation, where)
    return {**out, "relation": relation, "paper": value, "tolerance": float(tolerance)}


def check_effect(value: Value, relation: str, where: str) -> None:
    """Refuse a range holding the relation's value of no effect (a speed-up 'up to 2.2x' scored as [1, 2.2]): no
    effect would satisfy it. A claimed effect as a number cannot: it is judged within a share of itself (bound)."""
    none = NO_EFFECT.get(relation)
    if none is not None and isinstance(value, tuple) and value[0] <= none <= value[1]:
        raise PaperError(f"{where}: the range [{value[0]:g}, {value[1]:g}] holds {none:g}, the {relation} of no "
                         f"effect, so it could not fail: give the paper's effect (its upper end) as a number")


def paper_value(v, where: str) -> Value:
    """A paper value: one number, or [low, high] when the paper gives a range."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if (isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v) and v[0] <= v[1]):
        return (float(v[0]), float(v[1]))
    raise PaperError(f"{where}: paper must be a number or [low, high], got {v!r}")


def check_can_fail(value: Tuple[float, float], domain: Tuple[float, float], where: str) -> None:
    """Refuse a range that every value of the metric would fall in (it could never disagree)."""
    low, high = value
    floor, ceiling = domain
    at_floor, at_ceiling = low <= floor, high >= ceiling
    too_wide = low > 0 and high / low > MAX_SPAN
    if (at_floor and (at_ceiling or math.isinf(ceiling))) or too_wide:
        raise PaperError(f"{where}: the range [{low:g}, {high:g}] cannot fail (the metric takes values in "
                         f"[{floor:g}, {ceiling:g}]); give the paper's own bounds")


def ours(claim: dict, rows: List[dict], group: Dict[str, object]) -> Optional[float]:
    """Our value of a claim in one sweep group (None when a row is missing or failed)."""
    return judge_rows.value_of(claim, rows, group)


def verdict(agrees: Optional[bool]) -> str:
    """The word a table prints for an evaluated claim."""
    return {True: "agrees", False: "differs", None: "no value"}[agrees]


rows_used = judge_rows.rows_used


def row_verdicts(row: dict) -> List[str]:
    """A row's fidelity verdicts: its own, or a `bench` command row's, one per op and algorithm it ran."""
    if row.get("fidelity") is not None:
        return [row["fidelity"]]
    return [v for k, v in row.items() if k.startswith("fidelity.") and k.endswith(".verdict") and v]


def worst_fidelity(used: List[dict]) -> Optional[str]:
    """The worst fidelity verdict among emulated rows (None when none was emulated)."""
    verdicts = [v for r in used if r.get("mode", "emulate") == "emulate" for v in row_verdicts(r)
                if v in FIDELITY_ORDER]
    return max(verdicts, key=FIDELITY_ORDER.get) if verdicts else None


def bound(claim: dict) -> judge_rows.Bound:
    """What ours must be to agree: inside the paper's range, or within the claim's tolerance of its value (of its
    effect, for a relation with a value of no effect)."""
    paper, tolerance = claim["paper"], claim.get("tolerance", TOLERANCE)
    if isinstance(paper, tuple):
        return judge_rows.Bound(*paper)
    # an effect is judged on itself: a 13.6% gain within a tenth of 13.6%, not 1.136 within a tenth of 1.136
    return judge_rows.around(paper, tolerance, NO_EFFECT.get(claim.get("relation", "value"), 0.0))


def judge(claim: dict, value: Optional[float]) -> Tuple[Optional[bool], Optional[float], str]:
    """(agrees, ours/paper, the paper's value as printed) of one evaluated claim."""
    paper = claim["paper"]
    agrees = bound(claim).holds(value)
    if isinstance(paper, tuple):
        return agrees, None, f"{paper[0]:g}-{paper[1]:g}"
    return agrees, (None if value is None or not paper else value / paper), f"{paper:g}"


def table(claim_list: List[dict], rows: List[dict], sweep_keys: Sequence[str]) -> List[dict]:
    """One row per claim and sweep group: the paper's value, ours, the verdict, how ours was obtained (with the
    worst fidelity verdict of every run it uses) and why it differs where the config says (claims out of reach
    here get one row with the reason, unscored). A claim resting on an emulated run that was not faithful is not
    judged."""
    out = []
    for c in claim_list:
        common = {"what": c["what"], "kind": c["kind"], "evidence": c.get("evidence", ""), "from": c["from"],
                  "quote": c.get("quote", ""), "derived": c.get("derived", ""), "why": c.get("why", "")}
        if "out_of_reach" in c:
            out.append({**common, "paper": str(c.get("paper", "")), "ours": None, "ours_over_paper": None,
                        "agrees": None, "verdict": OUT_OF_REACH, "why": c["out_of_reach"], "how": ""})
            continue
        for group in judge_rows.groups(rows, sweep_keys):
            used = rows_used(c, rows, group)
            if not used or used[0]["label"] != c["row"]:
                continue
            value = ours(c, rows, group)
            agrees, over, shown = judge(c, value)
            worst = worst_fidelity(used)
            verdict_text = verdict(agrees)
            how = how_obtained(used[0], worst)
            if worst in UNFAITHFUL:
                agrees, verdict_text = None, not_judged(worst)
                how += fidelity_cause(used, worst)
            elif c.get("metric") in NETWORK_TIMES and any(on_loopback(r) for r in used):
                agrees, verdict_text = None, NOT_JUDGED_LOOPBACK
            out.append({**common, **group, "paper": shown, "ours": value, "ours_over_paper": over,
                        "agrees": agrees, "verdict": verdict_text, "how": how})
    return out


CAUSE_CHARS = 160  # a not-judged claim's cause as the table shows it (the archived rows keep it whole)


def fidelity_cause(used: List[dict], worst: str) -> str:
    """Why the run a not-judged claim rests on got its verdict (its fidelity cause, shortened), or nothing."""
    cause = next((r.get("fidelity_cause") for r in used if r.get("fidelity") == worst and r.get("fidelity_cause")),
                 None)
    if not cause:
        return ""
    if len(cause) > CAUSE_CHARS:
        cause = cause[:CAUSE_CHARS].rsplit(" ", 1)[0] + " ..."
    return f"; its cause: {cause}"


def on_loopback(row: dict) -> bool:
    """Whether a row's workers ran on loopback (an emulate row without an emulated network)."""
    return row.get("mode", "emulate") == "emulate" and row.get("fidelity") == "not measured"


def how_obtained(row: dict, worst: Optional[str] = None) -> str:
    """Where a row's value came from: a closed form, simulated, measured on loopback, or measured on the emulated
    network (with the worst fidelity verdict of the runs the claim uses)."""
    if row.get("mode") == "simulate":
        return "simulated"
    if row.get("mode") == "theory":
        return "closed form"
    verdicts = [v for v in row_verdicts(row) if v != "not measured"]
    if not verdicts:
        return "measured (loopback)"
    return f"measured (emulated, {worst or worst_fidelity([row]) or verdicts[0]})"


TITLES = {"measurement": "the papers' measurements vs ours", "model": "models (the papers' formulas, dmlbed's own) vs ours",
          "construction": "properties by construction"}


def print_paper(result: dict) -> None:
    """The paper's values beside ours (within the claim's tolerance, 10% by default, of the paper's value, or of its
    effect for a ratio, reduction or difference, agrees; a range must contain ours), by kind of evidence, each with
    how ours was obtained and why it differs where the config says; then what is out of reach here and why."""
    keys = result["sweep_keys"]
    rows = result["paper"]
    print(f"\nclaims of {result.get('source') or 'the paper'}:")
    for evidence in EVIDENCE:
        scored = [c for c in rows if c.get("evidence") == evidence and c["verdict"] != OUT_OF_REACH]
        if not scored:
            continue
        print(f"\n{TITLES[evidence]}:")
        print(f"  {'claim':<46} " + " ".join(f"{k:>8}" for k in keys) + f" {'paper':>11} {'ours':>8} "
              f"{'ours/paper':>10}  verdict")
        for c in scored:
            ours = "-" if c["ours"] is None else f"{c['ours']:.3f}"
            over = "-" if c["ours_over_paper"] is None else f"{c['ours_over_paper']:.2f}"
            what = c["what"] + (" (dmlbed's model)" if c["kind"] == "model" else "")
            print(f"  {what:<46} " + " ".join(f"{str(c.get(k)):>8}" for k in keys) +
                  f" {c['paper']:>11} {ours:>8} {over:>10}  {c['verdict']}")
            print(f"  {'':<46}   from {c['from']}; ours {c['how']}" + (f"; why: {c['why']}" if c["why"] else "")
                  + (f"; derived: {c['derived']}" if c.get("derived") else ""))
    unreachable = [c for c in rows if c["verdict"] == OUT_OF_REACH]
    if unreachable:
        print("\nout of reach here (not scored):")
        for c in unreachable:
            print(f"  {c['what']} ({c['from']}): {c['why']}")
