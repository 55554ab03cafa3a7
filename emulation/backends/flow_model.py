"""The simulate back end (`dmlbed simulate`, a compare row's mode simulate): a run's plans on its topology in the
flow-level model, with a run's summary."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from emulation.backends.base import Job, Log, quiet
from emulation.core.background import horizon_s
from emulation.core.events import rates_in_force
from emulation.core.link_rates import factors as link_factors, rates_key
from emulation.backends.events_report import event_rows, took_effect
from emulation.run.options import Label, OptionError, RunConfig, flag_label
from emulation.run.outputs import clear, output_folder
from emulation.results.files import read_summary, write_atomic_csv, write_iterations, write_json, write_summary
from emulation.run.resolution import Checked, link_goodput, payload_rates
from emulation.run.resources import available_memory, gib
from emulation.results.iterations import WARMUP, mean_after_warmup, median_after_warmup
from emulation.results.iterations import straggler_report
from emulation.results.summary import Models, Outcome, Simulation, Summary, Traffic
from emulation.backends.heads import head, overlap_model, overlap_theory
from emulation.results.trace import Sides, chrome_trace
from emulation.run.validation import check_modelled_compute, validate
from emulation.simulation.background_model import persistent_flows, varies as background_varies
from emulation.simulation.flows import TRACE_UNITS, FlowResult, in_sequence, simulate_plan
from emulation.simulation.gcpause import cycle_collection_paused
from emulation.simulation.routes import Router
from emulation.core.calibration import load as load_calibration
from workloads.algorithms import names_with
from workloads.codecs import COMPRESSORS
from workloads.codecs.base import typed_options
from workloads.engine import CHUNK_BYTES
from workloads.models import layer_tensor_counts, shapes_for, tensor_flops, tensor_shapes, tensor_sizes
from workloads.overlap import FORWARD_SHARE
from workloads.plan import PlanError
from workloads.runfolder import RunFolder

MODE = "simulate"
Ports = Dict[Tuple[int, int, int], Tuple[int, int]]

TRANSFER_BYTES = 450  # the flow model's memory per transfer (table and graph): PS on fattree:16, 2.1e6 in 848 MB
MEMORY_SHARE = 0.8  # of the memory available, what a simulation may plan to take


@dataclass(frozen=True)
class SimulationJob(Job):
    """A simulation checked before anything is written, and the TCP ports of the emulated run it replays (None: read
    at execution, when that run happens in the same compare)."""

    ports: Optional[Ports] = None
    phases: Optional[tuple] = field(default=None, compare=False, repr=False)  # the plans validation built (alone)

    @property
    def replays_sibling(self) -> bool:
        return self.cfg.ecmp_ports == "emulated"


def prepare(cfg: RunConfig, label: Label = flag_label, in_matrix: bool = False) -> SimulationJob:
    """Validate a simulation (check_simulable), its output folder and the ports it replays."""
    checked, phases = check_simulable(cfg, in_matrix, label)
    ports = emulated_ports(cfg.ecmp_ports, len(checked.topo.hosts)) if cfg.ecmp_ports and not in_matrix else None
    cfg = replace(cfg, out=output_folder(cfg.out, RunFolder.RESULTS, "a run's results", cfg.force, "simulate"))
    # a matrix's jobs all wait before they run: each builds its plans again rather than hold them meanwhile
    return SimulationJob(cfg, replace(checked, cfg=cfg), ports, None if in_matrix else phases)


def check_size(checked: Checked, available: Optional[int] = None) -> None:
    """Refuse, before anything is built, a plan whose transfers, as rows of the flow model's arrays, would take more
    than this machine has (OptionError with the estimate); a plan made step by step (a ring's) is answered by steps
    and keeps no rows."""
    topo, algorithm, cfg = checked.topo, checked.algorithm, checked.cfg
    ranks = len(topo.hosts)
    if algorithm.generated_plan:
        return
    rows = algorithm.transfers(topo, checked.servers) if algorithm.transfers else 2 * ranks * (ranks - 1)
    need, have = rows * TRANSFER_BYTES, available if available is not None else available_memory()
    if have is not None and need > have * MEMORY_SHARE:
        raise OptionError(f"{topo.spec}: {cfg.algo} over {ranks} ranks is {rows:.2e} transfers, {gib(need)} as rows of "
                          f"the flow model's arrays (about {TRANSFER_BYTES} bytes each), over the {gib(have)} this "
                          f"machine has available; dmlbed theory answers at this size")


def check_simulable(cfg: RunConfig, in_compare: bool = False, label: Label = flag_label) -> Tuple[Checked, tuple]:
    """Validation for a simulated run: the run's own checks (no host cap, no memory for workers), a plan
    algorithm, its codec's payloads, an emulated run of the same topology to take ECMP ports from (in a compare
    config, 'emulated': its emulated row of the same label, which has not run yet). Also the plans it built."""
    checked = validate(cfg, label, emulated=False, workers=False)
    check_size(checked)
    if not checked.algorithm.simulable:
        raise OptionError(f"simulate runs the plan algorithms and those made of plans "
                          f"({', '.join(names_with(lambda a: a.simulable))}), not {cfg.algo}")
    try:
        with cycle_collection_paused():
            phases = checked.algorithm.codec_phases(checked.topo, tensor_sizes(cfg.model), checked.servers,
                                                    checked.options, checked.bw, cfg.codec, checked.codec_options,
                                                    tensor_shapes(cfg.model))
    except PlanError as exc:
        raise OptionError(str(exc)) from None
    check_modelled_compute(checked, label)
    if cfg.dilation != 1:
        raise OptionError("dilation applies to emulated runs only: a simulation has no real time to stretch")
    if cfg.cpu_hog:
        raise OptionError("--cpu-hog loads the machine under an emulated run: a simulation has no machine to load")
    if cfg.ecmp_ports == "emulated":
        if not in_compare:
            raise OptionError("--ecmp-ports emulated is for compare configs (the emulated row of the same label): "
                              "give an emulated run's folder")
    elif cfg.ecmp_ports:
        check_emulated_run(cfg.ecmp_ports, checked.topo.spec)
    return checked, phases


def check_emulated_run(run_dir: str, topology: str) -> None:
    """Refuse a folder that holds no finished run of this topology (for --ecmp-ports)."""
    summary = read_summary(run_dir)
    if summary is None:
        raise OptionError(f"--ecmp-ports {run_dir}: no summary.json there (give a finished emulated run's "
                          f"folder)")
    ran = summary.get("topology")
    if ran != topology:
        raise OptionError(f"--ecmp-ports {run_dir}: that run emulated {ran}, this simulation is of {topology}")


def emulated_ports(run_dir: str, ranks: int) -> Ports:
    """The TCP ports of every connection an emulated run used, by (rank, peer, stream), from its ranks'
    transfers."""
    ports = {(t["rank"], t["peer"], t["stream"]): tuple(t["ports"])
             for t in RunFolder(run_dir).ranks().read_transfers(ranks) if t["dir"] == "send" and t.get("ports")}
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


def simulate(cfg: RunConfig, log: Log = quiet) -> Summary:
    """Check and simulate one configuration (see execute)."""
    return execute(prepare(cfg), log)


class FlowRun:
    """One configuration on the flow model: its router (one per set of link rates), payload rates, latency, chunks,
    codec and background flows, and the synchronizations it simulates."""

    def __init__(self, job: SimulationJob, ports: Optional[Ports], theory_s: float):
        cfg, checked = job.cfg, job.checked
        self.cfg, self.checked, self.ports = cfg, checked, ports
        self.topo, self.bw = checked.topo, checked.bw
        self.rates = payload_rates(cfg, self.bw)
        self.latency = cfg.latency_us * 1e-6
        if cfg.calibration:  # the fitted model replaces goodput and latency
            self.rates, self.latency = load_calibration(cfg.calibration, self.topo.spec, self.bw).link_model(
                len(self.bw))
        self.routers: Dict[Tuple, Router] = {}
        self.router = self.router_for(checked.network.link_rates)
        self.chunk = CHUNK_BYTES if cfg.granularity == "chunk" else None
        self.codec = COMPRESSORS[cfg.codec]
        self.background = persistent_flows(checked.network.background, self.router, cfg.seed,
                                           horizon_s(cfg.iters, checked.compute.mean, theory_s))

    def router_for(self, link_rates) -> Router:
        """The router with these links off their level's rate (one per set of rates: events change them)."""
        key = rates_key(link_rates)
        if key not in self.routers:
            self.routers[key] = Router(self.topo, "hash" if self.ports else self.cfg.ecmp, self.ports,
                                       link_factors(self.topo, self.bw, link_rates))
        return self.routers[key]

    def plans_of(self, sizes):
        """The phases' plans for layers of these sizes."""
        c = self.checked
        with cycle_collection_paused():
            return c.algorithm.codec_phases(self.topo, sizes, c.servers, c.options, self.bw, self.cfg.codec,
                                            c.codec_options, shapes_for(self.cfg.model, sizes))

    def plan(self, plan, pieces, router: Router, **extra) -> FlowResult:
        """One plan's synchronization on a router's links."""
        return simulate_plan(plan, [n * 4 for n in pieces], router, self.rates, latency_s=self.latency,
                             chunk_bytes=self.chunk, link_delay_s=self.checked.impairment.link_delay_s(), **extra)

    def phases(self, phases, start_s: float = 0.0, on: Optional[Router] = None) -> FlowResult:
        """One synchronization starting at run time start_s: every phase's plan in turn, beside the background (on
        the network's links, or on those of `on`)."""
        done = []
        for plan, pieces in phases:
            done.append(self.plan(plan, pieces, on or self.router,
                                  wire_bits=None if self.codec.gathers else self.codec.wire_bits(plan),
                                  background=self.background, start_s=start_s + sum(r.gst_s for r in done),
                                  method=self.cfg.flow_method))
        return in_sequence(done)

    def synchronize(self, sizes) -> FlowResult:
        """One synchronization of layers of these sizes."""
        return self.phases(self.plans_of(sizes))

    def settings(self, share: float) -> Dict[str, object]:
        """The model's settings, for the summary."""
        cfg = self.cfg
        return {"goodput": share, "mtu": cfg.mtu, "latency_us": cfg.latency_us, "ecmp": self.router.ecmp,
                "ecmp_ports": cfg.ecmp_ports, "link_delay_ms": list(self.checked.impairment.delay_ms),
                "calibration": cfg.calibration, "rates_mbps": {f"L{l}": r * 8 / 1e6 for l, r in self.rates.items()},
                "granularity": cfg.granularity, "flow_method": cfg.flow_method,
                "unit": f"{CHUNK_BYTES >> 10} KiB chunks" if cfg.granularity == "chunk" else
                "one message per connection and step", "sharing": "max-min fair"}


