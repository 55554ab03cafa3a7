"""`dmlbed run`: train with one real rank per host of an emulated network (or of loopback processes with --local),
synchronizing with the algorithm asked for (the emulate back end)."""

from __future__ import annotations

import os

from emulation.backends import emulator, parallel_emulation, parallel_job
from emulation.commands.base import RUN_GROUPS, Command, fmt, print_link_events, run_report, show_run
from emulation.results.fidelity import one_line
from emulation.run.options import PARALLEL, SYNCHRONIZATION
from emulation.run.progress import log


class Run(Command):
    name, help = "run", "train with real workers on an emulated network"
    reports = True
    description = ("Brings the topology up under dmlbed's controller, starts one training rank per host and "
                   "synchronizes their gradients with --algo every iteration; writes summary.json (GST beside the "
                   "papers' theory, correctness, a fidelity verdict), iterations.csv, workers.csv, trace.json and "
                   "report.html (the verdict first, then the figures).")
    examples = (
        ("BML on BCube(3,2) at 100 Mbit/s: GST beside the paper's theory, correctness and a fidelity verdict",
         "--topo bcube:3,2 --algo bml --bw 100"),
        ("the ring all-reduce of 4 workers over loopback (no root, no emulated network)",
         "--topo star:4 --algo ring --local --iters 3"),
        ("top-k with error feedback on a slow link, synchronized during backward as DDP does",
         "--topo star:8 --algo ring --bw 25 --model mlp:12.5MB --codec topk --k-ratio 0.01 --error-feedback --overlap"),
        ("a small GPT under tensor, pipeline and data parallelism, beside the flow model of the same job",
         "--topo fattree:4 --routing dmodk --bw 100 --dilation 8 --algo ring --model gpt:4,128,4,64,512 "
         "--parallel tp=2,pp=2,dp=4 --micro-batches 8 --batch 8 --compute-time 0.05 --iters 6"),
    )
    groups = tuple(g for group in RUN_GROUPS for g in ((group, PARALLEL) if group == SYNCHRONIZATION else (group,)))

    def prepare(self, args):
        cfg = self.config(args)
        return parallel_emulation.prepare(cfg) if cfg.parallel else emulator.prepare(cfg)

    def needs_root(self, job):
        return not job.cfg.local

    def execute(self, job, args):
        if isinstance(job, parallel_emulation.ParallelEmulation):
            return parallel_emulation.execute(job, log=log)
        return emulator.execute(job, log=log, progress=not args.json)

    def report(self, summary):
        return run_report(summary)

    def show(self, summary):
        show_run(summary, print_summary)

    def exit_code(self, summary):
        return 0 if field(summary, "correct") else 1

    def failure(self, summary):
        return field(summary, "error")


def field(summary, name: str):
    """One field of a run's summary, or of a parallel job's."""
    return getattr(summary, name) if isinstance(summary, parallel_job.ParallelSummary) else summary[name]


def print_summary(s) -> None:
    """Human-readable run summary."""
    print(f"{s['algo']} on {s['topology']} ({s.get('datapath', '?')}), {s['model']} "
          f"({s['gradient_bytes'] / 2**20:.1f} MiB gradient), {s['workers']} workers, batch {s['batch']}, "
          f"{s['bw_mbps']} Mbit/s")
    print(f"  iterations    {s['iterations']}/{s['iterations_requested']}")
    print(f"  GST median    {fmt(s['gst_median_s'])} s   theory {s['gst_theory_s']:.3f} s ({s['gst_formula']})"
          f"   ratio {fmt(s['gst_ratio'])}")
    print(f"  compute       {fmt(s['compute_median_s'])} s   iteration {fmt(s['iteration_median_s'])} s   "
          f"JCT {fmt(s['jct_s'], '.1f')} s")
    if s.get("stragglers"):
        st = s["stragglers"]
        print(f"  stragglers    mean iteration {fmt(s.get('iteration_mean_s'))} s; waited for "
              f"{st['most_waited_for']} most ({st['most_waited_for_share']:.0%} of {st['iterations']} iterations)")
    print("  bytes sent    " + ", ".join(f"{k}: {v / 2**20:.1f} MiB" for k, v in s["bytes_by_level"].items()))
    if s.get("wire_ratio") is not None and s.get("codec", "none") != "none":
        print(f"  wire bytes    {s['wire_ratio']:.4f} of fp32 overall, first step (worker->server for ps) "
              f"{s['first_step_wire_ratio']:.4f}")
    split = s.get("split_median_s") or {}
    if split.get("forward_phase_s") is not None:
        print(f"  pull+forward  {fmt(split.get('forward_phase_s'))} s: overlapped {fmt(split.get('overlapped_s'))}, "
              f"comm not overlapped {fmt(split.get('comm_exposed_s'))}, compute not overlapped "
              f"{fmt(split.get('compute_exposed_s'))}  (batches {s['ibatch']['batches'] if s.get('ibatch') else '-'})")
    if s.get("wire_by_phase"):
        print("  wire bytes    " + ", ".join(f"{k}: {v['ratio']:.3f} of fp32" for k, v in s["wire_by_phase"].items()
                                             if v["ratio"] is not None))
    if split.get("broadcast_s") is not None:
        pflow = s.get("pflow") or {}
        print(f"  broadcast     {split['broadcast_s']:.3f} s (median), dropped {split.get('dropped', 0):.1%} of "
              f"update values"
              + (f", overlay {pflow['overlay_method']} {pflow['overlay']}" if pflow else "")
              + (f", {pflow['extra_updates']} updates folded into an earlier round (SSP)"
                 if pflow.get("extra_updates") else ""))
    print_link_events(s)
    if s.get("accuracy") is not None:
        print(f"  accuracy      {s['accuracy']:.3f} (held-out), loss {fmt(s['loss_first'])} -> {fmt(s['loss_last'])}")
    if s.get("fidelity"):
        print(f"  {one_line(s['fidelity'])}")
    print(f"  correct       {s['correct']} (replicas identical: {s['replicas_identical']}, "
          f"first sum verified: {s['sum_verified']})")
    if s.get("error"):
        print(f"  error         {s['error']} (hosts up: {'yes' if s.get('hosts_up') else 'no'}, iterations done: "
              f"{s.get('iterations') or 0})")
    print(f"results: {os.path.join(s['config']['out'], 'summary.json')}, iterations.csv, workers.csv")


COMMAND = Run()
