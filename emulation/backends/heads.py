"""The sections every back end's summary starts with, built from the checked configuration: the head (what was
asked and the papers' answer) and the models beside the formula (calibrated, link delay, DDP's overlap)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Callable, List, Sequence

from emulation.core.link_rates import described
from emulation.results.provenance import provenance
from emulation.results.summary import Head, Models, bw_value
from emulation.run.resolution import Checked, link_goodput
from emulation.simulation.background_model import varies as background_varies
from emulation.simulation.calibrated import calibrated_fields, delay_fields
from workloads.models import parameter_count_of, ready_order, shapes_for, tensor_flops, tensor_shapes, tensor_sizes
from workloads.overlap import bucket_ready_fractions, ddp_buckets, model_fractions, timeline


def head(checked: Checked) -> Head:
    """Configuration, model size and the paper's GST (no plan is built for the closed form)."""
    cfg, topo, network = checked.cfg, checked.topo, checked.network
    parameters = parameter_count_of(cfg.model)

    def closed_form(bw):
        return checked.algorithm.gst_theory(topo, parameters * 4, bw, checked.servers, cfg.codec, checked.options,
                                            tensor_sizes(cfg.model), checked.codec_options, tensor_shapes(cfg.model))
    bw = network.theory_bw
    theory = closed_form(bw)
    out = Head(topology=topo.spec, algo=cfg.algo, model=cfg.model, workers=len(checked.contributors),
               ranks=len(topo.hosts), servers=checked.servers, parameters=parameters, gradient_bytes=parameters * 4,
               bw_mbps=bw_value(checked.bw), batch=cfg.batch, codec=cfg.codec, iterations_requested=cfg.iters,
               gst_theory_s=theory.gst_s, gst_formula=theory.formula, tf_s=theory.tf_s,
               switch_ratio_fat_tree=len(topo.switches) / topo.fat_tree_switches_for_same_hosts(),
               config=asdict(cfg), provenance=provenance())
    if theory.baselines:
        out.gst_baselines_s = dict(theory.baselines)
    if theory.filtered:
        out.gst_theory_filtered = True
    if network.link_rates:
        out.link_rates_mbps = described(network.link_rates)
    if network.link_rates or network.background:
        beside = " and its fair share beside the background flows" if network.background else ""
        out.gst_formula += (f" at each level's slowest link{beside} ({bw_value(bw)} Mbit/s): " +
                            (f"exact, every step of {cfg.algo} is paced by its slowest link"
                             if checked.algorithm.uniform_links else
                             f"an upper bound, {cfg.algo} does not cross every link in every step (simulate gives "
                             f"the shared-link figure)"))
    if background_varies(network.background):  # a state holding share p of the time holds p/(C + G) of the iterations
        states = network.theory_states()
        gsts = [(p, closed_form(rates).gst_s) for p, rates in states]
        weights = [p / (checked.compute.mean + g) for p, g in gsts]
        out.gst_theory_s = sum(w * g for w, (_, g) in zip(weights, gsts)) / sum(weights)
        out.gst_formula += (f"; the mean over the on/off flows' {len(states)} states, each state's GST G weighted by "
                            f"p/(C + G) (p: its share of the time, each flow on for ON/(ON+OFF); C: the compute): "
                            f"exact when a synchronization is short against the on and off times")
    return out


def models(checked: Checked) -> Models:
    """The calibrated theory (with --calibration), the delay model (with a link delay) and DDP's overlapped
    iteration (with --overlap), each where it applies."""
    cfg, sizes, bw = checked.cfg, tensor_sizes(checked.cfg.model), checked.network.theory_bw
    keys = {**calibrated_fields(cfg.calibration, checked.algorithm, checked.topo, checked.servers, sizes, bw,
                                checked.options),
            **delay_fields(checked.impairment, checked.algorithm, checked.topo, checked.servers, sizes, bw,
                           checked.options, link_goodput(cfg)),
            **overlap_theory(checked)}
    return Models(**keys)


def overlap_model(checked: Checked, bucket_gst: Callable[[List[int]], float]) -> dict:
    """With --overlap, one iteration as DDP runs it: the model's buckets, when a device of --compute-time has each
    ready (forward, then backward by each layer's FLOPs), and their synchronizations one after another, each
    taking bucket_gst(its parameter sizes); {} without --overlap."""
    cfg = checked.cfg
    if not cfg.overlap:
        return {}
    sizes, order = tensor_sizes(cfg.model), ready_order(cfg.model)
    indices = ddp_buckets(sizes, cfg.bucket_mb, order)
    buckets = [[sizes[i] for i in b] for b in indices]
    ready = bucket_ready_fractions(indices, model_fractions(sizes, tensor_flops(cfg.model), order))
    t = timeline(checked.compute.mean, ready, [bucket_gst(b) for b in buckets])
    return {"bucket_mb": cfg.bucket_mb, "buckets": len(buckets), "bucket_bytes": [4 * sum(b) for b in buckets],
            "ready_fractions": ready, "bucket_gst_s": [e - s for s, e in t["buckets"]], "gst_s": t["gst_s"],
            "exposed_s": t["exposed_s"], "iteration_s": t["iteration_s"]}


def overlap_theory(checked: Checked) -> dict:
    """overlap_model with the paper's closed form for every bucket ({} without --overlap)."""
    def closed_form(sizes: Sequence[int]) -> float:
        return checked.algorithm.gst_theory(checked.topo, 4 * sum(sizes), checked.network.theory_bw,
                                            checked.servers, checked.cfg.codec, checked.options, sizes,
                                            checked.codec_options, shapes_for(checked.cfg.model, sizes)).gst_s
    model = overlap_model(checked, closed_form)
    return {"overlap_theory": model} if model else {}
