"""Every collective on the emulated network (issue 40): on star:16 at 100 Mbit/s, all-gather, reduce-scatter,
broadcast and all-to-all by dmlbed's plans and by torch.distributed's gloo, and the same ops on fattree:4 beside the
flow model. Per op: #wrong, the best plan's busbw at the largest size against the link rate, its time against the
closed form, and against gloo's; on fattree:4, and for all-to-all(v)'s uneven blocks (whose closed form is a bound),
the best plan against its flow model (rows outside it listed); each with bench's fidelity verdict (reported). JSON
report, exit 1 when a target is missed.

fattree:4 runs at --dilation 4 (100 Mbit/s of emulated time, 25 shaped), the all-to-alls on star:16 at 2.

Training beyond all-reduce, emulated beside the flow model and the closed form: sharded data parallelism (LeNet-5)
and expert-parallel mixture of experts on star:8 and fattree:4 (TRAINING says what each is judged by).

Usage: .venv/bin/python scripts/collectives.py [--out results/collectives] [--reps 3] [--quick] [--cases A,B]
"""

import argparse
import os
import sys

from case_runs import dmlbed, with_earlier, write_report
from workloads.collectives import get as get_collective

BW = 100.0
BUSBW_OF_LINK = 0.9   # the best plan's busbw at the largest size, of the link rate
THEORY_WITHIN = 0.10  # the best plan's time within 10% of its closed form
FLOW_MODEL_WITHIN = 0.10  # fattree:4: the best plan within 10% of the flow model
FATTREE_DILATION = "4"  # fattree:4's 20 switches forward every packet up to 5 times: 2 cores carry 25 Mbit/s shaped
# an all-to-all's packets, 4 in 5 crossing 5 switches, need 8: at 4 the switch thread was saturated in 37% of the
# samples of moe-fattree4-dmodk and its links carried 0.81 of their rate (degraded)
MOE_FATTREE_DILATION = "8"
BENCHES = {  # name: (topology, ops, algorithms, sizes, more options)
    "star16": ("star:16", "allgather,reducescatter,broadcast", "ring,chain,tree,gloo", "1M:64M:x4", ()),
    # all-to-all's largest size is 16 MiB a rank: its plan's buffer holds all N x N blocks (256 MiB on 16 ranks),
    # and a per-op tail of tens of ms (ranks starting up to ~30 ms apart, the last flows' unequal shares) needs
    # the size to amortize it, as nccl-tests' busbw is read at its largest sizes; at --dilation 2, since each of its
    # 16 ranks runs 30 connection threads, which kept both cores saturated in over half the samples undilated
    "star16-alltoall": ("star:16", "alltoall", "pairwise,direct,gloo", "1M:16M:x4", ("--dilation", "2")),
    # direct's uneven blocks are an incast into receivers shaped too: default queues overflow (5,603 retransmissions,
    # 1.20 of its flow model), as fattree4-alltoall's collisions do, so host queues of 1000 packets
    "star16-alltoallv": ("star:16", "alltoallv", "pairwise,direct,gloo", "512K:8M:x4",
                         ("--dilation", "2", "--queue", "1000")),
    "fattree4": ("fattree:4", "allgather,reducescatter,broadcast", "ring,chain,tree,gloo", "1M:16M:x4",
                 ("--dilation", FATTREE_DILATION)),
    # host queues of 1000 packets, as moe-fattree4's: ECMP collisions in the network under study otherwise overflow
    # the default queues and the losses' retransmissions, which the flow model has none of, set the time
    "fattree4-alltoall": ("fattree:4", "alltoall", "pairwise,direct,gloo", "512K:8M:x4",
                          ("--dilation", FATTREE_DILATION, "--queue", "1000")),
}
TRAINING = {  # name: (algorithm, model, topology, more options, judged against): training beyond all-reduce,
    # emulated beside simulate and theory. "theory": the closed form; "calibrated": the alpha-beta model of a
    # `dmlbed calibrate` run of the same network (for small messages, which pay a per-message latency the closed form
    # leaves out); "ports": the flow model with each
    # connection on the ECMP path its TCP ports hashed to in the run (collisions the closed form for a non-blocking
    # network cannot show); None: reported, not judged.
    "sharded-star8": ("zero", "lenet5", "star:8", (), "theory"),
    "sharded-fattree4": ("zero", "lenet5", "fattree:4", ("--dilation", FATTREE_DILATION), "theory"),
    "moe-star8": ("moe", "moe:8x1024", "star:8", (), "theory"),
    "moe-fattree4": ("moe", "moe:16x512", "fattree:4", ("--dilation", MOE_FATTREE_DILATION, "--queue", "1000"),
                     "ports"),
    "moe-fattree4-shallow": ("moe", "moe:16x512", "fattree:4", ("--dilation", FATTREE_DILATION), None),
    # routed D-mod-k (JOB_OPTIONS): no link of an all-to-all carries more than a host link's load, so the closed form
    # of a non-blocking network is its judge
    "moe-fattree4-dmodk": ("moe", "moe:16x512", "fattree:4", ("--dilation", MOE_FATTREE_DILATION, "--queue", "1000"),
                           "theory"),
}
# options given to run and simulate alike: moe-star8's experts hold 128 slots per rank, a
# capacity factor of 2 (Switch Transformer trains at 1 to 2) that drops fewer tokens and makes each all-to-all 4 MiB,
# long enough that the ranks' few ms of skew entering it do not idle a tenth of its links' time (moe-fattree4-dmodk's
# likewise, and its routing)
JOB_OPTIONS = {"moe-star8": ("--moe-capacity", "128"),
               "moe-fattree4-dmodk": ("--moe-capacity", "128", "--routing", "dmodk")}