def execute(job: SimulationJob, log: Log = quiet, progress: bool = True) -> Summary:
    """Simulate a checked configuration; writes summary.json, iterations.csv and links.csv to its --out."""
    cfg, checked = job.cfg, job.checked
    ports = job.ports
    if ports is None and cfg.ecmp_ports:  # a compare's emulated row of the same label has run by now
        try:
            ports = emulated_ports(cfg.ecmp_ports, len(checked.topo.hosts))
        except OptionError as exc:
            raise RuntimeError(str(exc)) from None
    started = time.time()
    top = head(checked)
    log(f"building the {cfg.algo} plan on {checked.topo.spec} ({len(checked.topo.hosts)} hosts)")
    run = FlowRun(job, ports, top.gst_theory_s)
    phases = job.phases or run.plans_of(tensor_sizes(cfg.model))
    log(f"simulating {len(phases)} plan(s), {sum(len(p.streams) for p, _ in phases)} stream(s) of "
        f"{sum(len(s) for p, _ in phases for s in p.streams)} steps")
    result = run.phases(phases)
    simulation = Simulation(model_settings=run.settings(link_goodput(cfg)), link_utilization={},
                            messages=result.messages, events=result.events,
                            rank_done_s={"min": min(result.rank_done_s), "max": max(result.rank_done_s)},
                            warmup=WARMUP, trace="", answered=result.answered())
    gst, iteration_s, split, beside = iteration_model(run, result, simulation)
    links = link_rows(run.router, result, {l: b * 1e6 / 8 for l, b in enumerate(run.bw)})
    simulation.link_utilization = level_utilization(links)
    # compute drawn per rank and iteration (or slow ranks): each training rank's times, drawn once
    table = checked.compute.table(checked.contributors, cfg.iters, cfg.seed) if checked.compute.varies else None
    gsts, background_bytes, syncs = iteration_gsts(run, phases, result, table, gst)
    computes, iterations = drawn_iterations(checked, table, gsts, iteration_s - gst)
    outcome = simulated_outcome(checked, gsts, computes, iterations, top.gst_theory_s, split, table, syncs)
    if checked.network.events:
        simulation.model_settings["events"] = ("each synchronization simulated on the link rates in force when it "
                                               "begins")
    traffic = simulated_traffic(run, phases, result, gsts, background_bytes)
    write_outputs(cfg.out, gsts, computes, iterations, links)
    if result.units is not None:
        write_json(RunFolder(cfg.out).file(RunFolder.TRACE),
                   simulated_trace(result, run.topo, cfg, run.bw, checked.compute.mean), indent=None)
        simulation.trace = "trace.json: one synchronization, simulated"
    else:
        simulation.trace = f"omitted: {result.messages} transfers (a timeline keeps up to {TRACE_UNITS})"
    traffic.duration_s = time.time() - started
    summary = Summary(top, beside, outcome, traffic=traffic, simulation=simulation)
    write_summary(cfg.out, summary.to_dict())
    return summary


