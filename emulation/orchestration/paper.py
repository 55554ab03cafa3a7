"""The papers' values beside ours: a compare config's `paper:` block, checked, evaluated and tabled."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple, Union

METRICS = ("gst_median_s", "gst_theory_s", "gst_ratio", "compute_median_s", "iteration_median_s", "jct_s",
           "wire_ratio", "first_step_wire_ratio", "forward_phase_s", "overlapped_s", "comm_exposed_s",
           "compute_exposed_s", "loss_first", "loss_last", "accuracy")
RELATIONS = ("value", "ratio", "reduction")
CLAIM_KEYS = {"what", "row", "metric", "paper", "relative_to", "relation", "from"}

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
    out = []
    for i, c in enumerate(block["claims"]):
        where = f"paper.claims[{i}]"
        if not isinstance(c, dict):
            raise PaperError(f"{where} must be a mapping")
        unknown = set(c) - CLAIM_KEYS
        if unknown:
            raise PaperError(f"{where}: unknown key '{sorted(unknown)[0]}' (valid: {', '.join(sorted(CLAIM_KEYS))})")
        for key in ("what", "row", "metric", "paper"):
            if key not in c:
                raise PaperError(f"{where} needs '{key}'")
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
        out.append({**c, "relation": relation, "paper": paper_value(c["paper"], where),
                    "from": c.get("from", block.get("source", ""))})
    return out


def paper_value(v, where: str) -> Value:
    """A paper value: one number, or [low, high] when the paper gives a range."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    if (isinstance(v, list) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v) and v[0] <= v[1]):
        return (float(v[0]), float(v[1]))
    raise PaperError(f"{where}: paper must be a number or [low, high], got {v!r}")


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


def table(claim_list: List[dict], rows: List[dict], sweep_keys: Sequence[str]) -> List[dict]:
    """One row per claim and sweep group: the paper's value, ours, and whether ours agrees."""
    groups = list(dict.fromkeys(tuple(r.get(k) for k in sweep_keys) for r in rows))
    out = []
    for c in claim_list:
        for g in groups:
            group = dict(zip(sweep_keys, g))
            if not any(r["label"] == c["row"] and all(r.get(k) == v for k, v in group.items()) for r in rows):
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
            out.append({"what": c["what"], **group, "paper": shown, "ours": value, "ours_over_paper": over,
                        "agrees": agrees, "from": c["from"]})
    return out
