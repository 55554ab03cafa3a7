"""Shared checks for the lab checkers: recompute everything a results file claims from what it measured.

A check passes when a result is internally consistent and matches the topology's and the papers'
formulas; editing a number by hand (a tampered file) breaks one of these equalities.
"""

from __future__ import annotations

import os
import statistics
from typing import List


from workloads.algorithms import get as get_algorithm
from emulation.core.topology import parse, parse_bandwidth
from emulation.results.files import read_json, read_table
from workloads.runfolder import RunFolder

REL = 1e-6


class Checker:
    """Collects failures; exit code 0 only when there are none."""

    def __init__(self, name: str):
        self.name, self.failures, self.passed = name, [], 0

    def expect(self, ok: bool, what: str) -> None:
        """Record one check."""
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)

    def close(self) -> int:
        """Print the verdict; return the exit code."""
        for f in self.failures:
            print(f"FAIL {f}")
        print(f"{self.name}: {self.passed} passed, {len(self.failures)} failed")
        return 1 if self.failures else 0


def load_json(path: str):
    """A JSON results file (FileNotFoundError when it is missing or cut short)."""
    data = read_json(path)
    if data is None:
        raise FileNotFoundError(f"{path}: missing or not valid JSON")
    return data


def rates(summary: dict) -> List[float]:
    """A summary's link rate per level, Mbit/s (bw_mbps is one number for a one-level network, else a list)."""
    bw = summary["bw_mbps"]
    return list(bw) if isinstance(bw, list) else [bw]


def close(a, b, rel=REL) -> bool:
    """a == b up to a relative tolerance (and both present)."""
    return a is not None and b is not None and abs(a - b) <= rel * max(1.0, abs(a), abs(b))


def check_topology(c: Checker, path: str) -> dict:
    """`dmlbed topo SPEC --json` output against the topology's formulas."""
    data = load_json(path)
    topo = parse(data["spec"])
    counts = data["counts"]
    c.expect(counts["hosts"] == len(topo.hosts) == len(data["hosts"]), f"{path}: host count")
    c.expect(counts["switches"] == len(topo.switches) == len(data["switches"]), f"{path}: switch count")
    c.expect(counts["links"] == len(topo.links) == len(data["links"]), f"{path}: link count")
    if topo.kind == "bcube":
        n, k = topo.params
        c.expect(counts["hosts"] == n ** k and counts["switches"] == k * n ** (k - 1), f"{path}: BCube formulas")
    if topo.kind == "fattree":
        k = topo.params[0]
        c.expect(counts["hosts"] == k ** 3 // 4 and counts["switches"] == 5 * k * k // 4,
                 f"{path}: Fat-Tree formulas")
    c.expect(close(counts["fat_tree_switches_same_hosts"], 5 * counts["hosts"] / counts["switch_ports"]),
             f"{path}: 5N/n comparison")
    return data


def check_net(c: Checker, path: str) -> dict:
    """`dmlbed net SPEC --check --json` output: reachability, PacketIns, fidelity recomputed from the flows."""
    r = load_json(path)
    topo = parse(r["topology"])
    c.expect(r["hosts"] == len(topo.hosts) and r["switches"] == len(topo.switches), f"{path}: counts")
    c.expect(r["pairs_reachable"] == r["pairs_tested"] > 0, f"{path}: every tested pair reachable")
    c.expect(len(r.get("unreachable", [])) == r["pairs_tested"] - r["pairs_reachable"], f"{path}: unreachable list")
    c.expect(r["packet_in"] == 0, f"{path}: no data-plane PacketIn")
    ratios = []
    for f in r["flows"]:
        ok = close(f["fidelity"], round(f["wire_mbps"] / f["shaped_mbps"], 4), rel=1e-3)
        c.expect(ok, f"{path}: flow {f['src']}->{f['dst']} fidelity = wire rate/shaped")
        c.expect(f["measured_mbps"] <= f["wire_mbps"] <= 1.06 * f["measured_mbps"],
                 f"{path}: flow {f['src']}->{f['dst']} wire rate = goodput plus headers")
        c.expect(0 < f["measured_mbps"] <= 1.1 * f["shaped_mbps"], f"{path}: flow {f['src']}->{f['dst']} within shaping")
        ratios.append(f["wire_mbps"] / f["shaped_mbps"])
    if ratios:
        c.expect(close(r["fidelity_min"], min(ratios), rel=1e-3), f"{path}: fidelity_min")
        c.expect(close(r["fidelity_median"], statistics.median(ratios), rel=1e-3), f"{path}: fidelity_median")
    return r


def iterations(run_dir: str) -> List[dict]:
    """Rows of a run's iterations.csv."""
    return read_table(RunFolder(run_dir).file(RunFolder.ITERATIONS))