def iteration_model(run: FlowRun, result: FlowResult, simulation: Simulation):
    """The GST, the iteration time and its split, and the models beside: one synchronization after the compute,
    the forward pass waiting for what it pulls (iBatch), or DDP's buckets as backward makes them ready (overlap)."""
    cfg, checked = run.cfg, run.checked
    gst, iteration_s, split, beside = result.gst_s, checked.compute.mean + result.gst_s, {}, Models()
    if checked.algorithm.forward_phase is not None:  # the forward pass waits for what it pulls (iBatch)
        forward = simulated_forward(cfg, checked, lambda plan, pieces: run.plan(plan, pieces, run.router).gst_s)
        iteration_s = forward["total_s"] + checked.compute.mean * (1 - FORWARD_SHARE) + gst
        split = {"forward_phase_s": forward["total_s"], **{k: forward[k] for k in
                                                            ("overlapped_s", "comm_exposed_s", "compute_exposed_s")}}
        simulation.forward_phase = forward
    overlap = overlap_model(checked, lambda sizes: run.synchronize(sizes).gst_s)
    if overlap:  # buckets synchronized one after another as backward makes them ready
        gst, iteration_s, split = overlap["gst_s"], overlap["iteration_s"], {"exposed_s": overlap["exposed_s"]}
        simulation.overlap = overlap
        beside = Models(**overlap_theory(checked))
    return gst, iteration_s, split, beside


