"""`dmlbed theory`: the papers' closed-form GST of a configuration at any size (no plan is built for the formula);
with a calibration or a link delay, the plan in the flow model beside it."""

from __future__ import annotations

from dataclasses import dataclass

from emulation.orchestration.options import Checked, RunConfig, validate
from emulation.orchestration.summary_head import head, model_fields, overlap_theory


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
    if any(checked.impairment.delay_ms):
        out["delay_ms"] = list(checked.impairment.delay_ms)
    return out
