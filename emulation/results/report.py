"""report.html for a run's folder and for a comparison: the verdict and its cause first, then the figures, embedded
so the file opens from anywhere (no script, no network); each figure also written as PNG and SVG beside it."""

from __future__ import annotations

import html
import json
import math
import os
from typing import Dict, List, Optional, Sequence, Tuple

from emulation.results.files import figure_uri, read_iterations, read_json, read_summary, read_table, write_atomic
from workloads.runfolder import RunFolder
from emulation.results.iterations import WARMUP
from emulation.results.trace import LINKS_PID, timeline_figure

REPORT = "report.html"
FIGURES = "figures"
FORMATS = ("png", "svg")
TIMELINE_RANKS = 16  # and its first ranks
TIMELINE_ITERATIONS = 2  # the report's timeline: the first iterations after the warm-up (a whole run is unreadable)
UNITS = {"bw": "Mbit/s", "batch": "samples per rank", "iters": "iterations", "compute_time": "s",
         "dilation": "x", "k_ratio": "share of values kept", "workers": "workers"}
Figure = Tuple[str, str, str]  # (file stem, title, caption)


def pyplot():
    """matplotlib's pyplot on the file-only back end, SVG text kept as text."""
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt
    return plt


def run_report(out_dir: str) -> str:
    """Write OUT/report.html (and OUT/figures/*) for a run's or a simulation's folder; returns its path."""
    summary = read_summary(out_dir)
    if summary is None:
        raise FileNotFoundError(f"no summary.json in {out_dir}")
    rows = read_iterations(out_dir)
    trace = read_json(RunFolder(out_dir).file(RunFolder.TRACE))
    plt = pyplot()
    figures: List[Figure] = []
    folder = os.path.join(out_dir, FIGURES)
    os.makedirs(folder, exist_ok=True)
    dilation = float(summary.get("dilation") or 1.0)
    if trace and any(e.get("ph") == "X" for e in trace["traceEvents"]):
        shown, ranks = shown_iterations(trace), int(summary.get("ranks") or summary.get("workers") or 0)
        fig = timeline_figure(trace, plt, shown, TIMELINE_RANKS)
        figures.append(save(fig, plt, folder, "timeline", "Timeline, one lane per link level",
                            f"Iterations {', '.join(map(str, shown))}, ranks 0-{min(ranks, TIMELINE_RANKS) - 1}"
                            f" of {ranks}: per rank, compute and "
                            f"every send, each link level in a lane of its own (real seconds"
                            f"{'; divide by the dilation ' + format(dilation, 'g') + ' for emulated time' if dilation != 1 else ''})."))
    if trace and counters(trace):
        figures.append(utilization(trace, summary, plt, folder, dilation))
    if rows:
        figures.append(iteration_times(rows, summary, plt, folder))
        figures.append(iteration_cdf(rows, plt, folder))
        figures.append(breakdown(rows, plt, folder))
    page = run_page(summary, figures, folder)
    path = os.path.join(out_dir, REPORT)
    write_atomic(path, page)
    return path


def shown_iterations(trace: dict) -> List[int]:
    """The iterations the report's timeline draws: the trace's first ones after the warm-up (its first ones when it
    has none after it: a simulation traces one synchronization)."""
    numbers = sorted({int(e["args"].get("iteration", 0)) for e in trace["traceEvents"] if e.get("ph") == "X"})
    after = [n for n in numbers if n >= WARMUP] or numbers
    return after[:TIMELINE_ITERATIONS]


def counters(trace: dict) -> List[dict]:
    """The trace's per-level rate counters."""
    return [e for e in trace["traceEvents"] if e.get("ph") == "C" and e.get("pid") == LINKS_PID]


def save(fig, plt, folder: str, stem: str, title: str, caption: str) -> Figure:
    """Write the figure as stem.png and stem.svg in folder and close it."""
    fig.tight_layout()
    for fmt in FORMATS:
        fig.savefig(os.path.join(folder, f"{stem}.{fmt}"), dpi=100)
    plt.close(fig)
    return stem, title, caption


