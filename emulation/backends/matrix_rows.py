"""What one row of a matrix holds (comparison.csv/json): a run's figures from its summary, a job's of several, a
command's JSON result flattened, and what an emulated run left on the machine."""

from __future__ import annotations

from typing import Optional

from emulation.net import leftovers
from emulation.results.files import read_iterations
from emulation.results.iterations import WARMUP
from emulation.run.sampling import switch_pid

COLUMNS = ["label", "mode", "topology", "algo", "codec", "model", "batch", "bw_mbps", "workers", "iterations",
           "gst_median_s", "gst_theory_s", "gst_ratio", "compute_median_s", "iteration_median_s", "iteration_mean_s",
           "period_median_s", "most_waited_for", "most_waited_for_share", "jct_s", "throughput_sps", "comm_over_compute",
           "communication_s", "wire_ratio", "first_step_wire_ratio", "later_steps_wire_ratio", "wire_payload_ratio",
           "interfaces_over_engine",
           "switch_ratio_fat_tree", "forward_phase_s", "overlapped_s", "comm_exposed_s", "compute_exposed_s", "push_s",
           "broadcast_s", "dropped", "loss_first", "loss_last", "accuracy", "correct", "fidelity", "fidelity_cause",
           "error", "slowdown", "alone_iteration_mean_s", "overlap_median", "dilation", "gst_cv",
           "spurious_rto_per_worker_iteration", "pss_mib_per_rank", "first_iteration_s", "wall_s", "peak_rss_mib",
           "gst_ratio_at_goodput", "wait_mean_s", "fidelity_scenario_note", "out"]


def row(entry: dict, summary: dict) -> dict:
    """One comparison.csv row (with the algorithm's own options, e.g. ibatch's pull schedule)."""
    r = {k: summary.get(k) for k in COLUMNS}
    r["mode"] = summary["mode"]
    r.update(summary.get("split_median_s") or {})
    stragglers = summary.get("stragglers") or {}
    r.update(most_waited_for=stragglers.get("most_waited_for"),
             most_waited_for_share=stragglers.get("most_waited_for_share"))
    per_iteration = r.get("iteration_mean_s") or r.get("iteration_median_s")  # BSP under stragglers: the mean
    if r.get("throughput_sps") is None and per_iteration and r.get("batch") and r.get("workers"):
        r["throughput_sps"] = r["batch"] * r["workers"] / per_iteration  # samples per second
    if r.get("iteration_median_s") and r.get("compute_median_s"):  # everything but the device's compute, over it
        r["communication_s"] = r["iteration_median_s"] - r["compute_median_s"]
        r["comm_over_compute"] = r["communication_s"] / r["compute_median_s"]
    fid = summary.get("fidelity") or {}
    r.update(fidelity=fid.get("verdict"), fidelity_cause=fid.get("cause"), gst_cv=fid.get("gst_cv"),
             fidelity_scenario_note=fid.get("scenario_note"),
             spurious_rto_per_worker_iteration=fid.get("spurious_rto_per_worker_iteration"))
    r["wait_mean_s"] = bsp_wait(cfg_out(entry, summary), summary)
    start = summary.get("rank_start") or {}
    r.update(first_iteration_s=start.get("first_iteration_s"),
             pss_mib_per_rank=(start.get("memory") or {}).get("pss_mib_per_rank"))
    for i, event in enumerate(summary.get("link_events") or []):  # link_events.0.after_over_before, ...
        r.update(flat(event, f"link_events.{i}."))
    cfg = entry["config"]
    for name in entry["job"].checked.algorithm.option_names:
        r[name] = getattr(cfg, name)
    r.update(label=entry["label"], out=cfg.out, **entry["sweep"])
    return r


def parallel_row(entry: dict, summary: dict) -> dict:
    """The comparison.csv row of a parallel job: its iteration in the run columns, and its layout, pipeline, bubble
    and per-kind bytes and critical path in columns of their own."""
    fid = summary.get("fidelity") or {}
    cfg = entry["config"]
    extra = {k: summary[k] for k in ("parallel", "placement", "schedule", "micro_batches", "pipeline_s",
                                     "iteration_theory_s", "over_theory", "flow_model_iteration_s",
                                     "over_flow_model", "max_weight_difference", "bubble_formula")}
    extra["bubble_max"] = max(summary["bubble_per_stage"]) if summary["bubble_per_stage"] else None
    extra.update(flat({"bytes_per_kind": summary["bytes_per_kind"], "critical_path_s": summary["critical_path_s"]}))
    return {**dict.fromkeys(COLUMNS), **extra, "label": entry["label"], "mode": summary["mode"],
            "topology": summary["topology"], "model": summary["model"], "batch": cfg.batch, "bw_mbps": cfg.bw,
            "workers": summary["ranks"], "iterations": cfg.iters, "iteration_median_s": summary["iteration_s"],
            "compute_median_s": summary["compute_per_micro_batch_s"], "correct": summary["correct"],
            "fidelity": fid.get("verdict"), "fidelity_cause": fid.get("cause"), "error": summary["error"],
            "dilation": summary["dilation"], "out": cfg.out, **entry["sweep"]}


