"""Lab 4 checker: eq. 9/5/7 predictions, their order, and three correct measured runs."""

import os
import sys


from dmlbed.labcheck import Checker, check_run, close, load_json
from emulation.core.formulas import blueconnect_time, one_level_time, two_level_time
from emulation.core.topology import parse


def main(folder: str) -> int:
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
    for algo in formulas:
        s = check_run(c, os.path.join(folder, algo))
        c.expect(s["algo"] == algo and s["workers"] == 12, f"{algo}: 12 learners")
        c.expect(close(s["gst_theory_s"], theory[algo]), f"{algo}: run used the predicted theory")
    return c.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "results/lab4"))
