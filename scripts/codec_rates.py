"""Where compression starts to pay (issue 41): configs/codecs-rates.yaml (every codec against fp32 on a ResNet-18-sized
model, 10 Mbit/s to 25 Gbit/s; emulated up to 1 Gbit/s, simulated and in closed form at every rate) run with `dmlbed
compare`, then per codec and rate the speed-up of an iteration over fp32's (emulated, flow model, closed form), the
rate above which it gains less than 10% (from the closed form, interpolated on a log scale), each emulated iteration
time against the closed form's, and rates.png/svg (iteration time and speed-up against rate; time to accuracy where
the digits convergence run used the same codec options). JSON report (rates.json in the folder), exit 1 when a target
of the config's `targets:` block is missed (judged by the package, on the rows with any run again in place: each
emulated row correct, faithful and within 15% of the closed form; top-k's and random-k's speed-up bounds).

Usage: .venv/bin/python scripts/codec_rates.py FOLDER [--config CONFIG] [--judge-only] [--convergence FOLDER]
       .venv/bin/python scripts/codec_rates.py FOLDER --rerun "LABEL;LABEL"  (those rows again, then the judgement)
Rows run again (FOLDER-again/rows-N, by --rerun) replace the folder's in --judge-only and --rerun; a full run does
not read them (remove FOLDER-again when the whole config has run again).
"""

import argparse
import csv
import json
import math
import os
import sys
from collections import defaultdict
from typing import Sequence

from case_runs import config_targets, dmlbed, write_report

CONFIG = "configs/codecs-rates.yaml"
BASELINE = "fp32"
PAYS = 1.10  # a codec pays while it makes an iteration at least 10% faster than fp32
DEVICE_BOUND = {"topk": (1000, 1.3), "randomk": (1000, 1.3)}  # (rate, speed-up): the device time that would meet it
MODES = {"emulate": "emulated", "simulate": "flow model", "theory": "closed form"}


def compute_of(rows: list):
    """The device's seconds per iteration the rows ran with (None when they differ)."""
    values = {r.get("compute_median_s") for r in rows if r.get("mode") == "theory"}
    return values.pop() if len(values) == 1 else None


def label_of(row: dict) -> str:
    """The codec's label in the config (the row label before ' @ RATE')."""
    return row["label"].split(" @ ")[0]


def table(rows: list) -> dict:
    """{codec label: {mode: {rate: row}}}."""
    out = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        out[label_of(r)][r["mode"]][r["bw_mbps"]] = r
    return out


def speedups(by_label: dict, mode: str) -> dict:
    """{codec label: {rate: fp32's iteration time / the codec's}} for one mode."""
    base = by_label[BASELINE][mode]
    out = {}
    for label, modes in by_label.items():
        out[label] = {rate: base[rate]["iteration_median_s"] / r["iteration_median_s"]
                      for rate, r in modes.get(mode, {}).items()
                      if rate in base and r.get("iteration_median_s") and base[rate].get("iteration_median_s")}
    return out


def stops_paying(points: dict):
    """The rate (Mbit/s) above which the speed-up falls below PAYS, interpolated in log rate and log speed-up; None when
    it pays at every rate, 0 when at none."""
    rates = sorted(points)
    if not rates or points[rates[0]] < PAYS:
        return 0 if rates else None
    for low, high in zip(rates, rates[1:]):
        if points[high] < PAYS:
            a, b = math.log(points[low]), math.log(points[high])
            share = (a - math.log(PAYS)) / (a - b) if a != b else 0.0
            return math.exp(math.log(low) + share * (math.log(high) - math.log(low)))
    return None


def slowest_device(by_label: dict, label: str, rate: float, bound: float):
    """From the closed form at this rate: the device seconds per iteration from which the codec's speed-up over fp32
    is at most bound ((c + G_fp32) / (c + G_codec) <= bound), None where the rows are missing."""
    try:
        base, mine = by_label[BASELINE]["theory"][rate], by_label[label]["theory"][rate]
    except KeyError:
        return None
    return max(0.0, (base["gst_median_s"] - bound * mine["gst_median_s"]) / (bound - 1))


def iterations_to(curve: list, target: float):
    """The first evaluated iteration whose held-out accuracy reaches target (None: never)."""
    return next((it for it, acc in curve if acc >= target), None)


def accuracy_curves(folder: str) -> dict:
    """{label: [(iteration, accuracy)]} of a convergence comparison, with each label's codec options."""
    curves = defaultdict(list)
    with open(os.path.join(folder, "accuracy.csv")) as f:
        for r in csv.DictReader(f):
            curves[r["label"]].append((int(r["iteration"]), float(r["accuracy"])))
    return curves


