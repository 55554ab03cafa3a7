"""`dmlbed compare CONFIG.yaml`: a config's matrix of runs, each on its back end (emulate, simulate or theory), into
comparison.csv/json, plots, the paper's claims beside ours and simulated beside emulated GST."""

from __future__ import annotations

from typing import List

from emulation.backends import matrix
from emulation.commands.base import Command, failed_rows, fmt, matrix_flags, matrix_passed
from emulation.commands.command_rows import COMMAND_ROWS
from emulation.results.claims import print_paper
from emulation.results.targets import print_targets
from emulation.run.options import command_option
from emulation.run.progress import log


class Compare(Command):
    name, help = "compare", "run a matrix of configurations from a YAML file"
    reports = True
    description = ("A config's `runs` (each with a label), crossed with its `sweep` values, over its `defaults`; "
                   "every row is checked before the first one starts (see `dmlbed schema config` for its keys). "
                   "Rows with mode simulate or theory need no root.")
    examples = (
        ("the demo matrix over loopback (no root)",
         "configs/demo.yaml --local"),
        ("BML's Fig. 5 on the emulated network, waiting for the machine if another run has it",
         "configs/bml-fig5.yaml --out results/bml-fig5 --wait"),
    )
    own = (command_option("config", "YAML file: name, defaults, runs, sweep (see configs/)", positional=True),
           *matrix_flags("comparison"))

    def prepare(self, args):
        return matrix.prepare(args.config, args.out, args.local, args.force, args.wait, command_rows=COMMAND_ROWS,
                              scheduler=args.scheduler, resume=args.resume)

    def needs_root(self, job):
        return job.emulated

    def execute(self, job, args):
        return matrix.execute(job, log=log, progress=not args.json)

    def report(self, summary):
        from emulation.results.report import compare_report
        return compare_report(summary)

    def show(self, result):
        print_comparison(result)

    def exit_code(self, result):
        return matrix_passed(result)

    def failure(self, result):
        return failed_rows(result)


def print_comparison(result: dict) -> None:
    """Comparison table, plus each label's JCT and GST against the first label's in every sweep group."""
    rows, keys = result["rows"], result["sweep_keys"]
    print(f"{'label':<22} " + " ".join(f"{k:>6}" for k in keys) +
          f" {'GST':>8} {'theory':>8} {'ratio':>6} {'compute':>8} {'JCT':>8} {'correct':>7}")
    for r in rows:
        print(f"{r['label']:<22} " + " ".join(f"{str(r.get(k)):>6}" for k in keys) +
              f" {fmt(r['gst_median_s']):>8} {fmt(r['gst_theory_s']):>8} {fmt(r['gst_ratio'], '.2f'):>6} "
              f"{fmt(r['compute_median_s']):>8} {fmt(r['jct_s'], '.1f'):>8} {correct_text(r['correct']):>7}")
    labels = list(dict.fromkeys(r["label"] for r in rows))
    if len(labels) > 1:
        base = labels[0]
        print("\nrelative (per sweep value):")
        for r in rows:
            if r["label"] == base:
                continue
            ref = next((b for b in rows if b["label"] == base and all(b.get(k) == r.get(k) for k in keys)), None)
            if ref and ref["jct_s"] and r["jct_s"] and ref["gst_median_s"] and r["gst_median_s"]:
                print(f"  {base} vs {r['label']} " + " ".join(f"{k}={r.get(k)}" for k in keys) +
                      f": GST {ref['gst_median_s']:.3f}/{r['gst_median_s']:.3f} = "
                      f"{ref['gst_median_s'] / r['gst_median_s']:.3f}, JCT reduction {1 - ref['jct_s'] / r['jct_s']:.1%}")
    shared = [r for r in rows if r.get("slowdown") is not None]
    if shared:
        print("\njobs sharing a network (iteration together over alone):")
        for r in shared:
            print(f"  {r['label']:<22} " + " ".join(f"{k}={r.get(k)}" for k in keys) +
                  f": slowdown {r['slowdown']:.3f}" +
                  (f", overlap {r['overlap_median']:.0%}" if r.get("overlap_median") is not None else ""))
    parallel = [r for r in rows if r.get("parallel")]
    if parallel:
        print("\nparallel jobs (iteration, closed form, largest bubble share):")
        for r in parallel:
            beside = f", {fmt(r['over_flow_model'], '.3f')}x the flow model" if r.get("over_flow_model") else ""
            print(f"  {r['label']:<22} {r['mode']:<8} {r['parallel']}: iteration {fmt(r['iteration_median_s'])} s, "
                  f"closed form {fmt(r['iteration_theory_s'])} s, bubble {fmt(r['bubble_max'], '.3f')}{beside}")
    if result.get("sim_vs_emu"):
        print_sim_vs_emu(result["sim_vs_emu"])
    if result.get("paper"):
        print_paper(result)
    if result.get("targets"):
        print_targets(result["targets"], keys)
    print(f"\nresults: {result['out']}/comparison.csv; plots: {', '.join(result['plots'])}")


def correct_text(correct) -> str:
    """A row's correctness: True or False where workers ran, '-' where a model gave the row (nothing to check)."""
    return "-" if correct is None else str(correct)


AGREEMENT = {True: "", False: "  differs", None: "  no value"}  # after a row that agrees, differs, has no value
SIM_VS_EMU_FIELDS = ("label", "emulated_gst_s", "simulated_gst_s", "sim_over_emu", "agrees", "emulation_fidelity")


def print_sim_vs_emu(pairs: List[dict]) -> None:
    """Simulated beside emulated GST for every configuration run both ways."""
    print("\nsimulated vs emulated GST (agree within 10%):")
    print(f"  {'configuration':<34} {'emulated':>9} {'simulated':>9} {'sim/emu':>8}  emulation fidelity")
    for p in pairs:
        name = " ".join([p["label"]] + [f"{k}={v}" for k, v in p.items() if k not in SIM_VS_EMU_FIELDS])
        ratio = "-" if p["sim_over_emu"] is None else f"{p['sim_over_emu']:.3f}"
        emu = "-" if p["emulated_gst_s"] is None else f"{p['emulated_gst_s']:.3f}"
        print(f"  {name:<34} {emu:>9} {p['simulated_gst_s']:>9.3f} {ratio:>8}  {p['emulation_fidelity']}"
              f"{AGREEMENT[p['agrees']]}")


COMMAND = Compare()
