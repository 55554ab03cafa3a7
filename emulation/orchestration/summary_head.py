"""The head every run-shaped result starts with -- a run's summary.json, a simulated run's and the theory report:
the configuration, the model's size and the papers' theory (plus the calibrated and delay models when asked for)."""

from __future__ import annotations

from dataclasses import asdict

from emulation.orchestration.options import Checked, RunConfig, algorithm_options, link_goodput
from emulation.simulation.calibrated import calibrated_fields, delay_fields
from workloads.models import parameter_count_of, tensor_sizes


def head(cfg: RunConfig, checked: Checked) -> dict:
    """Configuration, model size and the paper's GST (no plan is built for the closed form)."""
    topo, bw = checked.topo, checked.bw
    parameters = parameter_count_of(cfg.model)
    theory = checked.algorithm.gst_theory(topo, parameters * 4, bw, checked.servers, cfg.codec,
                                          algorithm_options(cfg))
    return {"topology": topo.spec, "algo": cfg.algo, "model": cfg.model, "workers": len(checked.contributors),
            "ranks": len(topo.hosts), "servers": checked.servers, "parameters": parameters,
            "gradient_bytes": parameters * 4, "bw_mbps": bw[0] if len(set(bw)) == 1 else list(bw),
            "batch": cfg.batch, "codec": cfg.codec, "iterations_requested": cfg.iters,
            "gst_theory_s": theory.gst_s, "gst_formula": theory.formula, "tf_s": theory.tf_s, "config": asdict(cfg)}


def model_fields(cfg: RunConfig, checked: Checked) -> dict:
    """The calibrated theory (with --calibration) and the delay model (with a link delay): the plan in the flow
    model ({} when neither applies)."""
    options, sizes = algorithm_options(cfg), tensor_sizes(cfg.model)
    return {**calibrated_fields(cfg.calibration, checked.algorithm, checked.topo, checked.servers, sizes, checked.bw,
                                options),
            **delay_fields(checked.impairment, checked.algorithm, checked.topo, checked.servers, sizes, checked.bw,
                           options, link_goodput(cfg))}
