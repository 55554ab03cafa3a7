"""`dmlbed theory`: the papers' closed-form GST of a configuration at any size (no plan is built for the formula);
with a calibration or a link delay, the plan in the flow model beside it."""

from __future__ import annotations

from dataclasses import dataclass

from emulation.orchestration.options import Checked, RunConfig, validate
from emulation.orchestration.summary_head import head, model_fields, overlap_theory
from emulation.spec import terngrad_model
from workloads.models import tensor_sizes


@dataclass(frozen=True)
class TheoryJob:
    """A checked configuration whose theory is asked for."""

    cfg: RunConfig
    checked: Checked


def prepare(cfg: RunConfig) -> TheoryJob:
    """Validate the configuration as a run of any size (no host cap, no memory for ranks)."""
    return TheoryJob(cfg, validate(cfg, emulated=False, workers=False))


def report(job: TheoryJob) -> dict:
    """The closed-form GST (and the calibrated and delay models when they apply)."""
    cfg, checked = job.cfg, job.checked
    h = head(cfg, checked)
    out = {key: h[key] for key in ("topology", "algo", "model", "parameters", "gradient_bytes")}
    out.update(bw_mbps=list(checked.bw), servers=checked.servers, tf_s=h["tf_s"], gst_theory_s=h["gst_theory_s"],
               formula=h["gst_formula"], **model_fields(cfg, checked), **overlap_theory(cfg, checked))
    if "gst_baselines_s" in h:
        out["baselines_s"] = h["gst_baselines_s"]
    if cfg.codec == "terngrad":
        out["terngrad_model"] = terngrad_app_b(cfg, checked)
    if any(checked.impairment.delay_ms):
        out["delay_ms"] = list(checked.impairment.delay_ms)
    return out


def summary(job: TheoryJob) -> dict:
    """A compare row's summary from the closed forms (mode: theory): with --tg-step-s, TernGrad's App. B (the fp32
    or the TernGrad row by --codec, its N = GPUs x machines workers); else the algorithm's GST formula after
    --compute-time."""
    cfg, checked = job.cfg, job.checked
    h = head(cfg, checked)
    out = {key: h[key] for key in ("topology", "algo", "codec", "model", "batch", "bw_mbps", "workers",
                                   "gst_theory_s", "config")}
    out.update(mode="theory", iterations=None, correct=None, out=cfg.out)
    if cfg.tg_step_s:
        model = terngrad_app_b(cfg, checked)
        mine = model["terngrad" if cfg.codec == "terngrad" else "fp32"]
        out.update(workers=model["inputs"]["workers"], gst_median_s=mine["t_comm_s"], gst_theory_s=mine["t_comm_s"],
                   compute_median_s=mine["t_s"] - mine["t_comm_s"], iteration_median_s=mine["t_s"],
                   throughput_sps=mine["throughput_sps"], terngrad_model=model, formula=model["equations"])
    else:
        out.update(gst_median_s=h["gst_theory_s"], compute_median_s=cfg.compute_time,
                   iteration_median_s=cfg.compute_time + h["gst_theory_s"], formula=h["gst_formula"])
    return out


def terngrad_app_b(cfg: RunConfig, checked: Checked) -> dict:
    """TernGrad's own performance model (App. B) for this configuration: the hosts are its machines."""
    cluster = terngrad_model.Cluster(
        gpus=cfg.tg_gpus, machines=len(checked.topo.hosts), batch=cfg.batch, step_s=cfg.tg_step_s or cfg.compute_time,
        gpu_bps=cfg.tg_gpu_gbps * 1e9 / 8, cpu_bps=cfg.tg_cpu_gbps * 1e9 / 8, net_bps=min(checked.bw) * 1e6 / 8,
        latency_s=cfg.tg_latency_us * 1e-6)
    return terngrad_model.report(cluster, cfg.tg_scaling, tensor_sizes(cfg.model), not cfg.tg_ternarize_last)