def check_run(c: Checker, run_dir: str) -> dict:
    """A `dmlbed run` folder: correctness, medians recomputed from iterations.csv, theory recomputed."""
    s = load_json(RunFolder(run_dir).file(RunFolder.SUMMARY))
    rows = iterations(run_dir)
    c.expect(s["correct"] is True and s["error"] is None, f"{run_dir}: run correct")
    c.expect(s["iterations"] == len(rows) == s["iterations_requested"], f"{run_dir}: iterations complete")
    gst = [float(r["gst_s"]) for r in rows]
    kept = gst[2:] if len(gst) > 2 else gst
    c.expect(close(s["gst_median_s"], statistics.median(kept), rel=1e-4), f"{run_dir}: gst_median_s from iterations.csv")
    topo = parse(s["topology"])
    bw = parse_bandwidth(s["config"]["bw"], topo)
    theory = get_algorithm(s["algo"]).gst_theory(topo, s["gradient_bytes"], bw, s.get("servers", 0),
                                                 s.get("codec", "none"), s["config"])
    c.expect(close(s["gst_theory_s"], theory.gst_s), f"{run_dir}: gst_theory_s is the paper's formula")
    c.expect(close(s["gst_ratio"], s["gst_median_s"] / s["gst_theory_s"]), f"{run_dir}: gst_ratio = measured/theory")
    c.expect(s["gradient_bytes"] == 4 * s["parameters"], f"{run_dir}: fp32 gradient size")
    return s


# ---- a student's hand-in: answers graded from the student's own results ----

ANSWERS = "answers.yaml"
FIGURE = "figure.png"
MIN_WHY_WORDS = 8
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class Expected:
    """What one graded answer must be: a number within a relative tolerance, or one of some words."""

    def __init__(self, value, rel: float = 0.05, absolute: float = 0.0):
        self.value, self.rel, self.absolute = value, rel, absolute

    def accepts(self, given) -> bool:
        """Whether the student's answer is this one."""
        if isinstance(self.value, str):
            return str(given).strip().lower() == self.value.lower()
        if isinstance(given, bool):
            return False
        try:
            number = float(given)
        except (TypeError, ValueError):
            return False
        return abs(number - self.value) <= max(self.rel * abs(self.value), self.absolute)

    def __str__(self) -> str:
        if isinstance(self.value, str):
            return repr(self.value)
        return f"{self.value:.6g} (within {self.rel:.0%}" + (f" or {self.absolute:g}" if self.absolute else "") + ")"


def load_answers(folder: str):
    """The student's answers.yaml in the results folder (None when there is none)."""
    import yaml
    path = os.path.join(folder, ANSWERS)
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return yaml.safe_load(f) or {}


def grade(c: Checker, folder: str, expected: dict, hand_in: bool, teacher: bool = False, lab: str = "") -> None:
    """Grade answers.yaml: every graded value ('q3.faster') against what the student's own results give, every
    'why' answered in words (the teacher reads them with the key); with hand_in, answers.yaml and figure.png must
    be there. teacher: print the expected values too."""
    if teacher:
        for key, want in expected.items():
            print(f"key {key}: {want}")
    answers = load_answers(folder)
    if answers is None:
        c.expect(not hand_in, f"{ANSWERS}: missing (copy labs/{lab}/{ANSWERS} into {folder} and fill it in)")
        if not hand_in:
            print(f"note: no {ANSWERS} in {folder} yet: results checked, answers not graded")
        return
    for key, want in expected.items():
        question, field = key.split(".")
        given = (answers.get(question) or {}).get(field)
        ok = given is not None and want.accepts(given)
        c.expect(ok, f"{key}: {'no answer' if given is None else repr(given) + ' is not what your results give'}")
    for question, fields in answers.items():
        if isinstance(fields, dict) and "why" in fields:
            words = len(str(fields.get("why") or "").split())
            c.expect(words >= MIN_WHY_WORDS, f"{question}.why: answer in at least {MIN_WHY_WORDS} words")
    if hand_in:
        path = os.path.join(folder, FIGURE)
        ok = os.path.isfile(path) and open(path, "rb").read(8) == PNG_MAGIC
        c.expect(ok, f"{FIGURE}: your figure, as a PNG, in {folder}")
        caption = str((answers.get("figure") or {}).get("caption") or "")
        c.expect(len(caption.split()) >= MIN_WHY_WORDS, f"figure.caption: say what {FIGURE} shows")


def arguments(default_folder: str):
    """The checkers' command line: RESULTS_FOLDER [--hand-in] [--teacher]."""
    import argparse
    ap = argparse.ArgumentParser(description="Check a lab's results (and grade answers.yaml when it is there).")
    ap.add_argument("folder", nargs="?", default=default_folder)
    ap.add_argument("--hand-in", action="store_true", help="grade a hand-in: answers.yaml and figure.png required")
    ap.add_argument("--teacher", action="store_true", help="also print what each graded answer must be")
    return ap.parse_args()