TRAINING_ITERS = "8"
QUICK = {"star4": ("star:4", "allgather,reducescatter,broadcast,alltoall", "ring,chain,pairwise,gloo", "1M,4M", ())}


def op_cases(name: str, report: dict, options=()) -> list:
    """Per op of one bench: the best plan at the largest size against the link rate, its closed form and gloo."""
    rows, cases = report["rows"], []
    for op in report["ops"]:
        mine = [r for r in rows if r["op"] == op]
        top = max(r["size_bytes"] for r in mine)
        largest = [r for r in mine if r["size_bytes"] == top]
        plans = [r for r in largest if r["algo"] != "gloo"]
        best = min(plans, key=lambda r: r["time_s"])
        gloo = next((r for r in largest if r["algo"] == "gloo"), None)
        case = {"case": f"{name} {op}", "topology": report["topology"], "size_bytes": top, "best_plan": best["algo"],
                "busbw_mbps": best["busbw_mbps"], "busbw_of_link": best["busbw_mbps"] / BW,
                "plan_over_theory": best["ratio"], "plan_over_flow_model": best.get("ratio_sim"),
                "gloo_busbw_mbps": gloo and gloo["busbw_mbps"],
                "plan_over_gloo": best["time_s"] / gloo["time_s"] if gloo else None,
                "options": list(options), "dilation": report.get("dilation"), "wrong": sum(r["wrong"] for r in mine),
                "fidelity": (report.get("fidelity") or {}).get(f"{op}-{best['algo']}", {}).get("verdict"),
                "shape_ingress": bool(report.get("ingress_bound")),  # bench shaped switch->host for some run
                "faster_than_links": [f"{r['algo']} {r['size_bytes']}" for r in mine if r["faster_than_links"]],
                "rows": [{k: r.get(k) for k in ("algo", "size_bytes", "time_s", "busbw_mbps", "ratio", "ratio_sim",
                                                "wrong")} for r in mine]}
        # plans whose flows meet on hashed ECMP paths (a tree's rounds across pods) differ from the flow model's
        # spread paths: listed, not judged
        case["outside_flow_model"] = [f"{r['algo']} {r['size_bytes']} {r['ratio_sim']:.2f}" for r in mine
                                      if r.get("ratio_sim") and abs(r["ratio_sim"] - 1) > FLOW_MODEL_WITHIN]
        # an op of uneven blocks has a bound, not a time, in closed form (pairwise waits for each step's largest
        # block, direct for incast's fair shares): like every op on a Fat-Tree it is judged by the flow model
        by_bound = report["topology"].startswith("star") and get_collective(op).split is None
        no_slower = case["plan_over_gloo"] is None or case["plan_over_gloo"] <= 1.0
        case["ok"] = case["wrong"] == 0 and not case["faster_than_links"] and \
            (not by_bound or (case["busbw_of_link"] >= BUSBW_OF_LINK and abs(best["ratio"] - 1) <= THEORY_WITHIN
                              and no_slower)) and \
            (by_bound or (best["ratio_sim"] is not None and abs(best["ratio_sim"] - 1) <= FLOW_MODEL_WITHIN))
        cases.append(case)
    return cases


