"""Per collective of a `dmlbed bench`: its fastest plan at the largest size (where nccl-tests reads busbw), against the
link rate, its closed form, the flow model and the outside reference (torch.distributed's gloo), with the op's
wrong sums and rows faster than the links over every size and plan."""

from __future__ import annotations

from typing import Dict, List, Optional

FLOW_MODEL_WITHIN = 0.10  # a row whose time is further than this from its flow model's is counted as outside it


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    """a / b, None when either is missing or b is zero."""
    return a / b if a is not None and b else None


def best_of_op(rows: List[dict], link_mbps: float, reference: str) -> Optional[dict]:
    """One op's rows (every plan and size) summarized; None when it has no plan row at a size (the reference alone)."""
    top = max(r["size_bytes"] for r in rows)
    largest = [r for r in rows if r["size_bytes"] == top and r.get("time_s")]
    plans = [r for r in largest if r["algo"] != reference]
    if not plans:
        return None
    best = min(plans, key=lambda r: r["time_s"])
    ref = next((r for r in largest if r["algo"] == reference), None)
    outside = [r for r in rows if r.get("ratio_sim") is not None and abs(r["ratio_sim"] - 1) > FLOW_MODEL_WITHIN]
    return {"plan": best["algo"], "size_bytes": top, "time_s": best["time_s"], "busbw_mbps": best.get("busbw_mbps"),
            "busbw_of_link": ratio(best.get("busbw_mbps"), link_mbps), "over_theory": best.get("ratio"),
            "over_flow_model": best.get("ratio_sim"), "fidelity": best.get("fidelity"),
            "reference_busbw_mbps": ref and ref.get("busbw_mbps"),
            "over_reference": ratio(best["time_s"], ref and ref["time_s"]),
            "wrong": sum(r.get("wrong") or 0 for r in rows),
            "faster_than_links": sum(bool(r.get("faster_than_links")) for r in rows),
            "rows_outside_flow_model": len(outside)}


def best_by_op(rows: List[dict], link_mbps: float, reference: str) -> Dict[str, dict]:
    """{op: its summary} for every op the rows hold (reference: the algorithm name of the outside reference)."""
    out = {}
    for op in dict.fromkeys(r["op"] for r in rows):
        summary = best_of_op([r for r in rows if r["op"] == op], link_mbps, reference)
        if summary is not None:
            out[op] = summary
    return out
