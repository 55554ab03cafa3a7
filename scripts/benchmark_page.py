"""Write docs/reference/benchmark.md from the results files `make benchmark` wrote (the benchmark configs' folders
results/bench/NAME/ from `dmlbed reproduce --bench`: targets.csv, comparison.json, provenance.json;
results/codecs-rates/rates.json, results/codecs-rates-slow/rates.json), each section headed by the command, date
and commit of the run that measured it. A section whose file is missing keeps what the page held (headed by the run
that measured it), or says so."""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from typing import List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "reference", "benchmark.md")
BENCH = "results/bench"  # `dmlbed reproduce --bench --out results/bench`: a folder per config in configs/bench/
CONFIG_SECTIONS = (("timing", "Timing targets"), ("low-rate", "Low rates"), ("overlap", "Overlap"),
                   ("rank-start", "Rank start-up"), ("scale", "The flow model at scale"),
                   ("shared", "Stragglers, uneven links and background traffic"),
                   ("patterns", "ECMP under Hedera's traffic patterns"), ("training", "Training beyond all-reduce"),
                   ("soak", "Soak"), ("shapes", "Any shape: leaf-spine, rail, torus, Jellyfish"),
                   ("limits", "How large a network comes up faithfully"),
                   ("events", "Networks that change under a job"), ("collectives", "Every collective"),
                   ("codecs", "Gradient codecs on the wire"), ("codecs-convergence", "Every codec's convergence"),
                   ("jobs", "Two jobs sharing a network"),
                   ("verdicts", "The verdict tells the scenario from the emulator"),
                   ("limits-demo", "The demo's own networks"))
SOURCES = {**{name: f"{BENCH}/{name}/targets.csv" for name, _ in CONFIG_SECTIONS},
           "rates": "results/codecs-rates/rates.json", "rates_slow": "results/codecs-rates-slow/rates.json"}


MISSING = "is missing: run `make benchmark`."


def missing(key: str) -> str:
    """The line a section gives when its results file is not here."""
    return f"`{SOURCES[key]}` {MISSING}"


def load(path: str) -> Optional[dict]:
    """A results file, or None."""
    path = os.path.join(ROOT, path)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def origin(report: dict, path: str) -> str:
    """Where a section's figures came from."""
    p = report.get("provenance") or {}
    commit = (p.get("commit") or "unknown")[:12] + (" (modified)" if p.get("dirty") else "")
    return (f"From `{path}`, written by `{p.get('command', '?')}` on {p.get('date', '?')} at commit `{commit}` "
            f"({p.get('cpus', '?')} CPUs, kernel {p.get('kernel', '?')}).")


def number(v, spec=".3f") -> str:
    return "-" if v is None else format(v, spec)


def read_rows(path: str) -> Optional[List[dict]]:
    """A CSV results file's rows, or None."""
    path = os.path.join(ROOT, path)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return list(csv.DictReader(f))


def config_section(name: str, title: str) -> List[str]:
    """A benchmark config's section: where it came from, its targets met, each target, then its runs."""
    lines = [f"## {title}", ""]
    judged = read_rows(SOURCES[name])
    if judged is None:
        return lines + [missing(name), ""]
    folder = os.path.join(BENCH, name)
    origin_of = load(os.path.join(folder, "provenance.json")) or {}
    met = sum(r["verdict"] == "met" for r in judged)
    lines += [origin({"provenance": origin_of}, SOURCES[name]), "",
              f"The targets of `configs/bench/{name}.yaml`, met: **{met}/{len(judged)}**.", "",
              "| target | bound | ours | verdict | how |", "|---|---|---|---|---|"]
    for r in judged:
        group = ", ".join(f"{k}={r[k]}" for k in r if k not in TARGET_FIELDS and r[k])
        verdict = r["verdict"] if r["verdict"] == "met" else f"**{r['verdict']}**"
        lines.append(f"| {cell(r['what'])}{f' ({group})' if group else ''} | {cell(r['target'])} | "
                     f"{cell(shown(r['ours']))} | {verdict} | {cell(r['how'])} |")
    rows = load(os.path.join(folder, "comparison.json")) or []
    return lines + [""] + runs_table(rows) + pattern_lines(rows) + [""]