def iteration_gsts(run: FlowRun, phases, result: FlowResult, table, gst: float):
    """Each iteration's GST, the background flows' bytes and (with link events) each iteration's synchronization:
    each iteration on the links in force when it begins (the same synchronization for the same links), or meeting
    the on/off flows at its time; else every iteration the one synchronization."""
    checked = run.checked
    events, varies = checked.network.events, background_varies(checked.network.background)
    if events:
        same: Dict[Tuple, FlowResult] = {}

        def synchronize_at(t: float, i: int) -> FlowResult:
            link_rates = rates_in_force(checked.network.link_rates, events, i, t)
            key = rates_key(link_rates)
            if varies or key not in same:
                same[key] = run.phases(phases, t, run.router_for(link_rates))
            return same[key]
        return timed_synchronizations(checked, table, synchronize_at)
    if varies:  # each synchronization meets the flows on or off at its time
        return timed_synchronizations(checked, table, lambda t, i: run.phases(phases, t))
    return [gst] * run.cfg.iters, [b * run.cfg.iters for b in result.background_bytes or []], None


def simulated_outcome(checked: Checked, gsts, computes, iterations, theory_s: float, split, table, syncs) -> Outcome:
    """The outcome section of a simulation."""
    gst, iteration = median_after_warmup(gsts), median_after_warmup(iterations)
    outcome = Outcome(mode=MODE, iterations=len(gsts), gst_median_s=gst, gst_ratio=gst / theory_s if theory_s else None,
                      compute_median_s=median_after_warmup(computes),
                      iteration_median_s=iteration, period_median_s=iteration,  # iterations run back to back
                      jct_s=sum(iterations), correct=None, replicas_identical=None, sum_verified=None,
                      error=None, completed=True,
                      fidelity={"verdict": "simulated", "cause": "flow-level model: no packets moved"},
                      split_median_s=split)
    events = checked.network.events
    if table is not None or background_varies(checked.network.background) or events:
        outcome.iteration_mean_s = mean_after_warmup(iterations)
    if events:
        outcome.link_events = event_rows(checked, gsts, [took_effect(e, syncs) for e in events])
    if table is not None:
        outcome.stragglers = straggler_report(table, table, [h.name for h in checked.topo.hosts], WARMUP)
    return outcome


