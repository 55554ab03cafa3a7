"""A transformer job under tensor, pipeline and data parallelism (`--parallel`) in closed form (theory) and on the
flow model (simulate): per kind of traffic its bytes, its time on the critical path, each stage's bubble and the
iteration. The flow model times each kind's phase with all its groups at once on the topology (every tensor-parallel
ring, every stage boundary's send, every data-parallel ring) and the schedule's timeline composes the phases; it
does not put different kinds' traffic on the links at the same time."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Dict, Sequence

from emulation.backends.base import Log, quiet
from emulation.core.compute import compute_model
from emulation.simulation.group_placement import placed
from emulation.core.link_rates import factors as link_factors
from emulation.core.topology import Topology, job_view, parse_hosts
from emulation.results.files import write_summary
from emulation.results.parallel_summary import ParallelSummary
from emulation.results.provenance import provenance
from emulation.run.options import Label, OptionError, RunConfig, flag_label
from emulation.run.outputs import output_folder
from workloads.runfolder import RunFolder
from emulation.run.resolution import payload_rates
from emulation.run.validation import check_network, check_values
from emulation.simulation.jobs_model import TimedJob, simulate_jobs
from emulation.simulation.parallel_theory import (KINDS_SUMMED, ParallelJob, kind_level_bytes, kind_rates_Bps,
                                                  parallel_theory)
from emulation.simulation.pipeline_timeline import Timeline, pipeline_timeline
from emulation.simulation.routes import Router
from workloads.algorithms import ALGORITHMS
from workloads.collectives import COLLECTIVES
from workloads.parallel_layout import Layout, LayoutError, parse_layout
from workloads.transformer import TransformerError, parse_transformer

RING = "ring"  # the tensor- and data-parallel sums (NCCL's ring, as Megatron-LM runs them)


@dataclass(frozen=True)
class ParallelRun:
    """A --parallel configuration checked: the job, the topology its ranks sit on (rank r on hosts[r]), the link
    rates and each micro-batch's compute per stage."""
    cfg: RunConfig
    job: ParallelJob
    topo: Topology
    hosts: tuple
    bw: tuple
    link_rates: object
    compute_s: float

    @property
    def replays_sibling(self) -> bool:
        """A parallel job takes no TCP ports from another row."""
        return False


def placed_layout(layout: Layout, rule: str, topo: Topology, hosts: tuple, label: Label) -> Layout:
    """The layout numbered by a --placement rule (OptionError when the hosts' racks cannot hold it)."""
    try:
        return placed(layout, rule, topo, hosts)
    except LayoutError as exc:
        raise OptionError(str(exc).replace("--placement", label("placement"))
                          .replace("--parallel", label("parallel"))) from None


