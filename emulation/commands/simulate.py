"""`dmlbed simulate`: a run's plans in the flow-level model, at any size, without packets (the simulate back end)."""

from __future__ import annotations

import os

from emulation.backends import flow_model, parallel_job
from emulation.commands.base import Command, print_link_events, run_report, show_run
from emulation.run.options import (BACKGROUND, BATCH, EVENTS, FLOW_MODEL, ITERATIONS, LINKS, OUTPUT, PLAN_INPUTS, REPLACE,
                                   SEED,
                                   PARALLEL, SYNCHRONIZATION, TOPOLOGY)
from emulation.run.progress import log


class Simulate(Command):
    name, help = "simulate", "the same plan in a flow-level model (no packets; any size)"
    reports = True
    description = ("Runs the algorithm's plans, chunk by chunk, over the topology's links shared max-min fairly; "
                   "writes a run's summary.json (mode simulate), iterations.csv, links.csv, a trace.json and "
                   "report.html.")
    examples = (
        ("the ring of 8 workers in the flow model, with a trace for `dmlbed timeline`",
         "--topo star:8 --algo ring --model mlp:12.5MB --bw 100 --out results/ring-star8"),
        ("1,024 servers: BML on BCube(32,2) at 1 Gbit/s",
         "--topo bcube:32,2 --algo bml --bw 1000"),
    )
    groups = (TOPOLOGY, LINKS, BACKGROUND, EVENTS, SYNCHRONIZATION, PARALLEL, PLAN_INPUTS, BATCH, ITERATIONS, SEED, FLOW_MODEL,
              OUTPUT, REPLACE)

    def prepare(self, args):
        cfg = self.config(args)
        return parallel_job.prepare(cfg, "simulate") if cfg.parallel else flow_model.prepare(cfg)

    def execute(self, job, args):
        if isinstance(job, parallel_job.ParallelRun):
            return parallel_job.execute(job, "simulate", log=log)
        return flow_model.execute(job, log=log)

    def report(self, summary):
        return run_report(summary)

    def show(self, summary):
        show_run(summary, print_simulation)


def print_simulation(s) -> None:
    """Human-readable summary of a simulated run."""
    model = s["model_settings"]
    print(f"{s['algo']} on {s['topology']} (simulated), {s['model']} ({s['gradient_bytes'] / 2**20:.1f} MiB "
          f"gradient), {s['ranks']} ranks, {s['bw_mbps']} Mbit/s, goodput {model['goodput']:.4f}, "
          f"latency {model['latency_us']:g} us")
    print(f"  GST           {s['gst_median_s']:.4f} s   theory {s['gst_theory_s']:.4f} s ({s['gst_formula']})   "
          f"ratio {s['gst_ratio']:.3f}")
    print("  links used    " + ", ".join(f"{k}: mean {v['mean']:.2f}, max {v['max']:.2f} of the shaped rate"
                                         for k, v in s["link_utilization"].items()))
    print_link_events(s)
    answered = s.get("answered") or {}
    counted = (f"{answered['steps']} steps ({answered.get('distinct_steps')} distinct, "
               f"{answered.get('shared_steps', 0)} sharing links by fair shares)" if "steps" in answered
               else f"{s['events']} {'rounds' if answered.get('method') == 'recurrence' else 'events'}")
    print(f"  answered {answered.get('method', 'by events')}: {s['messages']} messages, {counted}, "
          f"{s['duration_s']:.1f} s to simulate")
    print(f"results: {os.path.join(s['config']['out'], 'summary.json')}, iterations.csv, links.csv")


COMMAND = Simulate()