def training_case(name: str, algo: str, model: str, topo: str, more, judged, out: str) -> dict:
    """A training run emulated, and the same in the flow model (with the run's ECMP ports where judged so) and in
    closed form (and in the calibrated alpha-beta model where judged so): correct, and its GST within 10% of the
    flow model and of the theory it is judged by; where judged, faithful too unless the judge is the port replay,
    whose links are the scenario's collisions."""
    common = ("--topo", topo, "--algo", algo, "--bw", f"{BW:g}", "--model", model, *JOB_OPTIONS.get(name, ()),
              "--force")
    calibration = []
    if judged == "calibrated":
        folder = os.path.join(out, name + "-calibration")
        cal = dmlbed("calibrate", "--topo", topo, "--bw", f"{BW:g}", "--wait", "--force", "--out", folder,
                     timeout=1800)
        if cal.get("error"):
            return {"case": name, "ok": False, "error": cal["error"]}
        calibration = ["--calibration", os.path.join(folder, "calibration.json")]
    run = dmlbed("run", *common, "--iters", TRAINING_ITERS, "--wait", "--out", os.path.join(out, name), *more,
                 *calibration, timeout=3600)
    if run.get("error"):
        return {"case": name, "ok": False, "error": run["error"]}
    ports = ["--ecmp-ports", os.path.join(out, name)] if judged == "ports" else []
    sim = dmlbed("simulate", *common, "--out", os.path.join(out, name + "-simulated"), *ports, *calibration,
                 timeout=600)
    if sim.get("error"):
        return {"case": name, "ok": False, "error": sim["error"]}
    split = run.get("split_median_s") or {}
    case = {"case": name, "algo": algo, "model": model, "topology": topo,
            "options": list(JOB_OPTIONS.get(name, ())) + list(more),
            "judged": judged,
            "dilation": (run.get("config") or {}).get("dilation"), "gst_s": run["gst_median_s"],
            "gst_simulated_s": sim["gst_median_s"], "gst_theory_s": run["gst_theory_s"],
            "gst_calibrated_s": run.get("gst_theory_calibrated_s"),
            "over_flow_model": run["gst_median_s"] / sim["gst_median_s"], "over_theory": run["gst_ratio"],
            "over_calibrated": run.get("gst_ratio_calibrated"),
            "correct": run["correct"], "replicas_identical": run["replicas_identical"],
            "fidelity": (run.get("fidelity") or {}).get("verdict"),
            "fidelity_cause": (run.get("fidelity") or {}).get("cause"),
            "switch_port_drops": sum(((run.get("fidelity") or {}).get("switch_port_drops") or {}).values()),
            "shard_of_model": split.get("shard_of_model"),
            "exchanges_s": {k[5:-2]: v for k, v in split.items() if k.startswith("sync:")} or None,
            "dropped_tokens": split.get("dropped_tokens")}
    theory = {"theory": case["over_theory"], "calibrated": case["over_calibrated"], "ports": None}.get(judged)
    case["ok"] = bool(case["correct"]) and (judged is None or (
        abs(case["over_flow_model"] - 1) <= FLOW_MODEL_WITHIN
        and (theory is None or abs(theory - 1) <= THEORY_WITHIN)
        and (judged == "ports" or case["fidelity"] == "faithful")))
    return case


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="results/collectives")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="star:4, two sizes (a short form)")
    ap.add_argument("--cases", default="", help=f"comma-separated cases to run again, the others kept as the report "
                    f"has them (default all: {', '.join(list(BENCHES) + list(TRAINING))})")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cases = []
    for name, (topo, ops, algos, sizes, more) in (QUICK if args.quick else BENCHES).items():
        if args.cases and name not in args.cases.split(","):
            continue
        report = dmlbed("bench", "--topo", topo, "--bw", f"{BW:g}", "--op", ops, "--algo", algos, "--sizes", sizes,
                        "--reps", str(args.reps), "--warmup", "1", "--out", os.path.join(args.out, name), "--force",
                        "--wait", *more, timeout=5400)
        if report.get("error") or not report.get("rows"):
            cases.append({"case": name, "ok": False, "error": report.get("error")})
            continue
        cases.extend(op_cases(name, report, more))
    for name, (algo, model, topo, more, judged) in ({} if args.quick else TRAINING).items():
        if args.cases and name not in args.cases.split(","):
            continue
        cases.append(training_case(name, algo, model, topo, more, judged, args.out))
    path = os.path.join(args.out, "collectives.json")
    cases = with_earlier(path, cases, lambda c: c["case"].split(" ")[0], bool(args.cases))
    targets = {"busbw_of_link": BUSBW_OF_LINK, "theory_within": THEORY_WITHIN, "plan_over_gloo_at_most": 1.0,
               "flow_model_within": FLOW_MODEL_WITHIN, "bw_mbps": BW, "reps": args.reps}
    return write_report(path, targets, cases)


if __name__ == "__main__":
    sys.exit(main())
