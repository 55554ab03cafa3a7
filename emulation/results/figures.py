"""A comparison's plots: per-iteration spread of every run (a box per run, theory marked), grouped and labelled by
what the sweep varies; each written as PNG and SVG."""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence

from emulation.results.files import read_iterations
from emulation.results.iterations import after_warmup

FORMATS = ("png", "svg")


def iteration_values(row: dict, column: str, fallback: str) -> List[float]:
    """A run's per-iteration values of an iterations.csv column after the warm-up (its folder is row['out']), or
    its one summary value when the folder has none."""
    rows = read_iterations(row["out"]) if row.get("out") else []
    values = after_warmup([r[column] for r in rows if column in r])
    if not values and row.get(fallback) is not None:
        values = [float(row[fallback])]
    return values


def group_name(sweep_keys: Sequence[str], group: tuple) -> str:
    """'batch=4, bw=50' for a sweep group ('' without a sweep)."""
    return ", ".join(f"{k}={v}" for k, v in zip(sweep_keys, group))


def plot(out_root: str, rows: List[dict], sweep_keys: List[str], curves: List[dict] = ()) -> List[str]:
    """gst.png (every iteration's GST per run, theory marked), jct.png (every iteration's time per run, JCT
    written above), split.png and accuracy.png when the runs have them, each beside an SVG; returns the PNG
    paths."""
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"  # SVG text stays text (editable, searchable)
    import matplotlib.pyplot as plt

    paths = [spread(out_root, rows, sweep_keys, plt, "iteration_s", "iteration_median_s", None, "jct_s",
                    "Iteration time\n(box: every iteration after the warm-up; above it: the run's JCT)", "jct"),
             spread(out_root, rows, sweep_keys, plt, "gst_s", "gst_median_s", "gst_theory_s", None,
                    "Gradient synchronization time\n(box: every iteration after the warm-up; diamond: theory)", "gst")]
    if any(r.get("forward_phase_s") is not None for r in rows):
        paths.append(plot_split(out_root, rows, plt))
    if curves:
        paths.append(plot_accuracy(out_root, curves, sweep_keys, plt))
    return paths


def spread(out_root: str, rows: List[dict], sweep_keys: List[str], plt, column: str, fallback: str,
           theory: Optional[str], note: Optional[str], title: str, name: str) -> str:
    """One box per run of a per-iteration column, runs grouped by sweep values, coloured by label."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    labels = list(dict.fromkeys(r["label"] for r in rows))
    groups = list(dict.fromkeys(tuple(r.get(k) for k in sweep_keys) for r in rows))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    by_label = not sweep_keys  # no sweep: a tick per run, named by its label
    width = 0.6 if by_label else 0.8 / max(1, len(labels))
    handles = []
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(groups) * len(labels) + 2.5), 4.4))
    for li, label in enumerate(labels):
        colour = colours[li % len(colours)]
        for gi, group in enumerate(groups):
            match = [r for r in rows if r["label"] == label and tuple(r.get(k) for k in sweep_keys) == group]
            values = iteration_values(match[0], column, fallback) if match else []
            if not values:
                continue
            x = li if by_label else gi + (li - (len(labels) - 1) / 2) * width
            ax.boxplot([values], positions=[x], widths=width * 0.8, patch_artist=True, manage_ticks=False,
                       boxprops={"facecolor": colour, "alpha": 0.6}, medianprops={"color": colour, "linewidth": 2},
                       flierprops={"markersize": 3})
            if theory and match[0].get(theory) is not None:
                ax.scatter([x], [match[0][theory]], marker="D", color="black", s=22, zorder=3)
            if note and match[0].get(note) is not None:
                ax.annotate(f"JCT {match[0][note]:.3g} s", (x, max(values)), textcoords="offset points", xytext=(0, 4),
                            ha="center", fontsize=7)
        handles.append(Patch(facecolor=colour, alpha=0.6, label=label))
    if theory:
        handles.append(Line2D([], [], marker="D", color="black", linestyle="", markersize=5, label="theory"))
    ticks = labels if by_label else [group_name(sweep_keys, g) for g in groups]
    ax.set_xticks(range(len(ticks)))
    ax.set_xticklabels(ticks, fontsize=8)
    ax.set_xlim(-0.6, len(ticks) - 0.4)
    ax.set_xlabel(", ".join(sweep_keys) if sweep_keys else "run")
    ax.set_ylabel("seconds")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)  # room for the labels above the boxes
    return save(fig, ax, plt, title, os.path.join(out_root, name), handles)


def save(fig, ax, plt, title: str, stem: str, handles: Optional[list] = None, outside: bool = False) -> str:
    """Title and legend the axes (outside: right of them, clear of the data), write the figure as stem.png and
    stem.svg, close it; the PNG's path."""
    ax.set_title(title, fontsize=10)
    ax.legend(handles=handles, fontsize=8, **({"loc": "upper left", "bbox_to_anchor": (1.01, 1.0)} if outside else {}))
    fig.tight_layout()
    for fmt in FORMATS:
        fig.savefig(f"{stem}.{fmt}", dpi=110)
    plt.close(fig)
    return f"{stem}.png"