def prepare(cfg: RunConfig, mode: str, label: Label = flag_label) -> ParallelRun:
    """Validate a --parallel configuration: the layout against the hosts and the model, the batch against the
    micro-batches, a fixed compute time, (emulate) a rank on every host, and (simulate, emulate) the results folder
    (OptionError naming what is wrong and what is valid)."""
    check_values(cfg, label)
    network = check_network(cfg, label, emulated=mode == "emulate")
    try:
        model, layout = parse_transformer(cfg.model), parse_layout(cfg.parallel)
    except (TransformerError, LayoutError) as exc:
        raise OptionError(str(exc).replace("--model", label("model")).replace("--parallel", label("parallel")))
    hosts = parse_hosts(cfg.hosts, network.topo, label("hosts")) or tuple(h.name for h in network.topo.hosts)
    if cfg.placement and layout.ranks == len(hosts):  # a count that does not fit is said below
        layout = placed_layout(layout, cfg.placement, network.topo, hosts, label)
    if mode == "emulate" and (cfg.local or cfg.hosts or layout.ranks != len(network.topo.hosts)):
        raise OptionError(f"{label('parallel')} {layout.label}: the emulated job runs one rank on every host of "
                          f"{network.topo.spec} ({len(network.topo.hosts)}) on its network (give degrees whose "
                          f"product is that, without {label('hosts')} or {label('local')})")
    if layout.ranks > len(network.topo.hosts):
        raise OptionError(f"{label('parallel')} {layout.label}: tp x pp x dp = {layout.ranks} ranks, but "
                          f"{network.topo.spec} has {len(network.topo.hosts)} hosts (one rank per host: give degrees "
                          f"whose product is at most that, or a larger topology)")
    if layout.ranks != len(hosts):
        raise OptionError(f"{label('parallel')} {layout.label}: tp x pp x dp = {layout.ranks} ranks, but the job "
                          f"has {len(hosts)} hosts on {network.topo.spec} (give {label('hosts')} with "
                          f"{layout.ranks} of them, or degrees whose product is {len(hosts)})")
    try:
        layout.check(layout.ranks, model.layers, model.heads)
    except LayoutError as exc:
        raise OptionError(str(exc).replace("--parallel", label("parallel"))) from None
    if cfg.batch % cfg.micro_batches:
        raise OptionError(f"{label('batch')} {cfg.batch} does not split into {label('micro_batches')} "
                          f"{cfg.micro_batches} equal micro-batches (give a batch that is a multiple of it)")
    if cfg.algo != RING:
        raise OptionError(f"{label('algo')} {cfg.algo}: a parallel job's data-parallel sum runs {RING} here "
                          f"(give {label('algo')} {RING})")
    compute = compute_model(cfg.compute_time, cfg.slow, {h.name: h.index for h in network.topo.hosts})
    if compute.varies:
        raise OptionError(f"{label('compute_time')} {cfg.compute_time}: a parallel job takes one fixed time per "
                          f"micro-batch and stage, forward and backward (e.g. 0.05)")
    if mode == "emulate" and compute.mean <= 0:
        raise OptionError(f"{label('compute_time')} {cfg.compute_time}: the emulated ranks hold a device's time per "
                          f"micro-batch and stage, and the flow model they are judged against takes the same (give "
                          f"seconds, e.g. 0.05; this machine's own compute is not a device's)")
    job = ParallelJob(model, layout, cfg.micro_batches, cfg.batch // cfg.micro_batches, cfg.pipeline)
    if mode in ("simulate", "emulate"):
        cfg = replace(cfg, out=output_folder(cfg.out, (RunFolder.SUMMARY,), "a run's results", cfg.force, mode))
    return ParallelRun(cfg, job, network.topo, hosts, tuple(network.bw), network.link_rates, compute.mean)


def execute(run: ParallelRun, mode: str, log: Log = quiet) -> dict:
    """The closed form (mode theory) or the flow model (simulate), as a summary written to --out if given."""
    router = router_of(run, "spread")
    rates = kind_rates_Bps(router, run.job.layout, run.hosts, payload_rates(run.cfg, run.bw))
    levels = kind_level_bytes(router, run.job.layout, run.hosts, run.job.bytes_per_kind())
    theory = parallel_theory(run.job, [run.compute_s], rates)
    if mode == "theory":  # the formula's span and bubbles; the timeline only lays its passes out for the report
        timeline = pipeline_timeline(run.job.schedule, run.job.micro_batches, theory.forward_s, theory.backward_s,
                                     [theory.send_s] * (run.job.layout.pp - 1), theory.dp_s)
        phases = {"tp": theory.tp_allreduce_s, "pp": theory.send_s, "dp": list(theory.dp_s)}
        span, bubbles, iteration = theory.pipeline_s, theory.bubbles, theory.iteration_s
    else:
        log("flow model: every group of each kind at once")
        phases = flow_phases(run)
        timeline = phased_timeline(run, phases)
        span, bubbles, iteration = max(timeline.finished), timeline.bubbles(), timeline.iteration
    summary = summarize(run, mode, timeline, phases, (span, bubbles, iteration), theory, levels)
    if run.cfg.out:
        os.makedirs(run.cfg.out, exist_ok=True)
        write_summary(run.cfg.out, summary.to_dict())
    return summary


def router_of(run: ParallelRun, ecmp: str) -> Router:
    """The flow model's routes on the job's network (ecmp: spread evenly over equal-cost links, or as asked)."""
    return Router(run.topo, ecmp, None, link_factors(run.topo, run.bw, run.link_rates))


def flow_phases(run: ParallelRun) -> Dict[str, object]:
    """Seconds of one tensor-parallel all-reduce, one stage-to-stage send and each stage's data-parallel sum (the
    slowest group), every group of the kind on the network at once."""
    rates, router = payload_rates(run.cfg, run.bw), router_of(run, run.cfg.ecmp)
    index = {h.name: h.index for h in run.topo.hosts}
    layout, job = run.job.layout, run.job
    sums = [(0, g, job.activation_bytes) for g in layout.groups("tp")]
    sends = [(0, [g[s], g[s + 1]], job.activation_bytes) for g in layout.groups("pp") for s in range(len(g) - 1)]
    dps = [(layout.stage_of(g[0]), g, job.gradient_bytes(layout.stage_of(g[0]))) for g in layout.groups("dp")]
    out: Dict[str, object] = {}
    for kind, batch, slots in (("tp", sums, 1), ("pp", sends, 1), ("dp", dps, layout.pp)):
        slowest = [0.0] * slots
        batch = [(slot, ranks, nbytes) for slot, ranks, nbytes in batch if len(ranks) > 1]
        timed = [timed_group(run, f"{kind}-{i}", ranks, nbytes, index) for i, (_, ranks, nbytes) in enumerate(batch)]
        if timed:
            got = simulate_jobs(timed, 1, router, rates, run.cfg.latency_us * 1e-6)
            for (slot, _, _), t in zip(batch, timed):
                slowest[slot] = max(slowest[slot], got.gsts(t.name)[0])
        out[kind] = slowest if kind == "dp" else slowest[0]
    return out


def timed_group(run: ParallelRun, name: str, ranks: Sequence[int], nbytes: int, index: Dict[str, int]) -> TimedJob:
    """One group's collective on its hosts: a ring all-reduce of nbytes, or with two ranks of a pipeline a send."""
    names = [run.hosts[r] for r in ranks]
    if name.startswith("pp"):
        op = COLLECTIVES["broadcast"]
        plan, elements = op.plan("direct", 2), op.op_pieces(nbytes, 2)
    else:
        plan = ALGORITHMS[RING].build_plan(job_view(run.topo, names), 0)
        elements = plan.piece_sizes([nbytes // 4])
    return TimedJob(name, plan, tuple(index[n] for n in names), tuple(4 * n for n in elements), 0.0)


def phased_timeline(run: ParallelRun, phases: Dict[str, float]) -> Timeline:
    """The schedule's timeline with the flow model's phase times: each pass its compute and its layers' two
    tensor-parallel all-reduces."""
    job, c = run.job, run.compute_s
    tp = 2 * job.layers_per_stage * phases["tp"]
    p = job.layout.pp
    return pipeline_timeline(job.schedule, job.micro_batches, [c / 3 + tp] * p, [2 * c / 3 + tp] * p,
                             [phases["pp"]] * (p - 1), phases["dp"])


def summarize(run: ParallelRun, mode: str, timeline: Timeline, phases: Dict[str, object], answer: tuple,
              theory, levels: Dict[str, Dict[int, float]]) -> ParallelSummary:
    """The summary: the job, per kind its bytes (and per link level) and its time on the critical path, each stage's
    bubble, the iteration, the closed form beside it and the timeline's spans (answer: the pipeline's span, each
    stage's bubble and the iteration, as this mode gives them)."""
    job, layout = run.job, run.job.layout
    m, p = job.micro_batches, layout.pp
    dp = phases["dp"]
    span, bubbles, iteration = answer
    critical = {"tp": 2 * 2 * job.layers_per_stage * phases["tp"] * (m + p - 1),
                "pp": 2 * (p - 1) * phases["pp"], "dp": dp[0]}
    return ParallelSummary(
        mode=mode, topology=run.topo.spec, model=job.model.label, parallel=layout.label,
        placement=run.cfg.placement or None, schedule=job.schedule,
        micro_batches=m, micro_batch_size=job.micro_batch_size, ranks=layout.ranks, parameters=job.model.parameters,
        compute_per_micro_batch_s=run.compute_s, bytes_per_kind=job.bytes_per_kind(),
        bytes_per_level={kind: {str(level): round(b) for level, b in by.items()} for kind, by in levels.items()},
        critical_path_s=critical,
        phase_s={"tp_allreduce": phases["tp"], "pp_send": phases["pp"], "dp_sum_per_stage": dp},
        bubble_per_stage=bubbles, bubble_formula=(p - 1) / (m + p - 1),
        pipeline_s=span, iteration_s=iteration, iteration_theory_s=theory.iteration_s,
        over_theory=iteration / theory.iteration_s if theory.iteration_s else None,
        timeline=[[s.stage, s.kind, s.micro_batch, round(s.start, 9), round(s.end, 9)] for s in timeline.spans],
        kinds=list(KINDS_SUMMED), provenance=provenance(), out=run.cfg.out or None)


def print_parallel(summary: ParallelSummary) -> None:
    """The summary for a person."""
    s = summary.to_dict()
    print(f"{s['model']} ({s['parameters'] / 1e6:,.1f}M parameters) on {s['topology']}, {s['parallel']}, "
          f"{s['schedule']}, {s['micro_batches']} micro-batches of {s['micro_batch_size']} ({s['mode']})")
    if s["mode"] == "emulate":
        fid = s["fidelity"] or {}
        print(f"  correct {s['correct']} (largest weight difference from the unsplit model "
              f"{s['max_weight_difference']}); fidelity {fid.get('verdict')}"
              f"{': ' + fid['cause'] if fid.get('cause') else ''}; dilation {s['dilation']:g}")
        if s["iteration_s"] is None:
            print(f"  nothing measured: {s['error']}")
            return
        print(f"  iteration {s['iteration_s']:.4f} s measured, flow model {s['flow_model_iteration_s']:.4f} s "
              f"({s['over_flow_model']:.3f}x), closed form {s['iteration_theory_s']:.4f} s")
    else:
        print(f"  iteration {s['iteration_s']:.4f} s (closed form {s['iteration_theory_s']:.4f} s)")
    print(f"  pipeline {s['pipeline_s']:.4f} s, bubble {max(s['bubble_per_stage']):.3f} of the pipeline "
          f"((p-1)/(m+p-1) = {s['bubble_formula']:.3f})")
    for kind in s["kinds"]:
        levels = ", ".join(f"level {level} {b / 2**20:,.1f}" for level, b in s["bytes_per_level"][kind].items())
        print(f"  {kind}: {s['bytes_per_kind'][kind] / 2**20:,.1f} MiB sent, {s['critical_path_s'][kind]:.4f} s on "
              f"the critical path; MiB on the links of each level: {levels or 'none'}")

