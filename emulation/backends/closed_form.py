"""The theory back end (`dmlbed theory`, a compare row's mode theory): the papers' closed-form GST of a configuration
at any size (no plan is built for the formula), the calibrated, delay and overlap models where they apply, and
TernGrad's App. B performance model with --codec terngrad (its numbers become the row's with --tg-step)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from emulation.backends.base import Job, Log, quiet
from emulation.core import terngrad_model
from emulation.backends.events_report import event_rows, theory_timeline, took_effect
from emulation.run.options import APP_B, Label, OptionError, RunConfig, flag_label, in_groups
from emulation.run.resolution import Checked
from emulation.results.iterations import WARMUP
from emulation.results.summary import ClosedForm, Outcome, Summary
from emulation.backends.heads import head, models
from emulation.run.validation import check_modelled_compute, validate
from emulation.simulation.background_model import varies as background_varies
from workloads.models import tensor_sizes

MODE = "theory"
VERDICT = {"verdict": "closed form", "cause": "the papers' formulas: no packets, no flows"}


@dataclass(frozen=True)
class TheoryJob(Job):
    """A checked configuration whose theory is asked for."""


def prepare(cfg: RunConfig, label: Label = flag_label, in_matrix: bool = False) -> TheoryJob:
    """Validate the configuration as a run of any size (no host cap, no memory for ranks)."""
    checked = validate(cfg, label, emulated=False, workers=False)
    check_modelled_compute(checked, label)
    check_app_b_options(cfg, label)
    return TheoryJob(cfg, checked)


def check_app_b_options(cfg: RunConfig, label: Label = flag_label) -> None:
    """TernGrad App. B's inputs mean something only where its model runs (--codec terngrad or --tg-step): given
    without it they would be ignored silently."""
    if cfg.codec == "terngrad" or cfg.tg_step_s:
        return
    given = [name for name, _, default in in_groups((APP_B,)) if getattr(cfg, name) != default]
    if given:
        raise OptionError(f"{label(given[0])} is an input of TernGrad's App. B performance model, which runs with "
                          f"{label('codec')} terngrad or {label('tg_step_s')}: give one of them, or drop it")


def execute(job: TheoryJob, log: Log = quiet, progress: bool = True) -> Summary:
    """The closed forms as a summary: GST from the algorithm's formula after --compute-time, or with --tg-step
    TernGrad's App. B (the fp32 or the TernGrad row by --codec, its N = GPUs x machines workers)."""
    cfg, checked = job.cfg, job.checked
    top = head(checked)
    closed = ClosedForm(formula=top.gst_formula, out=cfg.out)
    if top.gst_baselines_s:
        closed.baselines_s = top.gst_baselines_s
    if any(checked.impairment.delay_ms):
        closed.delay_ms = list(checked.impairment.delay_ms)
    gst, compute, iteration, throughput = top.gst_theory_s, checked.compute.mean, None, None
    if cfg.codec == "terngrad" or cfg.tg_step_s:
        model = terngrad_app_b(checked)
        closed.terngrad_model = model
        if cfg.tg_step_s:
            mine = model["terngrad" if cfg.codec == "terngrad" else "fp32"]
            top.workers = model["inputs"]["workers"]
            gst = top.gst_theory_s = mine["t_comm_s"]
            top.gst_formula = closed.formula = model["equations"]
            compute, iteration, throughput = mine["t_s"] - mine["t_comm_s"], mine["t_s"], mine["throughput_sps"]
    outcome = Outcome(mode=MODE, iterations=None, gst_median_s=gst, gst_ratio=None, compute_median_s=compute,
                      iteration_median_s=iteration if iteration is not None else compute + gst, jct_s=None,
                      correct=None, replicas_identical=None, sum_verified=None, error=None, completed=True,
                      fidelity=dict(VERDICT))
    if throughput is not None:
        outcome.throughput_sps = throughput
    if checked.compute.varies:
        slowest = slowest_compute(checked)
        closed.compute = slowest
        outcome.compute_median_s = slowest["compute_mean_s"]
        outcome.iteration_median_s = slowest["median_s"] + gst
        outcome.iteration_mean_s = slowest["mean_s"] + gst
    elif background_varies(checked.network.background):  # the GST is already the mean over the on/off states
        outcome.iteration_mean_s = outcome.iteration_median_s
    if checked.network.events:  # each iteration at the rates in force when it begins
        syncs, gsts = theory_timeline(checked, cfg.iters, compute)
        outcome.link_events = event_rows(checked, gsts,
                                    [took_effect(e, syncs) for e in checked.network.events])
    outcome.period_median_s = outcome.iteration_median_s  # iterations back to back
    return Summary(top, models(checked), outcome, closed_form=closed)


def slowest_compute(checked: Checked) -> dict:
    """BSP waits for the slowest rank's compute: its expectation and median in each iteration past warm-up (they
    change only where a slow factor starts), and the ranks' mean compute."""
    cfg, model, workers = checked.cfg, checked.compute, checked.contributors
    counted = range(WARMUP, cfg.iters) if cfg.iters > WARMUP else range(cfg.iters)
    starts = sorted({0, *(s.start for s in model.slow)})
    segment = {i: max(s for s in starts if s <= i) for i in counted}
    known = {}
    for at in sorted(set(segment.values())):
        mean, how = model.expected_slowest(workers, at)
        known[at] = (mean, model.slowest_quantile(workers, 0.5, at), how)
    per_rank = [model.mean * statistics.mean(model.factor(r, i) for i in counted) for r in workers]
    return {"mean_s": statistics.mean(known[segment[i]][0] for i in counted),
            "median_s": statistics.median(known[segment[i]][1] for i in counted),
            "compute_mean_s": statistics.mean(per_rank), "ranks": len(workers),
            "formula": "; ".join(sorted({k[2] for k in known.values()})) +
                       " + GST (BSP: the synchronization starts when the slowest rank's compute ends)"}


def terngrad_app_b(checked: Checked) -> dict:
    """TernGrad's own performance model (App. B) for this configuration: the hosts are its machines."""
    cfg = checked.cfg
    cluster = terngrad_model.Cluster(
        gpus=cfg.tg_gpus, machines=len(checked.topo.hosts), batch=cfg.batch, step_s=cfg.tg_step_s or checked.compute.mean,
        gpu_bps=cfg.tg_gpu_gbps * 1e9 / 8, cpu_bps=cfg.tg_cpu_gbps * 1e9 / 8, net_bps=min(checked.bw) * 1e6 / 8,
        latency_s=cfg.tg_latency_us * 1e-6)
    return terngrad_model.report(cluster, cfg.tg_scaling, tensor_sizes(cfg.model), not cfg.tg_ternarize_last)


class Theory:
    """The theory back end."""

    mode = MODE
    prepare = staticmethod(prepare)
    execute = staticmethod(execute)


BACKEND = Theory()
