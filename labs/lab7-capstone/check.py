"""Lab 7 checker: a paper's figure reproduced with `dmlbed reproduce` (or `compare` on a config with a paper block):
the comparison's numbers recompute, the report is there, and the write-up has its sections, its length and
numbers that are in the student's own results."""

import csv
import os
import re
import sys

from dmlbed.labcheck import Checker, Expected, arguments, close, grade, load_json

SECTIONS = ("## The claim", "## How we reproduced it", "## What we found", "## Where we differ and why",
            "## What could mislead")
MIN_WORDS, MIN_NUMBERS = 300, 2
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?:e-?\d+)?")


def check_comparison(c: Checker, folder: str):
    """comparison.json's ratios recompute; paper.csv's ratios recompute; report.html is there."""
    rows = load_json(os.path.join(folder, "comparison.json"))
    c.expect(len(rows) > 0, f"{folder}: comparison.json has rows")
    for r in rows:
        if r.get("gst_median_s") is not None and r.get("gst_theory_s"):
            c.expect(close(r["gst_ratio"], r["gst_median_s"] / r["gst_theory_s"]), f"{r['label']}: gst_ratio")
    with open(os.path.join(folder, "paper.csv")) as f:
        claims = list(csv.DictReader(f))
    c.expect(len(claims) > 0, f"{folder}: paper.csv has the paper's claims")
    for claim in claims:
        if claim["ours"] and claim["paper"] and claim["ours_over_paper"]:
            c.expect(close(float(claim["ours_over_paper"]), float(claim["ours"]) / float(claim["paper"]), rel=1e-6),
                     f"paper.csv {claim['what']}: ours / paper")
    c.expect(os.path.isfile(os.path.join(folder, "report.html")), f"{folder}: report.html")
    return rows, claims


def result_numbers(rows, claims):
    """Every number the write-up may quote: the rows' times and ratios, the claims' values."""
    out = []
    for r in rows:
        out += [r.get(k) for k in ("gst_median_s", "gst_theory_s", "gst_ratio", "iteration_median_s", "jct_s")]
    for claim in claims:
        out += [float(claim[k]) for k in ("paper", "ours", "ours_over_paper") if claim.get(k)]
    return [float(v) for v in out if isinstance(v, (int, float)) and v]


def quoted(text: str, numbers) -> int:
    """How many numbers in the text are one of the results' numbers (to the digits the text gives)."""
    found = 0
    for token in set(NUMBER.findall(text)):
        value = float(token)
        digits = len(token.split(".")[1]) if "." in token else 0
        if value and any(abs(v - value) <= max(0.5 * 10 ** -digits, 0.005 * abs(v)) for v in numbers):
            found += 1
    return found


def check_writeup(c: Checker, path: str, numbers) -> None:
    """The write-up's sections, length and quoted numbers."""
    if not os.path.isfile(path):
        c.expect(False, f"{path}: missing (copy labs/lab7-capstone/writeup.md there and write it)")
        return
    text = re.sub(r"<!--.*?-->", "", open(path).read(), flags=re.S)
    for section in SECTIONS:
        c.expect(section in text, f"writeup.md: a section '{section}'")
    words = len(re.findall(r"[A-Za-z]+", text))
    c.expect(words >= MIN_WORDS, f"writeup.md: {words} words, at least {MIN_WORDS}")
    count = quoted(text, numbers)
    c.expect(count >= MIN_NUMBERS, f"writeup.md: {count} numbers from your results, at least {MIN_NUMBERS}")


def main(folder: str, hand_in: bool = False, teacher: bool = False) -> int:
    c = Checker("lab7")
    reproduction = os.path.join(folder, "reproduction")
    rows, claims = check_comparison(c, reproduction)
    check_writeup(c, os.path.join(folder, "writeup.md"), result_numbers(rows, claims))
    agree = sum(1 for claim in claims if claim.get("agrees") == "True")
    grade(c, folder, {"q1.claims": Expected(len(claims), 0), "q1.agree": Expected(agree, 0)}, hand_in, teacher,
          "lab7-capstone")
    return c.close()


if __name__ == "__main__":
    args = arguments("results/lab7")
    sys.exit(main(args.folder, args.hand_in, args.teacher))
