"""Lab 2 checker: theory files match the formulas; every run is correct and its numbers add up."""

import os
import sys


from dmlbed.labcheck import Checker, Expected, arguments, check_run, close, grade, load_json, rates


def check_theory(c: Checker, folder: str) -> dict:
    """The three theory files against the BML paper's formulas."""
    theory = {a: load_json(os.path.join(folder, f"theory-{a}.json")) for a in ("ps", "ring", "bml")}
    for a, t in theory.items():
        tf = t["gradient_bytes"] * 8 / (min(rates(t)) * 1e6)
        c.expect(close(t["tf_s"], tf), f"theory-{a}.json: TF")
    c.expect(close(theory["ps"]["gst_theory_s"], 2 * 8 / 9 * theory["ps"]["tf_s"]), "theory-ps: 2(N-1)/N TF")
    c.expect(close(theory["ring"]["gst_theory_s"], theory["ps"]["gst_theory_s"]), "theory-ring equals PS")
    c.expect(close(theory["bml"]["gst_theory_s"], theory["ps"]["gst_theory_s"] / 2), "theory-bml: 1/k of PS")
    return theory


def expected_answers(runs: dict) -> dict:
    """What each graded answer must be: BML's step count, and your own runs' numbers."""
    levels = runs["bml"]["bytes_by_level"]
    faster = min(("ps", "ring"), key=lambda a: runs[a]["gst_median_s"])
    return {"q1.piece_times": Expected(16, 0), "q2.gst_ratio_bml": Expected(runs["bml"]["gst_ratio"], 0.02),
            "q3.l1_over_l0": Expected(levels["L1"] / levels["L0"], 0.02), "q4.faster": Expected(faster)}


def main(folder: str, hand_in: bool = False, teacher: bool = False) -> int:
    c = Checker("lab2")
    theory = check_theory(c, folder)
    runs = {a: check_run(c, os.path.join(folder, a)) for a in ("ps", "ring", "bml")}
    for a, s in runs.items():
        c.expect(close(s["gst_theory_s"], theory[a]["gst_theory_s"]), f"{a}: run used the predicted theory")
        c.expect(s["workers"] == 9, f"{a}: nine workers")
    levels = runs["bml"]["bytes_by_level"]
    c.expect(set(levels) == {"L0", "L1"} and close(levels["L0"], levels["L1"], rel=0.1),
             "bml: both BCube levels carry equal traffic")
    grade(c, folder, expected_answers(runs), hand_in, teacher, "lab2-gradient-sync")
    return c.close()


if __name__ == "__main__":
    args = arguments("results/lab2")
    sys.exit(main(args.folder, args.hand_in, args.teacher))
