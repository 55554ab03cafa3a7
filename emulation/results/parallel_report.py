"""report.html of a parallel job (`simulate --parallel --out`, `run --parallel`): an emulated job's verdict first,
the pipeline's timeline and, per kind of traffic, its bytes and its time on the critical path, from the job's
summary."""

from __future__ import annotations

import html
import os

from emulation.results.figures import plot_pipeline
from emulation.results.files import write_atomic


def parallel_report(out: str, s: dict) -> str:
    """Draw pipeline.png/.svg and write report.html in out; its path."""
    stages = 1 + max((span[0] for span in s["timeline"]), default=0)
    if s["timeline"]:
        plot_pipeline(out, s["timeline"], stages, f"{s['model']} {s['parallel']} {s['schedule']}, "
                                                  f"{s['micro_batches']} micro-batches ({s['mode']})")
    rows = "".join(f"<tr><td>{k}</td><td>{s['bytes_per_kind'].get(k, 0) / 2**20:,.2f}</td>"
                   f"<td>{s['critical_path_s'][k]:.4f}</td></tr>" for k in s["kinds"])
    bubbles = ", ".join(f"{b:.3f}" for b in s["bubble_per_stage"])
    page = (f"<!doctype html><meta charset='utf-8'><title>{html.escape(s['parallel'])}</title>"
            f"<h1>{html.escape(s['model'])} on {html.escape(s['topology'])}: {html.escape(s['parallel'])}</h1>"
            + verdict(s) + (
                f"<p>iteration {s['iteration_s']:.4f} s ({s['mode']}; closed form {s['iteration_theory_s']:.4f} s); "
                f"pipeline {s['pipeline_s']:.4f} s; bubble per stage {bubbles} ((p-1)/(m+p-1) = "
                f"{s['bubble_formula']:.3f})</p><img src='pipeline.svg' alt='the pipeline, one lane per stage'>"
                if s["iteration_s"] is not None else "") +
            f"<table border=1 cellpadding=4><tr><th>kind</th><th>MiB sent per iteration (all ranks)</th>"
            f"<th>seconds on the critical path{' (flow model)' if s['mode'] == 'emulate' else ''}</th></tr>{rows}"
            f"</table>")
    path = os.path.join(out, "report.html")
    write_atomic(path, page)
    return path


def verdict(s: dict) -> str:
    """An emulated job's verdict first: correct, fidelity and its cause, the iteration over the flow model's."""
    if s["mode"] != "emulate":
        return ""
    fid = s.get("fidelity") or {}
    over = f"; iteration {s['over_flow_model']:.3f} times the flow model's" if s.get("over_flow_model") else ""
    return (f"<p><b>fidelity: {html.escape(str(fid.get('verdict')))}</b>"
            f"{': ' + html.escape(fid['cause']) if fid.get('cause') else ''}{over}; correct: {s.get('correct')} "
            f"(dilation {s.get('dilation', 1):g}){'; ' + html.escape(s['error']) if s.get('error') else ''}</p>")
