"""The head every run-shaped result starts with -- a run's summary.json, a simulated run's and the theory report:
the configuration, the model's size and the papers' theory (plus the calibrated and delay models when asked for)."""

from __future__ import annotations

from dataclasses import asdict

from typing import Callable, List, Sequence

from emulation.orchestration.options import Checked, RunConfig, algorithm_options, link_goodput
from emulation.orchestration.provenance import provenance
from emulation.simulation.calibrated import calibrated_fields, delay_fields
from workloads.models import parameter_count_of, ready_order, tensor_flops, tensor_sizes
from workloads.overlap import bucket_ready_fractions, ddp_buckets, model_fractions, timeline


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
            "gst_theory_s": theory.gst_s, "gst_formula": theory.formula, "tf_s": theory.tf_s,
            **({"gst_baselines_s": dict(theory.baselines)} if theory.baselines else {}), "config": asdict(cfg),
            "provenance": provenance()}


def model_fields(cfg: RunConfig, checked: Checked) -> dict:
    """The calibrated theory (with --calibration) and the delay model (with a link delay): the plan in the flow
    model ({} when neither applies)."""
    options, sizes = algorithm_options(cfg), tensor_sizes(cfg.model)
    return {**calibrated_fields(cfg.calibration, checked.algorithm, checked.topo, checked.servers, sizes, checked.bw,
                                options),
            **delay_fields(checked.impairment, checked.algorithm, checked.topo, checked.servers, sizes, checked.bw,
                           options, link_goodput(cfg))}


def overlap_model(cfg: RunConfig, bucket_gst: Callable[[List[int]], float]) -> dict:
    """With --overlap, one iteration as DDP runs it: the model's buckets, when a device of --compute-time has each
    ready (forward, then backward by each layer's FLOPs), and their synchronizations one after another, each
    taking bucket_gst(its parameter sizes); {} without --overlap."""
    if not cfg.overlap:
        return {}
    sizes, order = tensor_sizes(cfg.model), ready_order(cfg.model)
    indices = ddp_buckets(sizes, cfg.bucket_mb, order)
    buckets = [[sizes[i] for i in b] for b in indices]
    ready = bucket_ready_fractions(indices, model_fractions(sizes, tensor_flops(cfg.model), order))
    t = timeline(cfg.compute_time, ready, [bucket_gst(b) for b in buckets])
    return {"bucket_mb": cfg.bucket_mb, "buckets": len(buckets), "bucket_bytes": [4 * sum(b) for b in buckets],
            "ready_fractions": ready, "bucket_gst_s": [e - s for s, e in t["buckets"]], "gst_s": t["gst_s"],
            "exposed_s": t["exposed_s"], "iteration_s": t["iteration_s"]}


def overlap_theory(cfg: RunConfig, checked: Checked) -> dict:
    """overlap_model with the paper's closed form for every bucket ({} without --overlap)."""
    def closed_form(sizes: Sequence[int]) -> float:
        return checked.algorithm.gst_theory(checked.topo, 4 * sum(sizes), checked.bw, checked.servers, cfg.codec,
                                            algorithm_options(cfg)).gst_s
    model = overlap_model(cfg, closed_form)
    return {"overlap_theory": model} if model else {}