def plot(by_label: dict, ups: dict, tta: dict, path: str) -> None:
    """Iteration time and speed-up against rate (and time to accuracy where known): PNG and SVG."""
    import matplotlib
    matplotlib.use("Agg")
    matplotlib.rcParams["svg.fonttype"] = "none"
    import matplotlib.pyplot as plt
    panels = 3 if tta else 2
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.2))
    styles = {"theory": dict(ls="-", marker=None), "simulate": dict(ls=":", marker=None),
              "emulate": dict(ls="none", marker="o")}
    colors = {}
    for label, modes in by_label.items():
        for mode, style in styles.items():
            rows = modes.get(mode, {})
            rates = sorted(rows)
            if not rates:
                continue
            kw = dict(color=colors.get(label), label=label if label not in colors else None, **style)
            line, = axes[0].plot(rates, [rows[r]["iteration_median_s"] for r in rates], **kw)
            colors.setdefault(label, line.get_color())
            kw["color"] = colors[label]
            points = ups[mode].get(label, {})
            axes[1].plot(sorted(points), [points[r] for r in sorted(points)], **{**kw, "label": None})
    for label, points in tta.items():
        axes[2].plot(sorted(points), [points[r] for r in sorted(points)], color=colors.get(label), label=label)
    axes[0].set_ylabel("iteration time (s)")
    axes[1].set_ylabel("speed-up over fp32 (x)")
    axes[1].axhline(1.0, color="grey", lw=0.8)
    if tta:
        axes[2].set_ylabel("to fp32's digits accuracy - 2 points (s)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("link rate (Mbit/s)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, title="line: closed form, dotted: flow model, o: emulated", title_fontsize=7)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{path}.{ext}", dpi=120)
    plt.close(fig)


