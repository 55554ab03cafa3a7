"""`dmlbed theory`: the papers' closed-form GST of a configuration at any size (the theory back end)."""

from __future__ import annotations

from emulation.backends import closed_form, parallel_job
from emulation.commands.base import Command, print_link_events, show_run
from emulation.run.options import (APP_B, BACKGROUND, EVENTS, BATCH, ITERATIONS, LINKS, PARALLEL, PLAN_INPUTS,
                                   SYNCHRONIZATION, TOPOLOGY)


class Theory(Command):
    name, help = "theory", "the papers' theoretical GST (closed form, any size)"
    description = ("The algorithm's GST from its paper's formula (no plan is built); with --calibration or --delay "
                   "also the plan in the flow model under that model; with --overlap DDP's overlapped iteration; "
                   "with --codec terngrad TernGrad's App. B performance model.")
    examples = (
        ("BML's GST on BCube(3,2) for ResNet-50 at 1 Gbit/s, with its equation",
         "--topo bcube:3,2 --algo bml --model resnet50 --bw 1000"),
        ("the parameter server on Fat-Tree(16) at a data-center rate",
         "--topo fattree:16 --algo ps --model vgg19 --bw 100Gbit"),
        ("BlueConnect with a per-message latency",
         "--topo tree:4,2 --algo blueconnect --bw 100,10 --alpha 5ms"),
    )
    groups = (TOPOLOGY, LINKS, BACKGROUND, EVENTS, SYNCHRONIZATION, PARALLEL, PLAN_INPUTS, BATCH, ITERATIONS, APP_B)

    def prepare(self, args):
        cfg = self.config(args)
        return parallel_job.prepare(cfg, "theory") if cfg.parallel else closed_form.prepare(cfg)

    def execute(self, job, args):
        if isinstance(job, parallel_job.ParallelRun):
            return parallel_job.execute(job, "theory")
        return closed_form.execute(job)

    def show(self, summary):
        show_run(summary, print_theory)


def print_theory(o) -> None:
    """The paper's formula, and the models beside it where they apply."""
    bw = o["bw_mbps"]
    slowest = o["gradient_bytes"] * 8 / o["tf_s"] / 1e6 if o.get("tf_s") else min(bw if isinstance(bw, list) else [bw])
    print(f"{o['algo']} on {o['topology']}, {o['model']} ({o['gradient_bytes'] / 2**20:.2f} MiB): GST = "
          f"{o['gst_formula']} = {o['gst_theory_s']:.4f} s (TF = {o['tf_s']:.4f} s at "
          f"{slowest:g} Mbit/s)")
    print_link_events(o)
    if "terngrad_model" in o:
        m = o["terngrad_model"]
        i = m["inputs"]
        print(f"TernGrad App. B ({i['scaling']} scaling, {i['machines']} machines x {i['gpus']} GPUs, "
              f"T(1,1,K) {i['step_s']:g} s): fp32 {m['fp32']['t_s']:.4f} s/step, "
              f"{m['fp32']['throughput_sps']:.1f} samples/s; terngrad {m['terngrad']['t_s']:.4f} s/step, "
              f"{m['terngrad']['throughput_sps']:.1f} samples/s; speed-up {m['speedup']:.2f}x")
    for what, seconds in (o.get("baselines_s") or {}).items():
        print(f"  beside it, {what}: {seconds:.4f} s ({seconds / o['gst_theory_s']:.3f} x)")
    if "gst_theory_calibrated_s" in o:
        cal = o["gst_theory_calibrated_s"]
        print(f"calibrated ({o['calibration']}): " + (f"GST = {cal:.4f} s, {o['gst_formula_calibrated']}"
                                                       if cal is not None else o["gst_formula_calibrated"]))
    if "gst_theory_delay_s" in o:
        d = o["gst_theory_delay_s"]
        print(f"with link delay {','.join(f'{v:g}' for v in o['delay_ms'])} ms: " +
              (f"GST = {d:.4f} s, {o['gst_formula_delay']}" if d is not None else o["gst_formula_delay"]))


COMMAND = Theory()