def utilization(trace: dict, summary: dict, plt, folder: str, dilation: float) -> Figure:
    """All ranks' send rate per link level over time, in emulated seconds and Mbit/s, beside what the ranks' NICs
    could send together."""
    fig, ax = plt.subplots(figsize=(10, 3.6))
    events = sorted(counters(trace), key=lambda e: e["ts"])
    levels = sorted({k for e in events for k in e["args"]})
    colours = plt.get_cmap("tab10")
    shaped = summary.get("shaped_mbps") or []
    ranks = summary.get("ranks") or 0
    for n, level in enumerate(levels):
        t = [e["ts"] / 1e6 / dilation for e in events if level in e["args"]]
        y = [e["args"][level] * dilation for e in events if level in e["args"]]
        ax.step(t, y, where="post", color=colours(n), label=f"{level}: all ranks' sends")
        index = int(level[1:]) if level[1:].isdigit() else None
        if index is not None and index < len(shaped) and ranks:
            ax.axhline(shaped[index] * dilation * ranks, color=colours(n), linestyle="--", linewidth=0.8,
                       label=f"{level}: ranks x shaped rate ({ranks} x {shaped[index] * dilation:g})")
    ax.set_xlabel("emulated seconds since the first iteration started")
    ax.set_ylabel("Mbit/s (emulated)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.35)  # room for the legend above the lines
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title("Link traffic by level during each synchronization", fontsize=10)
    return save(fig, plt, folder, "links", "Link traffic over time",
                "Each synchronization's bytes sent on each link level over its window, all ranks together; the "
                "dashed line is every rank sending at its link's shaped rate at once.")


def iteration_times(rows: List[Dict[str, float]], summary: dict, plt, folder: str) -> Figure:
    """Iteration time and GST per iteration, the warm-up shaded and theory marked."""
    fig, ax = plt.subplots(figsize=(10, 3.4))
    x = [r["iteration"] for r in rows]
    if all("iteration_s" in r for r in rows):
        ax.plot(x, [r["iteration_s"] for r in rows], "o-", ms=3, label="iteration")
    if all("gst_s" in r for r in rows):
        ax.plot(x, [r["gst_s"] for r in rows], "s-", ms=3, label="gradient synchronization (GST)")
    if summary.get("gst_theory_s") is not None:
        ax.axhline(summary["gst_theory_s"], color="black", linestyle="--", linewidth=0.8, label="GST theory")
    if x and min(x) < WARMUP:
        ax.axvspan(min(x) - 0.5, WARMUP - 0.5, color="0.9", label="warm-up (left out of the medians)")
    ax.set_xlabel("iteration")
    ax.set_ylabel("seconds")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    return save(fig, plt, folder, "iterations", "Iteration times",
                "Every iteration's time and GST (slowest rank), beside the paper's closed form.")


def iteration_cdf(rows: List[Dict[str, float]], plt, folder: str) -> Figure:
    """Empirical CDFs of iteration time and GST after the warm-up."""
    fig, ax = plt.subplots(figsize=(6, 3.4))
    kept = [r for r in rows if r.get("iteration", 0) >= WARMUP] or rows
    for column, label in (("iteration_s", "iteration"), ("gst_s", "GST")):
        values = sorted(r[column] for r in kept if column in r)
        if values:
            ax.step(values, [(n + 1) / len(values) for n in range(len(values))], where="post", label=label)
    ax.set_xlabel("seconds")
    ax.set_ylabel("share of iterations at or below")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7)
    return save(fig, plt, folder, "cdf", "Distribution of iteration times",
                f"Empirical CDF over the {len(kept)} iterations after the warm-up.")


def breakdown(rows: List[Dict[str, float]], plt, folder: str) -> Figure:
    """Per iteration: compute, and the communication it did not hide (iteration - compute), GST marked."""
    fig, ax = plt.subplots(figsize=(10, 3.4))
    x = [r["iteration"] for r in rows]
    compute = [r.get("compute_s", 0.0) for r in rows]
    total = [r.get("iteration_s", c) for r, c in zip(rows, compute)]
    exposed = [max(t - c, 0.0) for t, c in zip(total, compute)]
    ax.bar(x, compute, color="0.6", label="compute")
    ax.bar(x, exposed, bottom=compute, color="tab:orange", label="communication not hidden (iteration - compute)")
    if all("gst_s" in r for r in rows):
        ax.plot(x, [r["gst_s"] for r in rows], "k_", ms=14, mew=2, label="GST (synchronization, hidden or not)")
    ax.set_xlabel("iteration")
    ax.set_ylabel("seconds")
    ax.legend(fontsize=7)
    return save(fig, plt, folder, "breakdown", "Compute and communication per iteration",
                "Where an iteration's time went: the device's compute and the communication left exposed after it; "
                "with --overlap part of the GST hides under the backward pass.")