def dilation_of(row: dict):
    """The time dilation an emulated row ran at (its summary's configuration), None where it is not there."""
    path = os.path.join(row.get("out") or "", "summary.json")
    if not os.path.exists(path):  # the folder moved: its row folder beside its comparison.json
        path = os.path.join(row.get("folder") or "", os.path.basename(row.get("out") or ""), "summary.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return (json.load(f).get("config") or {}).get("dilation")


def measured_by(folder: str) -> dict:
    """The command, date and commit of the comparison that wrote a folder ({} where it says none)."""
    path = os.path.join(folder, "provenance.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        data = json.load(f)
    return {k: data.get(k) for k in ("command", "date", "commit")}


def rows_of(folder: str, again: Sequence[str] = ()) -> list:
    """The comparison's rows, each row of a later folder (rows run again, e.g. at another dilation) in place of the
    row of the same label; every row says which run measured it."""
    by_label = {}
    for where in (folder, *again):
        with open(os.path.join(where, "comparison.json")) as f:
            for r in json.load(f):
                by_label[r["label"]] = dict(r, measured=measured_by(where), folder=where)
    return list(by_label.values())


def judge(folder: str, convergence: str, again: Sequence[str] = (), config: str = CONFIG) -> int:
    """The report of a finished comparison folder (and of folders with some of its rows run again)."""
    rows = rows_of(folder, again)
    by_label = table(rows)
    ups = {mode: speedups(by_label, mode) for mode in MODES}
    codec_of = {label_of(r): r.get("codec") or "none" for r in rows}
    tta, curves = {}, accuracy_curves(convergence) if convergence and os.path.isdir(convergence) else {}
    if curves:
        with open(os.path.join(convergence, "comparison.json")) as f:
            trained = {r["label"]: r for r in json.load(f)}
        target = trained[BASELINE]["accuracy"] - 0.02
        for label in by_label:
            if label not in curves:  # the same label: the same codec and options in both configs
                continue
            needed = iterations_to(curves[label], target)
            if needed is not None:
                tta[label] = {rate: needed * r["iteration_median_s"]
                              for rate, r in by_label[label]["theory"].items()}
    judged = config_targets(config, rows)
    cases = []
    for label, modes in by_label.items():
        for rate, r in sorted(modes.get("emulate", {}).items()):
            theory = modes["theory"].get(rate, {}).get("iteration_median_s")
            simulated = modes["simulate"].get(rate, {}).get("iteration_median_s")
            over = r["iteration_median_s"] / theory if theory and r.get("iteration_median_s") else None
            case = {"codec": label, "codec_name": codec_of[label], "rate_mbps": rate, "dilation": dilation_of(r),
                    "iteration_s": r.get("iteration_median_s"), "theory_s": theory, "simulated_s": simulated,
                    "over_theory": over, "over_flow_model": r["iteration_median_s"] / simulated if simulated else None,
                    "speedup": ups["emulate"].get(label, {}).get(rate),
                    "speedup_theory": ups["theory"].get(label, {}).get(rate),
                    "speedup_flow_model": ups["simulate"].get(label, {}).get(rate), "measured": r.get("measured"),
                    "correct": r.get("correct"), "fidelity": r.get("fidelity"),
                    "fidelity_cause": r.get("fidelity_cause"), "error": r.get("error")}
            misses = [t["what"] for t in judged if t["row"] == r["label"] and t["met"] is not True]
            case["misses"], case["ok"] = misses, not misses
            cases.append(case)
    crossover = {label: stops_paying(points) for label, points in ups["theory"].items() if label != BASELINE}
    device = {f"{codec} at {rate:g} Mbit/s": slowest_device(by_label, label, rate, bound)
              for label, codec in codec_of.items() if codec in DEVICE_BOUND for rate, bound in [DEVICE_BOUND[codec]]}
    plot(by_label, ups, tta, os.path.join(folder, "rates"))
    measured = measured_by(folder)
    summary = {"config": config, "pays_while_speedup_at_least": PAYS,
               "comparison_provenance": measured, "rows_run_again": [measured_by(f) for f in again],
               "compute_s": compute_of(rows),
               "judged": judged,
               "stops_paying_above_mbps": crossover, "device_s_for_bound": device,
               "speedup": {MODES[m]: {label: {str(k): round(v, 3) for k, v in sorted(p.items())}
                                      for label, p in ups[m].items()} for m in MODES},
               "time_to_accuracy_s": {label: {str(k): round(v, 2) for k, v in sorted(p.items())}
                                      for label, p in tta.items()},
               "plot": os.path.join(folder, "rates.png")}
    for label, rate in crossover.items():
        where = "at every rate swept" if rate is None else ("at no rate swept" if rate == 0 else
                                                            f"up to {rate:.0f} Mbit/s")
        print(f"{label}: pays (>= {PAYS:g}x) {where}", file=sys.stderr)
    return write_report(os.path.join(folder, "rates.json"), summary, cases)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--config", default=CONFIG, help=f"the sweep to run (default {CONFIG}; "
                        "configs/codecs-rates-slow-device.yaml: the same on a device three times slower)")
    parser.add_argument("--judge-only", action="store_true", help="judge the folder as it is")
    parser.add_argument("--again", action="append", default=[], metavar="FOLDER",
                        help="a comparison of some of the rows run again (same labels): its rows replace the folder's")
    parser.add_argument("--rerun", metavar="LABEL;LABEL", help="run these rows of the config again (as it now has "
                        "them: another dilation) into FOLDER-again, then judge with them in place")
    parser.add_argument("--convergence", default="results/bench/codecs-convergence",
                        help="a finished configs/bench/codecs-convergence.yaml comparison, for time to accuracy")
    args = parser.parse_args()
    if args.rerun:
        if rerun(args.folder, args.rerun.split(";"), args.config) is None:
            return 1
        return judge(args.folder, args.convergence, reruns(args.folder) + args.again, args.config)
    if not args.judge_only:
        result = dmlbed("compare", args.config, "--out", args.folder, "--force", "--wait", timeout=6 * 3600)
        if result.get("error"):
            print(result["error"], file=sys.stderr)
            return 1
    return judge(args.folder, args.convergence, ([] if not args.judge_only else reruns(args.folder)) + args.again,
                 args.config)


def rerun(folder: str, labels: Sequence[str], config_path: str = CONFIG):
    """Run these rows of the config again (as the config now has them) into FOLDER-again; that folder, or None."""
    import yaml
    with open(config_path) as f:
        config = yaml.safe_load(f)
    chosen = [r for r in config["runs"] if r["label"] in labels]
    unknown = set(labels) - {r["label"] for r in chosen}
    if unknown:
        print(f"--rerun: no row labelled {', '.join(sorted(unknown))} in {config_path}", file=sys.stderr)
        return None
    again = os.path.join(folder.rstrip("/") + "-again", f"rows-{len(reruns(folder)) + 1}")
    os.makedirs(again, exist_ok=True)
    path = os.path.join(again, "rows.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(dict(config, runs=chosen), f, sort_keys=False)
    result = dmlbed("compare", os.path.abspath(path), "--out", os.path.join(again, "rows"), "--force", "--wait",
                    timeout=6 * 3600)
    if result.get("error"):
        print(result["error"], file=sys.stderr)
        return None
    return os.path.join(again, "rows")


def reruns(folder: str) -> list:
    """The comparisons --rerun wrote for this folder (FOLDER-again/rows-N/rows), oldest first."""
    again = folder.rstrip("/") + "-again"
    found = [d for d in os.listdir(again) if d.startswith("rows-")] if os.path.isdir(again) else []
    return [os.path.join(again, d, "rows") for d in sorted(found, key=lambda d: int(d.split("-")[1]))
            if os.path.exists(os.path.join(again, d, "rows", "comparison.json"))]


if __name__ == "__main__":
    sys.exit(main())