TARGET_FIELDS = ("what", "target", "ours", "verdict", "met", "how", "why")
RUN_FIGURES = (("GST/theory", "gst_ratio", ".3f"), ("CV", "gst_cv", ".3f"), ("dilation", "dilation", "g"),
               ("seconds", "wall_s", ".1f"), ("peak MiB", "peak_rss_mib", ".0f"),
               ("answered", "answered.method", ""), ("verdict", "fidelity", ""), ("cause", "fidelity_cause", ""),
               ("error", "error", ""))


def runs_table(rows: List[dict]) -> List[str]:
    """Per run, the figures any of the config's runs has."""
    shown_figures = [f for f in RUN_FIGURES if any(r.get(f[1]) not in (None, "") for r in rows)]
    if not rows:
        return []
    lines = ["| run | " + " | ".join(f[0] for f in shown_figures) + " |",
             "|---|" + "---|" * len(shown_figures)]
    for r in rows:
        sweep = f" ({', '.join(f'{k}={r[k]}' for k in ('repeat', 'mode') if r.get(k) is not None)})"
        lines.append(f"| {cell(r['label'])}{sweep if sweep != ' ()' else ''} | " + " | ".join(
            cell(r.get(key) if not spec or r.get(key) is None else format(r[key], spec))
            for _, key, spec in shown_figures) + " |")
    return lines


def cell(v) -> str:
    """A table cell."""
    return "-" if v in (None, "") else str(v).replace("|", "/").replace("\n", " ")


def shown(v) -> str:
    """A number from a CSV cell in three significant figures (text as it is)."""
    try:
        return f"{float(v):.3g}"
    except (TypeError, ValueError):
        return v


def page() -> str:
    """The benchmark page."""
    lines = ["# Benchmark", "", "<!-- written by scripts/benchmark_page.py from `make benchmark`'s results: do not edit -->",
             "", "`make benchmark` measures every target on this machine: the timing and scale targets are "
             "configs with targets (`configs/bench/`), run and judged by `dmlbed reproduce --bench`; a busy "
             "machine may miss them, and the tables say so. What each run is: "
             "[What made timings unfaithful](../explanation/timing-causes.md).", ""]
    for name, title in CONFIG_SECTIONS:
        lines += config_section(name, title)
    lines += rates_section(load(SOURCES["rates"]))
    lines += rates_section(load(SOURCES["rates_slow"]), "rates_slow", "Where compression pays on a slower device")
    return "\n".join(lines).rstrip() + "\n"


def pattern_lines(rows: List[dict]) -> List[str]:
    """A `net --pattern` row's figures per pattern: its share of a non-blocking switch measured and in the flow
    model (medians over the seeds), and the seeds' measured / flow model range."""
    lines = []
    for r in rows:
        names = sorted({k.split(".")[1] for k in r if k.startswith("pattern_summary.")})
        if not names:
            continue
        lines += ["", "| pattern | of a non-blocking switch, measured (median) | flow model (median) | "
                  "measured / flow model (range over the seeds) |", "|---|---|---|---|"]
        for name in names:
            figure = {k.split(".", 2)[2]: v for k, v in r.items() if k.startswith(f"pattern_summary.{name}.")}
            low, high = figure.get("measured_over_flow_model_range") or (None, None)
            lines.append(f"| {name} | {number(figure.get('of_non_blocking_median'), '.2f')} | "
                         f"{number(figure.get('flow_model_of_non_blocking_median'), '.2f')} | "
                         f"{number(low, '.2f')}-{number(high, '.2f')} |")
    return lines