def fmt(value, spec: str = ".4g", unit: str = "") -> str:
    """A number for the page ('-' when missing)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:{spec}}{unit}" if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)


def table(rows: Sequence[Tuple[str, str]]) -> str:
    """A two-column table of (name, value)."""
    return "<table>" + "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows) + \
        "</table>"


def page(title: str, head: str, sections: Sequence[str], figures: Sequence[Figure], folder: str,
         provenance: dict) -> str:
    """The whole self-contained page."""
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
             "h1{font-size:1.4em}.verdict{font-size:1.2em;padding:.6em;border-radius:4px;background:#eef}"
             ".faithful{background:#e6f4e6}.degraded{background:#fff4d6}.bad{background:#fbe3e3}"
             "table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.2em .6em;"
             "text-align:left;font-size:.9em}figure{margin:1.5em 0}img.plot{max-width:100%}"
             "figcaption{font-size:.85em;color:#555}")
    body = [f"<h1>{html.escape(title)}</h1>", head, *sections]
    for stem, name, caption in figures:
        body.append(f'<figure id="{stem}"><h2>{html.escape(name)}</h2><img class="plot" alt="{html.escape(name)}" '
                    f'src="{figure_uri(folder, stem)}"><figcaption>{html.escape(caption)} Files: {FIGURES}/{stem}.png, '
                    f'{FIGURES}/{stem}.svg</figcaption></figure>')
    body.append("<h2>Provenance</h2>" + table([(k, fmt(v) if not isinstance(v, dict) else json.dumps(v))
                                               for k, v in provenance.items()]))
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{style}</style></head><body>{''.join(body)}</body></html>\n")


def verdict_class(verdict: Optional[str]) -> str:
    """The verdict box's colour class."""
    return {"faithful": "faithful", "degraded": "degraded", "not judged": "neutral", "not faithful": "bad"}.get(
        verdict or "", "neutral")


def run_page(s: dict, figures: Sequence[Figure], folder: str) -> str:
    """A run's page: verdict and cause, the numbers at a glance, the figures, provenance."""
    fid = s.get("fidelity") or {}
    verdict = fid.get("verdict") or ("modelled" if s.get("mode") in ("simulate", "theory") else "no verdict")
    cause = fid.get("cause")
    head = (f'<p class="verdict {verdict_class(fid.get("verdict"))}"><b>{html.escape(verdict)}'
            f'</b>{": " + html.escape(str(cause)) if cause else ""}'
            f'{" &mdash; error: " + html.escape(str(s["error"])) if s.get("error") else ""}</p>')
    glance = table([
        ("what", f"{s.get('algo')} on {s.get('topology')}, {s.get('model')}, {s.get('workers')} workers, "
                 f"{fmt(s.get('bw_mbps'), 'g')} Mbit/s ({s.get('mode', 'emulate')})"),
        ("GST median", f"{fmt(s.get('gst_median_s'))} s; theory {fmt(s.get('gst_theory_s'))} s "
                       f"({s.get('gst_formula', '-')}); ratio {fmt(s.get('gst_ratio'), '.3f')}"),
        ("iteration median", f"{fmt(s.get('iteration_median_s'))} s; compute {fmt(s.get('compute_median_s'))} s; "
                             f"JCT {fmt(s.get('jct_s'), '.3g')} s"),
        ("iterations", f"{s.get('iterations')}/{s.get('iterations_requested')} (the first {WARMUP} are warm-up)"),
        ("correct", f"{s.get('correct')} (replicas identical: {s.get('replicas_identical')}, first sum verified: "
                    f"{s.get('sum_verified')})"),
        ("dilation", fmt(s.get("dilation") or 1, "g")),
        ("bytes sent by level", ", ".join(f"{k}: {v / 2**20:.1f} MiB" for k, v in
                                          (s.get("bytes_by_level") or {}).items()) or "-"),
    ])
    title = f"{s.get('algo')} on {s.get('topology')}"
    return page(title, head, ["<h2>At a glance</h2>" + glance], figures, folder, s.get("provenance") or {})


