"""The theory back end (`dmlbed theory`, a compare row's mode theory): the papers' closed-form GST of a configuration
at any size (no plan is built for the formula), the calibrated, delay and overlap models where they apply, and
TernGrad's App. B performance model with --codec terngrad (its numbers become the row's with --tg-step-s)."""

from __future__ import annotations

from dataclasses import dataclass

from emulation.backends.base import Job, Log, quiet
from emulation.core import terngrad_model
from emulation.run.options import Label, RunConfig, flag_label
from emulation.run.resolution import Checked
from emulation.run.summary import ClosedForm, Outcome, Summary, head, models
from emulation.run.validation import validate
from workloads.models import tensor_sizes

MODE = "theory"
VERDICT = {"verdict": "closed form", "cause": "the papers' formulas: no packets, no flows"}


@dataclass(frozen=True)
class TheoryJob(Job):
    """A checked configuration whose theory is asked for."""


def prepare(cfg: RunConfig, label: Label = flag_label, in_matrix: bool = False) -> TheoryJob:
    """Validate the configuration as a run of any size (no host cap, no memory for ranks)."""
    return TheoryJob(cfg, validate(cfg, label, emulated=False, workers=False))


def execute(job: TheoryJob, log: Log = quiet, progress: bool = True) -> Summary:
    """The closed forms as a summary: GST from the algorithm's formula after --compute-time, or with --tg-step-s
    TernGrad's App. B (the fp32 or the TernGrad row by --codec, its N = GPUs x machines workers)."""
    cfg, checked = job.cfg, job.checked
    top = head(checked)
    closed = ClosedForm(formula=top.gst_formula, out=cfg.out)
    if top.gst_baselines_s:
        closed.baselines_s = top.gst_baselines_s
    if any(checked.impairment.delay_ms):
        closed.delay_ms = list(checked.impairment.delay_ms)
    gst, compute, iteration, throughput = top.gst_theory_s, cfg.compute_time, None, None
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
    return Summary(top, models(checked), outcome, closed_form=closed)


def terngrad_app_b(checked: Checked) -> dict:
    """TernGrad's own performance model (App. B) for this configuration: the hosts are its machines."""
    cfg = checked.cfg
    cluster = terngrad_model.Cluster(
        gpus=cfg.tg_gpus, machines=len(checked.topo.hosts), batch=cfg.batch, step_s=cfg.tg_step_s or cfg.compute_time,
        gpu_bps=cfg.tg_gpu_gbps * 1e9 / 8, cpu_bps=cfg.tg_cpu_gbps * 1e9 / 8, net_bps=min(checked.bw) * 1e6 / 8,
        latency_s=cfg.tg_latency_us * 1e-6)
    return terngrad_model.report(cluster, cfg.tg_scaling, tensor_sizes(cfg.model), not cfg.tg_ternarize_last)


class Theory:
    """The theory back end."""

    mode = MODE
    prepare = staticmethod(prepare)
    execute = staticmethod(execute)


BACKEND = Theory()