def simulated_traffic(run: FlowRun, phases, result: FlowResult, gsts, background_bytes) -> Traffic:
    """The traffic section of a simulation: bytes by level over the run, the payload against fp32."""
    cfg, share = run.cfg, link_goodput(run.cfg)
    by_level: Dict[str, float] = {}
    for (_, level), sent in result.host_tx_bytes.items():
        by_level[f"L{level}"] = by_level.get(f"L{level}", 0.0) + sent / share * cfg.iters
    sent = sum(result.host_tx_bytes.values())
    if run.codec.gathers or run.codec.lowrank:  # what a rank sends over its dense gradient
        ratio = run.codec.payload_fraction((tensor_shapes if run.codec.lowrank else tensor_sizes)(cfg.model),
                                           typed_options(run.codec, run.checked.codec_options))
    else:
        ratio = wire_ratio(phases, run.codec)
    traffic = Traffic(shaped_mbps=list(run.bw), bytes_by_level=by_level, payload_fp32_bytes=sent / ratio * cfg.iters,
                      payload_sent_bytes=sent * cfg.iters, wire_ratio=ratio, duration_s=0.0)
    traffic.wire_payload_ratio = ratio
    if run.background:
        traffic.background = simulated_background(run.checked.network.background, run.background, background_bytes,
                                                  gsts)
    return traffic


def write_outputs(out: str, gsts, computes, iterations, links) -> None:
    """A simulation's iterations.csv and links.csv (earlier results in the folder removed first)."""
    os.makedirs(out, exist_ok=True)
    clear(out, RunFolder.RESULTS)
    write_iterations(out, [{"iteration": i, "gst_s": gsts[i], "compute_s": computes[i],
                            "iteration_s": iterations[i]} for i in range(len(gsts))], decimals=9)
    write_atomic_csv(RunFolder(out).file(RunFolder.LINKS), ["link", "level", "links", "payload_bytes", "busy_s",
                                                            "utilization"],
                     ([r["link"], r["level"], r["links"], f"{r['payload_bytes']:.0f}", f"{r['busy_s']:.9f}",
                       "" if r["utilization"] is None else f"{r['utilization']:.4f}"] for r in links))


def drawn_iterations(checked: Checked, table: Optional[Dict[int, List[float]]], gsts: Sequence[float],
                     before_sync_s: float) -> Tuple[List[float], List[float]]:
    """Each iteration's mean compute over the training ranks and its time: with the ranks' drawn compute (table),
    BSP's synchronization starts when the last rank's compute ends (the slowest draw, then that iteration's GST);
    else the fixed model's time before the synchronization (before_sync_s), then the GST."""
    if table is None:
        return [checked.compute.mean] * len(gsts), [before_sync_s + g for g in gsts]
    columns = list(zip(*table.values()))
    return [sum(c) / len(c) for c in columns], [max(c) + g for c, g in zip(columns, gsts)]


def timed_synchronizations(checked: Checked, table: Optional[Dict[int, List[float]]],
                           synchronize_at: Callable[[float, int], FlowResult]
                           ) -> Tuple[List[float], List[float], List[float]]:
    """Every iteration's synchronization simulated at its own run time (compute, then the GST, one after another),
    for background flows that turn on and off or links that change: each iteration's GST, the bytes each flow moved
    in all of them, and when each synchronization began."""
    t, gsts, moved, syncs = 0.0, [], None, []
    columns = list(zip(*table.values())) if table is not None else None
    for i in range(checked.cfg.iters):
        t += max(columns[i]) if columns is not None else checked.compute.mean
        syncs.append(t)
        result = synchronize_at(t, i)
        gsts.append(result.gst_s)
        t += result.gst_s
        got = result.background_bytes or []
        moved = got if moved is None else [a + b for a, b in zip(moved, got)]
    return gsts, moved or [], syncs