def cfg_out(entry: dict, summary: dict) -> str:
    """The row's run folder."""
    return entry["config"].out if entry.get("config") is not None else (summary.get("config") or {}).get("out", "")


def bsp_wait(out: str, summary: dict) -> Optional[float]:
    """BSP's wait for the slowest rank: the mean over the iterations past warm-up of each iteration less its GST
    (iterations.csv; a closed form, which writes none: its mean iteration less its GST)."""
    rows = [r for r in read_iterations(out)[WARMUP:] if "iteration_s" in r and "gst_s" in r] if out else []
    if rows:
        return sum(r["iteration_s"] - r["gst_s"] for r in rows) / len(rows)
    if summary.get("iteration_mean_s") is not None and summary.get("gst_median_s") is not None:
        return summary["iteration_mean_s"] - summary["gst_median_s"]
    return None


def job_row(entry: dict, report: dict, job: dict) -> dict:
    """One comparison.csv row per job of a run of several jobs: its figures together, alone, its slowdown."""
    alone, together = job.get("alone") or {}, job.get("together") or {}
    fid = together.get("fidelity") or {}
    return {**dict.fromkeys(COLUMNS), "label": f"{entry['label']}/{job['name']}", "mode": report["mode"],
            "topology": report["topology"], "algo": job["algo"], "model": job["model"], "workers": job["ranks"],
            "iterations": entry["config"].iters, "compute_median_s": job.get("compute_s"),
            "iteration_mean_s": together.get("iteration_mean_s", together.get("iteration_s")),
            "iteration_median_s": together.get("iteration_median_s", together.get("iteration_s")),
            "gst_median_s": together.get("gst_median_s"), "correct": together.get("correct"),
            "alone_iteration_mean_s": alone.get("iteration_mean_s", alone.get("iteration_s")),
            "slowdown": job.get("slowdown"), "overlap_median": job.get("overlap_median"), "start": job["start"],
            "hosts": " ".join(job["hosts"]), "fidelity": fid.get("verdict"), "fidelity_cause": fid.get("cause"),
            "fidelity_scenario_note": fid.get("scenario_note"), "out": entry["config"].out, **entry["sweep"]}


def command_row(entry: dict, result: dict) -> dict:
    """The comparison.csv row of a `command:` row: the command's JSON result's figures (its verdict as the row's
    fidelity)."""
    figures = flat(result)  # a simulation's answered.method, a check's pattern_summary.stride:4.of_non_blocking_median
    goodput = (result.get("model_settings") or {}).get("goodput")
    if goodput and result.get("gst_ratio"):  # GST over the closed form at the links' goodput (not their line rate)
        figures["gst_ratio_at_goodput"] = result["gst_ratio"] * goodput
    fid = result.get("fidelity") if isinstance(result.get("fidelity"), dict) else {}  # a run's, or a check's verdict
    return {**dict.fromkeys(COLUMNS), **figures, "label": entry["label"], "mode": "emulate" if entry["job"].emulated
            else "simulate", "fidelity": result.get("verdict") or fid.get("verdict"),
            "fidelity_cause": result.get("cause") or fid.get("cause"),
            "fidelity_scenario_note": fid.get("scenario_note"), "correct": result.get("correct"),
            "out": entry["out"], **entry["sweep"]}


def scalar(v) -> bool:
    """Whether v goes into a table cell as it is."""
    return isinstance(v, (int, float, str, bool)) or v is None


def flat(result: dict, prefix: str = "") -> dict:
    """A command's JSON result as figures: its scalars and lists of scalars, those of nested mappings under dotted
    keys (lists of mappings, per-seed rows and the like, stay in its own folder)."""
    out = {}
    for k, v in result.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        elif scalar(v) or (isinstance(v, list) and all(scalar(x) for x in v)):
            out[prefix + k] = v
    return out


class MachineWatch:
    """What each emulated row of a matrix left on the machine beyond what was there before the matrix, and the
    software switch's process and resident memory after it (a soak's figures: leftovers, restarts, growth)."""

    def __init__(self):
        self.interfaces = leftovers.interfaces()
        self.before = set(leftovers.leftovers(self.interfaces))

    def after_run(self) -> dict:
        """The row's figures: leftovers (a list), their count, the switch's pid and VmRSS in kB."""
        left = [x for x in leftovers.leftovers(self.interfaces) if x not in self.before]
        pid = switch_pid()
        return {"leftovers": left, "leftover_count": len(left), "switch_pid": pid,
                "switch_rss_kb": leftovers.rss_kb(pid)}
