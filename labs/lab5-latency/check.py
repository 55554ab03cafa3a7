"""Lab 5 checker: the calibration refits from its own points, both theories recompute from it, the runs are correct,
the timeline has every rank's sends, and the delay model recomputes."""

import os
import sys
from collections import Counter


from dmlbed.labcheck import Checker, Expected, arguments, check_run, close, grade, load_json
from emulation.simulation.calibrated import calibrated_gst, delay_fields
from emulation.core.calibration import fit, load as load_calibration
from emulation.core.impairment import parse_impairment
from emulation.core.topology import parse
from workloads.algorithms import get as get_algorithm
from workloads.models import tensor_sizes

SPEC, BW = "bcube:2,2", (100.0, 100.0)


def check_calibration(c: Checker, path: str):
    """Every level's fit follows from its measured points; the rates are a link's payload rate."""
    cal = load_calibration(path, SPEC, BW)
    c.expect(len(cal.loaded) == 2, "calibration: both BCube levels")
    for f in cal.loaded:
        again = fit(f.level, f.points)
        c.expect(close(again.alpha_s, f.alpha_s) and close(again.rate_Bps, f.rate_Bps),
                 f"calibration L{f.level}: alpha and rate refit from its points")
        c.expect(0.80 * BW[f.level] <= f.rate_mbps <= 1.05 * BW[f.level], f"calibration L{f.level}: rate near 100")
        c.expect(f.alpha_s > 0, f"calibration L{f.level}: alpha > 0")
    return cal


def check_theory(c: Checker, path: str, cal, algorithm, topo) -> dict:
    """The paper's formula and the calibrated model, recomputed."""
    t = load_json(path)
    formula = algorithm.gst_theory(topo, t["gradient_bytes"], BW, 0)
    c.expect(close(t["gst_theory_s"], formula.gst_s), f"{path}: paper's formula")
    again = calibrated_gst(algorithm, topo, 0, tensor_sizes(t["model"]), cal)
    c.expect(close(t["gst_theory_calibrated_s"], again), f"{path}: calibrated model")
    return t


def check_trace(c: Checker, run_dir: str, algorithm, topo, iterations: int) -> None:
    """trace.json: complete events per rank, and per rank and iteration one send per plan transfer message."""
    trace = load_json(os.path.join(run_dir, "trace.json"))
    sends = [e for e in trace["traceEvents"] if e.get("ph") == "X" and "->" in e.get("name", "")]
    c.expect({e["pid"] for e in sends} == set(range(len(topo.hosts))), f"{run_dir}: every rank's sends in the trace")
    plan = algorithm.build_plan(topo, 0)
    # one send per (sender, receiver) of every step: the engine carries a step's pieces to a peer as one transfer
    expected = Counter(src for stream in plan.streams for step in stream for src, _ in {(t.src, t.dst) for t in step})
    counted = Counter(e["pid"] for e in sends if e["args"]["iteration"] == iterations - 1)
    c.expect(counted == expected, f"{run_dir}: one send per plan message on every rank (last iteration)")
    c.expect(os.path.getsize(os.path.join(run_dir, "timeline.png")) > 0, f"{run_dir}: timeline.png")


def last_rank(run_dir: str, iteration: int) -> int:
    """The rank whose synchronization of that iteration ended last (trace.json)."""
    trace = load_json(os.path.join(run_dir, "trace.json"))
    ends = {}
    for e in trace["traceEvents"]:
        if e.get("ph") == "X" and e.get("name") == "sync" and e["args"].get("iteration") == iteration:
            ends[e["pid"]] = max(ends.get(e["pid"], 0.0), e["ts"] + e["dur"])
    return max(ends, key=ends.get)


def expected_answers(cal, small_run: dict, large_run: dict, delay: dict, bml, topo, run_dir: str) -> dict:
    """What each graded answer must be: your calibration, your runs, BML's plan on bcube:2,2."""
    plan = bml.build_plan(topo, 0)
    steps = len(plan.streams[0])
    closer = min((("400KB", small_run), ("12MB", large_run)), key=lambda r: abs(r[1]["gst_ratio"] - 1))[0]
    return {"q1.alpha_l0_us": Expected(next(f for f in cal.loaded if f.level == 0).alpha_s * 1e6, 0.05), "q1.steps": Expected(steps, 0),
            "q2.closer_to_formula": Expected(closer),
            "q3.last_rank": Expected(str(last_rank(run_dir, small_run["iterations"] - 1))),
            "q4.delay_ms": Expected((delay["gst_theory_delay_s"] - delay["gst_theory_s"]) * 1e3, 0.05)}


def main(folder: str, hand_in: bool = False, teacher: bool = False) -> int:
    c = Checker("lab5")
    topo, bml = parse(SPEC), get_algorithm("bml")
    cal = check_calibration(c, os.path.join(folder, "calibration", "calibration.json"))
    small = check_theory(c, os.path.join(folder, "theory-400KB.json"), cal, bml, topo)
    large = check_theory(c, os.path.join(folder, "theory-12MB.json"), cal, bml, topo)
    c.expect(small["gst_theory_calibrated_s"] / small["gst_theory_s"] >
             large["gst_theory_calibrated_s"] / large["gst_theory_s"], "alpha weighs more at 400 KB than at 12.5 MB")
    for name, theory in (("bml-400KB", small), ("bml-12MB", large)):
        run_dir = os.path.join(folder, name)
        s = check_run(c, run_dir)
        c.expect(close(s["gst_theory_calibrated_s"], theory["gst_theory_calibrated_s"]),
                 f"{name}: run used the calibrated model")
        c.expect(close(s["gst_ratio_calibrated"], s["gst_median_s"] / s["gst_theory_calibrated_s"]),
                 f"{name}: gst_ratio_calibrated = measured/calibrated")
    s = load_json(os.path.join(folder, "bml-400KB", "summary.json"))
    check_trace(c, os.path.join(folder, "bml-400KB"), bml, topo, s["iterations"])
    d = load_json(os.path.join(folder, "theory-delay.json"))
    again = delay_fields(parse_impairment("1", "0", topo), bml, topo, 0, tensor_sizes(d["model"]), BW)
    c.expect(close(d["gst_theory_delay_s"], again["gst_theory_delay_s"]), "theory-delay: delay model recomputed")
    c.expect(d["gst_theory_delay_s"] > d["gst_theory_s"], "theory-delay: delay adds time")
    runs = {name: load_json(os.path.join(folder, name, "summary.json")) for name in ("bml-400KB", "bml-12MB")}
    grade(c, folder, expected_answers(cal, runs["bml-400KB"], runs["bml-12MB"], d, bml, topo,
                                      os.path.join(folder, "bml-400KB")), hand_in, teacher, "lab5-latency")
    return c.close()


if __name__ == "__main__":
    args = arguments("results/lab5")
    sys.exit(main(args.folder, args.hand_in, args.teacher))
