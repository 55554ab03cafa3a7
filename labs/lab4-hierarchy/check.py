"""Lab 4 checker: eq. 9/5/7 predictions, their order, and three correct measured runs."""

import os
import sys


from dmlbed.labcheck import Checker, Expected, arguments, check_run, close, grade, load_json
from emulation.core.formulas import blueconnect_time, one_level_time, two_level_time
from emulation.core.topology import parse


def expected_answers(theory: dict, runs: dict, gradient_bytes: int, formulas: dict) -> dict:
    """What each graded answer must be: the formulas at the rates asked, and your own runs' order."""
    topo = parse("tree:3,2,2")
    predicted = sorted(theory, key=theory.get)
    measured = sorted(runs, key=lambda a: runs[a]["gst_median_s"])
    at = {algo: formula(topo, gradient_bytes, [100.0, 50.0, 5.0]) for algo, formula in formulas.items()}
    return {"q1.blueconnect_s": Expected(theory["blueconnect"], 0.01),
            "q3.order_kept": Expected("yes" if predicted == measured else "no"),
            "q4.blueconnect_s": Expected(at["blueconnect"], 0.02), "q4.ring_s": Expected(at["ring"], 0.02),
            "q4.twolevel_s": Expected(at["twolevel"], 0.02)}


def main(folder: str, hand_in: bool = False, teacher: bool = False) -> int:
    c = Checker("lab4")
    topo = parse("tree:3,2,2")
    formulas = {"blueconnect": blueconnect_time, "ring": one_level_time, "twolevel": two_level_time}
    theory = {}
    for algo, formula in formulas.items():
        t = load_json(os.path.join(folder, f"theory-{algo}.json"))
        c.expect(t["topology"] == "tree:3,2,2", f"theory-{algo}: topology")
        c.expect(close(t["gst_theory_s"], formula(topo, t["gradient_bytes"], t["bw_mbps"])), f"theory-{algo}: formula")
        theory[algo] = t["gst_theory_s"]
    c.expect(theory["blueconnect"] < theory["ring"] < theory["twolevel"], "predicted order for 100,20,40")
    runs = {}
    for algo in formulas:
        s = runs[algo] = check_run(c, os.path.join(folder, algo))
        c.expect(s["algo"] == algo and s["workers"] == 12, f"{algo}: 12 learners")
        c.expect(close(s["gst_theory_s"], theory[algo]), f"{algo}: run used the predicted theory")
    grade(c, folder, expected_answers(theory, runs, runs["ring"]["gradient_bytes"], formulas), hand_in, teacher,
          "lab4-hierarchy")
    return c.close()


if __name__ == "__main__":
    args = arguments("results/lab4")
    sys.exit(main(args.folder, args.hand_in, args.teacher))
