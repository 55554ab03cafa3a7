"""Lab 6 checker: the student's plan gives every rank the exact sum (the in-memory reference, many shapes), and the
flow model times it on a star of 8 against the closed form of a binomial tree and against the ring."""

import importlib.util
import json
import math
import os
import sys

import numpy as np

from dmlbed.labcheck import Checker, Expected, arguments, grade
from emulation.core.topology import parse
from emulation.simulation.flows import simulate_plan
from emulation.simulation.routes import Router
from workloads.algorithms import get as get_algorithm
from workloads.plan import PlanError, check_sum, validate

RANKS = (2, 3, 4, 5, 7, 8, 9, 16)
SHAPES = ([1], [7], [1000], [5, 3, 1], [4096, 10])
TIMED_RANKS, RATE_MBPS, GRADIENT_VALUES = 8, 100.0, 1_000_000
SLACK = 1.01  # the flow model against the closed form: exact up to float rounding


def load_plan(folder: str):
    """The student's plan() from FOLDER/my_plan.py."""
    path = os.path.join(folder, "my_plan.py")
    spec = importlib.util.spec_from_file_location("my_plan", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.plan


def check_sums(c: Checker, plan_of) -> dict:
    """Every contributor ends with the exact sum, for every rank count and gradient shape."""
    rng = np.random.default_rng(6)
    out = {}
    for n in RANKS:
        try:
            plan = plan_of(n)
            validate(plan)
            ok = plan.ranks == n and sorted(plan.contributors) == list(range(n))
            c.expect(ok, f"{n} ranks: the plan has {n} ranks, all of them contributors")
            for shape in SHAPES:
                layout = plan.piece_layout(shape)
                inputs = {r: rng.standard_normal(layout.total).astype(np.float32) for r in range(n)}
                check_sum(plan, inputs, layout)
            out[n] = True
        except (AssertionError, PlanError, ValueError, IndexError, TypeError) as exc:
            c.expect(False, f"{n} ranks: {type(exc).__name__}: {exc}")
            out[n] = False
    return out


def timed(plan, topo, rate_Bps: float) -> float:
    """The plan's GST in the flow model, whole messages per step (as the closed forms count)."""
    sizes = plan.piece_sizes([GRADIENT_VALUES])
    return simulate_plan(plan, [4 * s for s in sizes], Router(topo), {0: rate_Bps}).gst_s


def main(folder: str, hand_in: bool = False, teacher: bool = False) -> int:
    c = Checker("lab6")
    try:
        plan_of = load_plan(folder)
    except (OSError, SyntaxError, AttributeError, ImportError) as exc:
        c.expect(False, f"{folder}/my_plan.py: {type(exc).__name__}: {exc} (copy labs/lab6-write-a-plan/my_plan.py "
                        f"there and edit it)")
        return c.close()
    sums = check_sums(c, plan_of)
    topo, rate = parse(f"star:{TIMED_RANKS}"), RATE_MBPS * 1e6 / 8
    tf = 4 * GRADIENT_VALUES / rate
    report = {"sums_exact": sums, "tf_s": tf}
    if sums.get(TIMED_RANKS):
        mine = timed(plan_of(TIMED_RANKS), topo, rate)
        ring = timed(get_algorithm("ring").build_plan(topo, 0), topo, rate)
        tree = 2 * math.ceil(math.log2(TIMED_RANKS))
        report.update(gst_s=mine, gst_over_tf=mine / tf, ring_gst_over_tf=ring / tf, binomial_tree_tf=tree)
        c.expect(mine <= SLACK * tree * tf, f"star:{TIMED_RANKS}: your plan takes {mine / tf:.2f} TF; a binomial "
                                            f"tree takes {tree} TF")
        grade(c, folder, {"q1.tree_tf": Expected(tree, 0), "q2.ring_over_tree": Expected(ring / mine, 0.02),
                          "q3.tree_tf_9_ranks": Expected(2 * math.ceil(math.log2(9)), 0)},
              hand_in, teacher, "lab6-write-a-plan")
    with open(os.path.join(folder, "plan-check.json"), "w") as f:
        json.dump(report, f, indent=1)
    return c.close()


if __name__ == "__main__":
    args = arguments("results/lab6")
    sys.exit(main(args.folder, args.hand_in, args.teacher))