def plot_split(out_root: str, rows: List[dict], plt) -> str:
    """split.png: pull + forward time split into overlapped, exposed communication, exposed computation."""
    fig, ax = plt.subplots(figsize=(6, 4))
    names = [r["label"] for r in rows]
    bottom = [0.0] * len(rows)
    for key, label in (("comm_exposed_s", "communication not overlapped"), ("overlapped_s", "overlapped"),
                       ("compute_exposed_s", "computation not overlapped")):
        vals = [r.get(key) or 0.0 for r in rows]
        ax.bar(names, vals, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("seconds per iteration (median)")
    return save(fig, ax, plt, "Parameter pull + forward pass", os.path.join(out_root, "split"))


def plot_accuracy(out_root: str, curves: List[dict], sweep_keys: List[str], plt) -> str:
    """accuracy.png: held-out accuracy against iterations, one line per run (--eval-every)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    runs: Dict[tuple, List[dict]] = {}
    for c in curves:
        runs.setdefault((c["label"], *(c.get(k) for k in sweep_keys)), []).append(c)
    for run, points in runs.items():
        name = " ".join([run[0]] + [f"{k}={v}" for k, v in zip(sweep_keys, run[1:])])
        ax.plot([c["iteration"] for c in points], [c["accuracy"] for c in points], marker="o", ms=3, label=name)
    ax.set_xlabel("iteration")
    ax.set_ylabel("held-out accuracy")
    return save(fig, ax, plt, "Convergence", os.path.join(out_root, "accuracy"))


PIPELINE_COLOURS = {"F": "#4c78a8", "B": "#f58518", "send-F": "#9ecae9", "send-B": "#ffbf79", "dp": "#54a24b"}


def plot_pipeline(out_root: str, spans: List[list], stages: int, title: str) -> str:
    """pipeline.png: one lane per pipeline stage, its forward and backward passes, its sends (thin, below the lane)
    and its data-parallel sum, as Megatron-LM's and GPipe's papers draw a schedule; idle time is the white between."""
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, ax = plt.subplots(figsize=(9, 1 + 0.6 * stages))
    for stage, kind, micro_batch, start, end in spans:
        thin = kind.startswith("send")
        y = stages - 1 - stage - (0.42 if thin else 0.0)
        ax.barh(y, end - start, left=start, height=0.14 if thin else 0.6, color=PIPELINE_COLOURS[kind],
                edgecolor="white", linewidth=0.4)
        if kind in ("F", "B") and end - start > 0:
            ax.text(start + (end - start) / 2, y, str(micro_batch), ha="center", va="center", fontsize=6)
    ax.set_yticks([stages - 1 - s for s in range(stages)], [f"stage {s}" for s in range(stages)])
    ax.set_xlabel("seconds from the iteration's start")
    names = {"F": "forward", "B": "backward", "send-F": "activation sent", "send-B": "gradient sent",
             "dp": "data-parallel sum"}
    handles = [Patch(color=c, label=names[k]) for k, c in PIPELINE_COLOURS.items()]
    return save(fig, ax, plt, title, os.path.join(out_root, "pipeline"), handles, outside=True)