def compare_report(result: dict) -> str:
    """Write OUT/report.html (and OUT/figures/*) for a comparison's result; returns its path."""
    out, rows, keys = result["out"], result["rows"], result["sweep_keys"]
    folder = os.path.join(out, FIGURES)
    os.makedirs(folder, exist_ok=True)
    plt = pyplot()
    figures: List[Figure] = []
    for key in keys:
        if len(numeric_values(rows, key)) >= 2:
            figures.append(against(rows, key, plt, folder))
    if scaling_groups(rows):
        figures.append(scaling(rows, plt, folder))
    if any(r.get("iteration_median_s") for r in rows):
        figures.append(row_breakdown(rows, keys, plt, folder))
    curves = read_table(os.path.join(out, "accuracy.csv"))
    if curves:
        figures.append(time_to_accuracy(rows, curves, keys, plt, folder))
    spreads = [(stem, title, caption) for stem, title, caption in (
        ("gst", "GST of every iteration, per run", "Boxes over the iterations after the warm-up; diamond: theory."),
        ("jct", "Iteration time of every iteration, per run", "JCT written above each box."),
        ("split", "Parameter pull and forward pass", "Overlapped and exposed parts (iBatch)."),
        ("accuracy", "Held-out accuracy against iterations", "One line per run."))
        if os.path.isfile(os.path.join(out, f"{stem}.png"))]
    verdicts: Dict[str, int] = {}
    for r in rows:
        v = str(r.get("fidelity") or r.get("mode") or "-")
        verdicts[v] = verdicts.get(v, 0) + 1
    worst = next((verdict_class(v) for v in ("not faithful", "degraded", "not judged", "faithful") if v in verdicts),
                 "neutral")
    head = (f'<p class="verdict {worst}"><b>{len(rows)} rows</b>: ' +
            ", ".join(f"{n} {html.escape(v)}" for v, n in sorted(verdicts.items())) + "</p>")
    columns = list(dict.fromkeys(["label", *keys, "mode", "gst_median_s", "gst_theory_s", "gst_ratio",
                                  "iteration_median_s", "correct", "fidelity"]))
    grid = "<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "</tr>" + "".join(
        "<tr>" + "".join(f"<td>{html.escape(fmt(r.get(c)))}</td>" for c in columns) + "</tr>" for r in rows) + \
        "</table>"
    sections = ["<h2>Rows</h2>" + grid]
    if result.get("paper"):
        claims = ["what", "paper", "ours", "ours_over_paper", "verdict", "evidence"]
        sections.append(f"<h2>The paper's claims beside ours</h2><p>{html.escape(str(result.get('source') or ''))}"
                        "</p><table><tr>" + "".join(f"<th>{c}</th>" for c in claims) + "</tr>" + "".join(
                            "<tr>" + "".join(f"<td>{html.escape(fmt(as_number(r.get(c))))}</td>" for c in claims) +
                            "</tr>"
                            for r in result["paper"]) + "</table>")
    prov = read_json(os.path.join(out, "provenance.json")) or {}
    html_page = page(f"Comparison {result.get('name', '')}", head, sections,
                     figures + spreads_in(out, folder, spreads), folder, prov)
    path = os.path.join(out, REPORT)
    write_atomic(path, html_page)
    return path


def as_number(value):
    """A CSV cell as a float where it is one (so it prints to 4 digits), else as it is."""
    try:
        return float(value) if isinstance(value, str) and value.strip() else value
    except ValueError:
        return value


def spreads_in(out: str, folder: str, spreads: List[Figure]) -> List[Figure]:
    """The comparison's box plots (written beside comparison.csv), copied into the figures folder."""
    import shutil
    for stem, _, _ in spreads:
        for fmt_ in FORMATS:
            src = os.path.join(out, f"{stem}.{fmt_}")
            if os.path.isfile(src):
                shutil.copyfile(src, os.path.join(folder, f"{stem}.{fmt_}"))
    return spreads


def numeric_values(rows: List[dict], key: str) -> List[float]:
    """The distinct numeric values a sweep key takes."""
    out = set()
    for r in rows:
        try:
            out.add(float(r.get(key)))
        except (TypeError, ValueError):
            pass
    return sorted(out)


def axis_label(key: str) -> str:
    """A swept key with its unit."""
    unit = UNITS.get(key)
    return f"{key} ({unit})" if unit else key


def against(rows: List[dict], key: str, plt, folder: str) -> Figure:
    """GST against a swept value: one line per label and back end, theory dashed; log axes over decades."""
    fig, ax = plt.subplots(figsize=(8, 4))
    colours = plt.get_cmap("tab10")
    labels = list(dict.fromkeys(r["label"] for r in rows))
    styles = {"emulate": "o-", "simulate": "s:", "theory": "^-."}
    for n, label in enumerate(labels):
        mine = [r for r in rows if r["label"] == label and r.get(key) is not None]
        for mode, style in styles.items():
            points = sorted((float(r[key]), r["gst_median_s"]) for r in mine if (r.get("mode") or "emulate") == mode
                            and r.get("gst_median_s") is not None and is_number(r.get(key)))
            if points:
                ax.plot(*zip(*points), style, color=colours(n % 10), label=f"{label} ({mode}d)" if mode != "theory"
                        else f"{label} (theory row)")
        theory = sorted((float(r[key]), r["gst_theory_s"]) for r in mine if r.get("gst_theory_s") is not None
                        and is_number(r.get(key)))
        if theory and any((r.get("mode") or "emulate") != "theory" for r in mine):
            ax.plot(*zip(*dict(theory).items()), "--", color=colours(n % 10), alpha=0.6, label=f"{label} closed form")
    values = numeric_values(rows, key)
    if values[0] > 0 and values[-1] / values[0] >= 10:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(axis_label(key))
    ax.set_ylabel("GST median (s)")
    ax.legend(fontsize=7)
    return save(fig, plt, folder, f"gst-vs-{key}", f"GST against {key}",
                f"Each label's median GST at each {key}, emulated, simulated and in closed form where the config "
                f"has them (log axes when the sweep spans a decade or more).")