def simulated_background(flows, persistent, moved: Sequence[float], gsts: Sequence[float]) -> List[dict]:
    """Per injected flow: its kind, path, and its mean rate while the job synchronized (the flow model follows
    the flows only then)."""
    busy = sum(gsts)
    return [{"flow": f.name, "given": f.shown(), "kind": f.kind, "path": [">".join(h) for h in p.hops],
             "mbps_during_sync": round(m * 8 / busy / 1e6, 3) if busy else None}
            for f, p, m in zip(flows, persistent, moved)]


def simulated_forward(cfg: RunConfig, checked: Checked, pull_s: Callable) -> dict:
    """The algorithm's forward phase in the flow model: the device's forward share of --compute-time, split over
    the layers by their FLOPs (by parameters for a model without them)."""
    counts, sizes = layer_tensor_counts(cfg.model), tensor_sizes(cfg.model)
    flops = tensor_flops(cfg.model) or [float(n) for n in sizes]
    bounds = [sum(counts[:i]) for i in range(len(counts) + 1)]
    layer_sizes = [sum(sizes[a:b]) for a, b in zip(bounds, bounds[1:])]
    layer_flops = [sum(flops[a:b]) for a, b in zip(bounds, bounds[1:])]
    total = sum(layer_flops) or 1.0
    forward_s = [checked.compute.mean * FORWARD_SHARE * f / total for f in layer_flops]
    algorithm = checked.algorithm
    return algorithm.forward_phase(checked.topo, checked.servers, checked.sync.typed,
                                   layer_sizes, forward_s, pull_s)


def wire_ratio(phases, codec) -> float:
    """Payload bytes sent over fp32 bytes, over every transfer of the phases' plans (1 without a codec)."""
    packing = [codec.wire_bits(plan) for plan, _ in phases]
    if not any(packing):
        return 1.0
    fp32 = wire = 0.0
    for (plan, pieces), bits in zip(phases, packing):
        piece_bytes = [n * 4 for n in pieces]
        for s, stream in enumerate(plan.streams):
            for n, step in enumerate(stream):
                for t in step:
                    fp32 += piece_bytes[t.piece]
                    wire += piece_bytes[t.piece] * (bits[(s, n, t.src, t.dst, t.piece)] / 32 if bits else 1.0)
    return wire / fp32 if fp32 else 1.0


def simulated_trace(result: FlowResult, topo, cfg: RunConfig, bw, compute: float) -> dict:
    """The timeline of one simulated iteration (compute, then the synchronization's transfers), in the same
    trace event format as a real run's."""
    latency = cfg.latency_us * 1e-6
    rows = {r: [{"iteration": 0, "start": 0.0, "end": compute + result.gst_s, "compute_s": compute,
                 "sync_start": compute, "sync_end": compute + done}] for r, done in enumerate(result.rank_done_s)}
    stream, step, src, dst, size, start, end, level = (np.asarray(c) for c in zip(*result.units)) if result.units \
        else (np.zeros(0, dtype=np.int64),) * 8
    count = len(src)

    def twice(c):
        return np.concatenate([c, c])
    traces = Sides(np.concatenate([src, dst]), np.concatenate([dst, src]), np.repeat([True, False], count),
                   twice(stream).astype(np.int64), twice(step).astype(object), twice(level).astype(object),
                   twice(size).astype(float), twice(size).tolist(), ["simulated"] * (2 * count),
                   np.zeros(2 * count, dtype=object), compute + twice(start).astype(float),
                   compute + np.concatenate([end, end + latency]).astype(float))
    return chrome_trace(rows, traces, [h.name for h in topo.hosts], 1.0, list(bw))


class Simulate:
    """The simulate back end."""

    mode = MODE
    prepare = staticmethod(prepare)
    execute = staticmethod(execute)


BACKEND = Simulate()
