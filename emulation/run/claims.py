"""The papers' values beside ours: a compare config's `paper:` block, checked, evaluated and tabled."""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple, Union

# Every metric a claim can be judged on, with the values it can take (floor, ceiling): a range that holds both
# ends, or that opens at the floor of a metric without a ceiling, cannot fail and is refused.
METRIC_DOMAINS = {
    "gst_median_s": (0.0, math.inf), "gst_theory_s": (0.0, math.inf), "gst_ratio": (0.0, math.inf),
    "compute_median_s": (0.0, math.inf), "iteration_median_s": (0.0, math.inf), "jct_s": (0.0, math.inf),
    "throughput_sps": (0.0, math.inf), "wire_ratio": (0.0, math.inf), "first_step_wire_ratio": (0.0, math.inf),
    "forward_phase_s": (0.0, math.inf), "overlapped_s": (0.0, math.inf), "comm_exposed_s": (0.0, math.inf),
    "compute_exposed_s": (0.0, math.inf), "push_s": (0.0, math.inf), "broadcast_s": (0.0, math.inf),
    "dropped": (0.0, 1.0), "loss_first": (0.0, math.inf), "loss_last": (0.0, math.inf), "accuracy": (0.0, 1.0)}
METRICS = tuple(METRIC_DOMAINS)
RELATIONS = ("value", "ratio", "reduction")
RELATION_DOMAINS = {"ratio": (0.0, math.inf), "reduction": (-math.inf, 1.0)}
KINDS = ("paper", "model")
PAPERS = ("bml", "blueconnect", "ibatch", "parameter-flow", "terngrad")  # the texts the quotes come from
CLAIM_KEYS = {"what", "row", "metric", "paper", "relative_to", "relation", "from", "quote", "kind", "why",
              "out_of_reach"}
MAX_SPAN = 100.0  # a range whose high end is more than this times its low end asserts next to nothing
OUT_OF_REACH = "out of reach here"

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
    out = {**c, "kind": kind, "source": block.get("source", ""), "text": block.get("text")}
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
    if isinstance(value, tuple):
        check_can_fail(value, RELATION_DOMAINS.get(relation, METRIC_DOMAINS[c["metric"]]), where)
    return {**out, "relation": relation, "paper": value}


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
    def pick(label):
        r = next((r for r in rows if r["label"] == label and all(r.get(k) == v for k, v in group.items())), None)
        return None if r is None else r.get(claim["metric"])
    mine = pick(claim["row"])
    if mine is None or claim["relation"] == "value":
        return mine
    ref = pick(claim["relative_to"])
    if not ref:
        return None
    return mine / ref if claim["relation"] == "ratio" else 1.0 - mine / ref


def verdict(agrees: Optional[bool]) -> str:
    """The word a table prints for an evaluated claim."""
    return {True: "agrees", False: "differs", None: "no value"}[agrees]


def table(claim_list: List[dict], rows: List[dict], sweep_keys: Sequence[str]) -> List[dict]:
    """One row per claim and sweep group: the paper's value, ours, the verdict, and why where it differs
    (claims out of reach here get one row with the reason, unscored)."""
    groups = list(dict.fromkeys(tuple(r.get(k) for k in sweep_keys) for r in rows))
    out = []
    for c in claim_list:
        common = {"what": c["what"], "kind": c["kind"], "from": c["from"], "quote": c.get("quote", "")}
        if "out_of_reach" in c:
            out.append({**common, "paper": str(c.get("paper", "")), "ours": None, "ours_over_paper": None,
                        "agrees": None, "verdict": OUT_OF_REACH, "why": c["out_of_reach"], "how": ""})
            continue
        for g in groups:
            group = dict(zip(sweep_keys, g))
            row = next((r for r in rows if r["label"] == c["row"] and all(r.get(k) == v for k, v in group.items())),
                       None)
            if row is None:
                continue
            value = ours(c, rows, group)
            paper = c["paper"]
            if isinstance(paper, tuple):
                agrees = None if value is None else paper[0] <= value <= paper[1]
                shown, over = f"{paper[0]:g}-{paper[1]:g}", None
            else:
                over = None if value is None or not paper else value / paper
                agrees = None if over is None else abs(over - 1.0) <= 0.10
                shown = f"{paper:g}"
            out.append({**common, **group, "paper": shown, "ours": value, "ours_over_paper": over,
                        "agrees": agrees, "verdict": verdict(agrees),
                        "why": c.get("why", "") if agrees is False else "", "how": how_obtained(row)})
    return out


def how_obtained(row: dict) -> str:
    """Where a row's value came from: a closed form, simulated, measured on loopback, or measured on the emulated
    network (with its fidelity verdict)."""
    if row.get("mode") == "simulate":
        return "simulated"
    if row.get("mode") == "theory":
        return "closed form"
    if row.get("fidelity") in (None, "not measured"):
        return "measured (loopback)"
    return f"measured (emulated, {row['fidelity']})"