def rates_section(report: Optional[dict], key: str = "rates", title: str = "Where compression pays") -> List[str]:
    """Every codec's speed-up over fp32 per link rate, emulated beside the flow model and the closed form."""
    lines = [f"## {title}", ""]
    if report is None:
        return lines + [missing(key), ""]
    t = report.get("targets", {})
    measured = t.get("comparison_provenance") or {}
    lines += [origin(report, SOURCES[key]) + f" The rows were run by `{measured.get('command', '?')}` on "
              f"{measured.get('date', '?')} at commit `{(measured.get('commit') or 'unknown')[:12]}`.", "",
              f"`{t.get('config')}`: every codec against fp32 on a ResNet-18-sized model (its comment says how), "
              f"each rank a device of {t.get('compute_s', '?')} s per iteration. Speed-up: fp32's iteration time over "
              f"the codec's at the same rate (emulated / flow model / closed form). Its targets (the config's "
              f"`targets:` block) met: {sum(j.get('met') is True for j in t.get('judged', []))}/"
              f"{len(t.get('judged', []))}. All met: **{report.get('ok')}**.", "",
              "| codec | Mbit/s | dilation | iteration (s) | / closed form | / flow model | speed-up (emulated / flow "
              "model / closed form) | correct | verdict | met |", "|" + "---|" * 10]
    for c in report.get("cases", []):
        ups = " / ".join(number(c.get(k), ".2f") for k in ("speedup", "speedup_flow_model", "speedup_theory"))
        lines.append(f"| {c['codec']} | {c['rate_mbps']:g} | {c.get('dilation') or 1:g} | {number(c['iteration_s'])} | "
                     f"{number(c['over_theory'], '.2f')} | {number(c['over_flow_model'], '.2f')} | {ups} | "
                     f"{c['correct']} | {c['fidelity']} | {'yes' if c.get('ok') else '**no**: ' + '; '.join(c['misses'])} |")
    paying = t.get("stops_paying_above_mbps") or {}
    speedups = (t.get("speedup") or {}).get("closed form") or {}
    rates = sorted({float(r) for v in speedups.values() for r in v})
    lines += ["", f"Closed form at every rate swept (speed-up over fp32), and the rate above which a codec gains less "
              f"than {t.get('pays_while_speedup_at_least', 1.1) - 1:.0%}:", "",
              "| codec | " + " | ".join(f"{r:g} Mbit/s" for r in rates) + " | pays up to |",
              "|" + "---|" * (len(rates) + 2)]
    for label, points in speedups.items():
        if label == "fp32":
            continue
        edge = paying.get(label)
        where = "every rate swept" if edge is None else "no rate swept" if edge == 0 else f"{edge:,.0f} Mbit/s"
        lines.append(f"| {label} | " + " | ".join(number(points.get(k), ".2f") for k in
                                                  (format(r, "g") if str(r) not in points else str(r) for r in rates))
                     + f" | {where} |")
    bounds = t.get("device_s_for_bound") or {}
    if bounds:
        lines += ["", "The upper bounds hold, in closed form, for a device of at least: " +
                  "; ".join(f"{k}: {number(v, '.2f')} s per iteration" for k, v in bounds.items()) +
                  f" (this sweep's: {t.get('compute_s', '?')} s)."]
    return lines + ["", f"The plot: `{t.get('plot', 'results/codecs-rates/rates.png')}`.", ""]


def sections(text: str) -> List[tuple]:
    """A page as (heading, text) pairs, split at its '## ' headings (the part before the first: heading '')."""
    out, heading, lines = [], "", []
    for line in text.splitlines(keepends=True):
        if line.startswith("## "):
            out.append((heading, "".join(lines)))
            heading, lines = line.strip(), []
        lines.append(line)
    return out + [(heading, "".join(lines))]


def keep_measured(new: str, old: str) -> str:
    """The new page, each section whose results file is missing here taken from the old page where that held
    figures from a run (its origin line names the run)."""
    before = dict(sections(old))
    return "".join(before[h] if MISSING in body and h in before and "From `results/" in before[h] else body
                   for h, body in sections(new))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.parse_args()
    old = open(PAGE).read() if os.path.exists(PAGE) else ""
    text = keep_measured(page(), old)
    with open(PAGE, "w") as f:
        f.write(text)
    print(PAGE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
