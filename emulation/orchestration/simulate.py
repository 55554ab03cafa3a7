"""`dmlbed simulate`: a run's plan on its topology in the flow-level model, with a run's summary schema."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict
from typing import Callable, Dict, List, Tuple

from emulation.orchestration.experiment import check_output, clear_results
from emulation.orchestration.options import OptionError, RunConfig, link_goodput, validate, worker_options
from emulation.orchestration.results import WARMUP, write_atomic, write_atomic_csv
from emulation.orchestration.timeline import chrome_trace
from emulation.simulation.flows import TRACE_UNITS, FlowResult, simulate_plan
from emulation.simulation.routes import Router
from emulation.spec.calibration import load as load_calibration
from workloads.algorithms import names_with
from workloads.engine import CHUNK_BYTES
from workloads.models import parameter_count_of, tensor_sizes
from workloads.plan import piece_sizes
from workloads.records import read_traces

def check_simulable(cfg: RunConfig, in_compare: bool = False):
    """Validation for a simulated run: the run's own checks (no host cap, no memory for workers), a plan
    algorithm, fp32 payloads, an emulated run of the same topology to take ECMP ports from (in a compare
    config, 'emulated': its emulated row of the same label, which has not run yet)."""
    checked = validate(cfg, emulated=False, workers=False)
    if checked.algorithm.plan is None:
        raise OptionError(f"simulate runs the plan algorithms ({', '.join(names_with(lambda a: a.plan is not None))})"
                          f", not {cfg.algo}")
    if cfg.codec != "none":
        raise OptionError(f"codec {cfg.codec} cannot be simulated: the flow model moves fp32 payloads (codec none)")
    if cfg.dilation != 1:
        raise OptionError("dilation applies to emulated runs only: a simulation has no real time to stretch")
    if cfg.ecmp_ports == "emulated":
        if not in_compare:
            raise OptionError("--ecmp-ports emulated is for compare configs (the emulated row of the same label): "
                              "give an emulated run's folder")
    elif cfg.ecmp_ports:
        check_emulated_run(cfg.ecmp_ports, checked.topo.spec)
    return checked


def check_emulated_run(run_dir: str, topology: str) -> None:
    """Refuse a folder that holds no finished run of this topology (for --ecmp-ports)."""
    try:
        with open(os.path.join(run_dir, "summary.json")) as f:
            ran = json.load(f).get("topology")
    except (OSError, ValueError):
        raise OptionError(f"--ecmp-ports {run_dir}: no summary.json there (give a finished emulated run's "
                          f"folder)") from None
    if ran != topology:
        raise OptionError(f"--ecmp-ports {run_dir}: that run emulated {ran}, this simulation is of {topology}")


def emulated_ports(run_dir: str, ranks: int) -> Dict[Tuple[int, int, int], Tuple[int, int]]:
    """The TCP ports of every connection an emulated run used, by (rank, peer, stream), from its workers'
    traces."""
    ports = {(t["rank"], t["peer"], t["stream"]): tuple(t["ports"])
             for t in read_traces(os.path.join(run_dir, "workers"), ranks) if t["dir"] == "send" and t.get("ports")}
    if not ports:
        raise OptionError(f"--ecmp-ports {run_dir}: its workers recorded no TCP ports (an emulated run of "
                          f"this version keeps them in workers/rank-N.trace.jsonl)")
    return ports


def link_rows(router: Router, result: FlowResult, rates: Dict[int, float]) -> List[dict]:
    """Per directed link (or group of parallel links, with ECMP spread): level, payload bytes, busy time and
    utilization of the shaped rate over the GST."""
    rows = []
    for hop, sent in sorted(result.link_bytes.items()):
        capacity = router.capacity(hop, rates)
        rows.append({"link": ">".join(hop), "level": router.level_of[hop], "links": router.width.get(hop, 1),
                     "payload_bytes": sent, "busy_s": result.link_busy_s[hop],
                     "utilization": sent / (capacity * result.gst_s) if result.gst_s else None})
    return rows


def level_utilization(rows: List[dict]) -> Dict[str, dict]:
    """Mean and max utilization of the links that carried data, per level."""
    out: Dict[str, dict] = {}
    for level in sorted({r["level"] for r in rows}):
        values = [r["utilization"] for r in rows if r["level"] == level and r["utilization"] is not None]
        if values:
            out[f"L{level}"] = {"links": len(values), "mean": sum(values) / len(values), "max": max(values)}
    return out


def simulate(cfg: RunConfig, log: Callable[[str], None] = lambda m: None) -> dict:
    """Simulate one configuration; writes summary.json, iterations.csv and links.csv to cfg.out."""
    checked = check_simulable(cfg)
    ports = emulated_ports(cfg.ecmp_ports, len(checked.topo.hosts)) if cfg.ecmp_ports else None
    check_output(cfg)
    started = time.time()
    topo, bw, algorithm = checked.topo, checked.bw, checked.algorithm
    parameters = parameter_count_of(cfg.model)
    gradient_bytes = parameters * 4
    theory = algorithm.gst_theory(topo, gradient_bytes, bw, checked.servers, options=worker_options(cfg))
    log(f"building the {cfg.algo} plan on {topo.spec} ({len(topo.hosts)} hosts)")
    plan = algorithm.build_plan(topo, checked.servers, worker_options(cfg))
    pieces = [n * 4 for n in piece_sizes(tensor_sizes(cfg.model), plan.pieces)]
    share = link_goodput(cfg)
    rates = {level: b * 1e6 / 8 * share for level, b in enumerate(bw)}
    latency = cfg.latency_us * 1e-6
    if cfg.calibration:  # the fitted model replaces goodput and latency
        rates, latency = load_calibration(cfg.calibration, topo.spec, bw).link_model(len(bw))
    router = Router(topo, "hash" if ports else cfg.ecmp, ports)
    log(f"simulating {len(plan.streams)} stream(s) of {sum(len(s) for s in plan.streams)} steps")
    result = simulate_plan(plan, pieces, router, rates, latency_s=latency,
                           chunk_bytes=CHUNK_BYTES if cfg.granularity == "chunk" else None,
                           link_delay_s=checked.impairment.link_delay_s())
    gst = result.gst_s
    by_level: Dict[str, float] = {}
    for (_, level), sent in result.host_tx_bytes.items():
        by_level[f"L{level}"] = by_level.get(f"L{level}", 0.0) + sent / share * cfg.iters
    links = link_rows(router, result, {l: b * 1e6 / 8 for l, b in enumerate(bw)})
    iteration_s = cfg.compute_time + gst
    summary = {"mode": "simulate", "topology": topo.spec, "algo": cfg.algo, "model": cfg.model,
               "workers": len(checked.contributors), "ranks": len(topo.hosts), "servers": checked.servers,
               "parameters": parameters, "gradient_bytes": gradient_bytes,
               "bw_mbps": bw[0] if len(set(bw)) == 1 else list(bw), "shaped_mbps": list(bw),
               "batch": cfg.batch, "codec": cfg.codec, "iterations_requested": cfg.iters,
               "gst_theory_s": theory.gst_s, "gst_formula": theory.formula, "tf_s": theory.tf_s,
               "config": asdict(cfg),
               "model_settings": {"goodput": share, "mtu": cfg.mtu, "latency_us": cfg.latency_us,
                                  "ecmp": router.ecmp, "ecmp_ports": cfg.ecmp_ports,
                                  "link_delay_ms": list(checked.impairment.delay_ms),
                                  "calibration": cfg.calibration,
                                  "rates_mbps": {f"L{l}": r * 8 / 1e6 for l, r in rates.items()},
                                  "granularity": cfg.granularity,
                                  "unit": f"{CHUNK_BYTES >> 10} KiB chunks" if cfg.granularity == "chunk" else
                                  "one message per connection and step", "sharing": "max-min fair"},
               "iterations": cfg.iters, "gst_median_s": gst, "compute_median_s": cfg.compute_time,
               "iteration_median_s": iteration_s, "jct_s": iteration_s * cfg.iters,
               "gst_ratio": gst / theory.gst_s if theory.gst_s else None,
               "bytes_by_level": by_level, "payload_fp32_bytes": sum(result.host_tx_bytes.values()) * cfg.iters,
               "link_utilization": level_utilization(links),
               "messages": result.messages, "events": result.events,
               "rank_done_s": {"min": min(result.rank_done_s), "max": max(result.rank_done_s)},
               "correct": None, "sum_verified": None, "replicas_identical": None, "error": None,
               "fidelity": {"verdict": "simulated", "cause": "flow-level model: no packets moved"},
               "completed": True, "warmup": WARMUP}
    summary["duration_s"] = time.time() - started
    os.makedirs(cfg.out, exist_ok=True)
    clear_results(cfg.out)
    write_atomic_csv(os.path.join(cfg.out, "iterations.csv"), ["iteration", "gst_s", "compute_s", "iteration_s"],
                     ([i, f"{gst:.9f}", f"{cfg.compute_time:.6f}", f"{iteration_s:.9f}"] for i in range(cfg.iters)))
    write_atomic_csv(os.path.join(cfg.out, "links.csv"), ["link", "level", "links", "payload_bytes", "busy_s",
                                                                   "utilization"],
                     ([r["link"], r["level"], r["links"], f"{r['payload_bytes']:.0f}", f"{r['busy_s']:.9f}",
                       "" if r["utilization"] is None else f"{r['utilization']:.4f}"] for r in links))
    if result.units is not None:
        write_atomic(os.path.join(cfg.out, "trace.json"), json.dumps(simulated_trace(result, topo, cfg, bw)))
        summary["trace"] = "trace.json: one synchronization, simulated"
    else:
        summary["trace"] = f"omitted: {result.messages} transfers (a timeline keeps up to {TRACE_UNITS})"
    write_atomic(os.path.join(cfg.out, "summary.json"), json.dumps(summary, indent=1))
    return summary


def simulated_trace(result: FlowResult, topo, cfg: RunConfig, bw) -> dict:
    """The timeline of one simulated iteration (compute, then the synchronization's transfers), in the same
    trace event format as a real run's."""
    compute, latency = cfg.compute_time, cfg.latency_us * 1e-6
    rows = {r: [{"iteration": 0, "start": 0.0, "end": compute + result.gst_s, "compute_s": compute,
                 "sync_start": compute, "sync_end": compute + done}] for r, done in enumerate(result.rank_done_s)}
    traces = []
    for stream, step, src, dst, size, start, end, level in result.units:
        common = {"iteration": 0, "stream": stream, "step": step, "level": level, "bytes": size,
                  "wire_bytes": size, "phase": "simulated"}
        traces.append(dict(common, rank=src, peer=dst, dir="send", start=compute + start, end=compute + end))
        traces.append(dict(common, rank=dst, peer=src, dir="recv", start=compute + start,
                           end=compute + end + latency))
    return chrome_trace(rows, traces, [h.name for h in topo.hosts], 1.0, list(bw))