def is_number(value) -> bool:
    """Whether a value reads as a number."""
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


def scaling_groups(rows: List[dict]) -> Dict[Tuple[str, str], List[dict]]:
    """Rows of one label and back end that ran at two or more worker counts (the ones scaling can be read from)."""
    groups: Dict[Tuple[str, str], List[dict]] = {}
    for r in rows:
        if r.get("workers") and r.get("iteration_median_s"):
            groups.setdefault((r["label"], r.get("mode") or "emulate"), []).append(r)
    return {k: v for k, v in groups.items() if len({r["workers"] for r in v}) >= 2}


def scaling(rows: List[dict], plt, folder: str) -> Figure:
    """Throughput (samples/s) and scaling efficiency against the number of workers, per label and back end that
    ran at several worker counts."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    for (label, mode), mine in scaling_groups(rows).items():
        points = sorted((r["workers"], r.get("throughput_sps") or r["workers"] * r.get("batch", 1) /
                         r["iteration_median_s"]) for r in mine)
        label = f"{label} ({mode})"
        a.plot(*zip(*points), "o-", label=label)
        w0, t0 = points[0]
        b.plot([w for w, _ in points], [t / (t0 * w / w0) for w, t in points], "o-", label=label)
    a.set_xlabel("workers")
    a.set_ylabel("samples per second")
    b.set_xlabel("workers")
    b.set_ylabel("scaling efficiency (1 = linear)")
    b.set_ylim(bottom=0)
    a.legend(fontsize=7)
    return save(fig, plt, folder, "scaling", "Scaling with the number of workers",
                "Throughput from each run's median iteration; efficiency against linear scaling from the fewest "
                "workers of the same label.")


def row_breakdown(rows: List[dict], keys: List[str], plt, folder: str) -> Figure:
    """Per row: the median iteration as compute and the communication left exposed (iteration - compute)."""
    shown = [r for r in rows if r.get("iteration_median_s")]
    names = [" ".join([r["label"], *(f"{k}={r.get(k)}" for k in keys)]) +
             ("" if (r.get("mode") or "emulate") == "emulate" or "mode" in keys else f" ({r['mode']})")
             for r in shown]
    compute = [r.get("compute_median_s") or 0.0 for r in shown]
    exposed = [max(r["iteration_median_s"] - c, 0.0) for r, c in zip(shown, compute)]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(shown) + 3), 4.2))
    x = range(len(shown))
    ax.bar(x, compute, color="0.6", label="compute")
    ax.bar(x, exposed, bottom=compute, color="tab:orange", label="communication not hidden")
    ax.set_xticks(list(x), names, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("seconds per iteration (median)")
    ax.legend(fontsize=7)
    return save(fig, plt, folder, "breakdown", "Compute and exposed communication per row",
                "Each row's median iteration split into the device's compute and the communication it did not "
                "hide.")


def time_to_accuracy(rows: List[dict], curves: List[dict], keys: List[str], plt, folder: str) -> Figure:
    """Held-out accuracy against time (iteration x the run's median iteration time)."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for r in rows:
        pick = [c for c in curves if c["label"] == r["label"] and all(str(c.get(k)) == str(r.get(k)) for k in keys)]
        if not pick or not r.get("iteration_median_s"):
            continue
        name = " ".join([r["label"]] + [f"{k}={r.get(k)}" for k in keys])
        ax.plot([float(c["iteration"]) * r["iteration_median_s"] for c in pick],
                [float(c["accuracy"]) for c in pick], "o-", ms=3, label=name)
    ax.set_xlabel("training time (s, iterations x median iteration time)")
    ax.set_ylabel("held-out accuracy")
    ax.legend(fontsize=7)
    return save(fig, plt, folder, "time-to-accuracy", "Time to accuracy",
                "Which configuration reaches an accuracy first, at each run's own iteration time.")
