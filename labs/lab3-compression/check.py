"""Lab 3 checker: TernGrad's wire bytes and accuracy, Parameter Flow's traffic and broadcast numbers."""

import os
import sys


import math

from dmlbed.labcheck import Checker, Expected, arguments, check_run, close, grade


def expected_answers(fp32: dict, tern: dict, plain: dict, pf: dict) -> dict:
    """What each graded answer must be: TernGrad's widths, and your own runs' numbers."""
    workers = tern["workers"]
    return {"q1.push_ratio": Expected(tern["first_step_wire_ratio"], 0.02),
            "q1.pull_bits": Expected(math.ceil(math.log2(2 * workers + 1)), 0),
            "q2.accuracy_difference": Expected(fp32["accuracy"] - tern["accuracy"], 0.0, absolute=0.005),
            "q3.dropped": Expected(pf["split_median_s"]["dropped"], 0.02),
            "q4.broadcast_ratio": Expected(pf["split_median_s"]["broadcast_s"] / plain["split_median_s"]["broadcast_s"],
                                           0.05)}


def main(folder: str, hand_in: bool = False, teacher: bool = False) -> int:
    c = Checker("lab3")
    fp32 = check_run(c, os.path.join(folder, "ps-fp32"))
    tern = check_run(c, os.path.join(folder, "ps-terngrad"))
    c.expect(fp32["codec"] == "none" and tern["codec"] == "terngrad", "codecs as in the handout")
    c.expect(close(fp32["wire_ratio"], 1.0, rel=1e-3), "fp32 moves fp32 bytes")
    c.expect(tern["first_step_wire_ratio"] <= 1 / 15, "TernGrad push at most 1/15 of fp32")
    c.expect(tern["wire_ratio"] < 0.2, "TernGrad overall under 1/5 of fp32")
    c.expect(close(tern["wire_ratio"], tern["payload_sent_bytes"] / tern["payload_fp32_bytes"]),
             "wire_ratio = sent / fp32 bytes")
    for s in (fp32, tern):
        c.expect(s["accuracy"] is not None and 0 <= s["accuracy"] <= 1, "held-out accuracy reported")
    plain = check_run(c, os.path.join(folder, "pf-plain"))
    pf = check_run(c, os.path.join(folder, "pf-dvf-tree"))
    for phase in ("push", "broadcast"):
        c.expect(close(plain["wire_by_phase"][phase]["ratio"], 1.0, rel=1e-3), f"pf-plain: {phase} is fp32")
        w = pf["wire_by_phase"][phase]
        c.expect(w["ratio"] < 1.0 and close(w["ratio"], w["sent_bytes"] / w["fp32_bytes"]),
                 f"pf-dvf-tree: {phase} reduced, ratio = sent / fp32")
    c.expect(0 < pf["split_median_s"]["dropped"] < 1, "DVF dropped part of the updates")
    c.expect(pf["pflow"]["overlay_method"] in ("milp", "greedy") and plain["pflow"]["overlay_method"] == "direct",
             "tree overlay vs direct broadcast")
    parents = pf["pflow"]["overlay"]
    c.expect(max(sum(1 for p in parents if p == i) for i in range(len(parents))) <= 2, "overlay degree <= T = 2")
    grade(c, folder, expected_answers(fp32, tern, plain, pf), hand_in, teacher, "lab3-compression")
    return c.close()


if __name__ == "__main__":
    args = arguments("results/lab3")
    sys.exit(main(args.folder, args.hand_in, args.teacher))
