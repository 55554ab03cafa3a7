"""The emulate back end (`dmlbed run`, a compare row's mode emulate): one training rank per host of an emulated
network (or of loopback processes with --local) -> summary.json, iterations.csv, workers.csv, trace.json."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, replace

from emulation.backends.base import Job, Log, quiet
from emulation.core.background import horizon_s
from emulation.results import fidelity, links
from emulation.run.background_traffic import BackgroundTraffic, write_series
from emulation.run.event_schedule import EventSchedule, apply_event
from emulation.core.events import DOWN, with_events
from emulation.backends.events_report import event_rows, flows_across, measured_schedule, recovery
from emulation.run.link_probes import LinkProbes
from emulation.run.forkclient import rank_start, ranks_started_by
from emulation.run.lifecycle import Lifecycle
from emulation.run.options import Label, RunConfig, flag_label
from emulation.run.outputs import check_space, clear, default_parent, output_folder
from emulation.run.ranks import memory_of, rank_configs, start_ranks, watch_training
from emulation.results.iterations import (WARMUP, dilate, mean_after_warmup, per_iteration, period_median,
                                         straggler_report)
from emulation.results.files import write_iterations, write_workers
from emulation.run.sampling import counter_gains, first_iteration_s
from emulation.results.summary import Emulation, Summary, measured
from emulation.backends.heads import head, models
from emulation.backends.scenario_model import replayed_events, scenario_model
from emulation.results.trace import write_trace
from emulation.run.validation import validate
from emulation.simulation.background_model import varies as background_varies
from emulation.simulation.calibrated import calibrated_ratio
from workloads.models import parameter_count_of
from workloads.runfolder import RankRecords, RunFolder
from workloads.verify import MAX_CHECK_BYTES, verify

MODE = "emulate"


@dataclass(frozen=True)
class RunJob(Job):
    """A run checked before anything starts."""


def prepare(cfg: RunConfig, label: Label = flag_label, in_matrix: bool = False) -> RunJob:
    """Validate a run and its output folder (OptionError and its kin, all ValueErrors, name what is wrong)."""
    checked = validate(cfg, label)
    check_space(cfg.out or default_parent("run"),
                output_bytes(len(checked.topo.hosts), cfg.iters, parameter_count_of(cfg.model) * 4))
    cfg = replace(cfg, out=output_folder(cfg.out, RunFolder.RESULTS, "a run's results", cfg.force, "run"))
    return RunJob(cfg, replace(checked, cfg=cfg))


def output_bytes(ranks: int, iterations: int, gradient_bytes: int) -> int:
    """About what a run writes at its peak: each rank's records and transfers per iteration (8 KiB per rank and
    iteration measured for PS and ring on star:4 and star:9), its first iteration's result checks (input and
    output, removed once compared), the CSVs, timeline and summary (64 KiB)."""
    checks = 2 * gradient_bytes if gradient_bytes <= MAX_CHECK_BYTES else 0
    return (64 << 10) + ranks * (iterations * (8 << 10) + checks)


def run(cfg: RunConfig, log: Log = quiet, progress: bool = True) -> Summary:
    """Check and run one experiment end to end (see execute)."""
    return execute(prepare(cfg), log, progress)


def execute(job: RunJob, log: Log = quiet, progress: bool = True) -> Summary:
    """Run a checked experiment with its ranks started as it asks (see run_job)."""
    with ranks_started_by(job.cfg.rank_start):
        return run_job(job, log, progress)


def started_line(cfg: RunConfig, topo, workers: int) -> str:
    """What a run says when its workers start (and, dilated, how its times are reported)."""
    return f"started {workers} workers: {cfg.algo} on {topo.spec}, {cfg.model}, batch {cfg.batch}" + (
        f"; time dilation {cfg.dilation:g}: links shaped to 1/{cfg.dilation:g} of their rate and compute "
        f"stretched alike, so progress shows emulated seconds and results divide them by {cfg.dilation:g}"
        if cfg.dilation != 1 else "")


def run_job(job: RunJob, log: Log = quiet, progress: bool = True) -> Summary:
    """Run a checked experiment in one lifecycle (lock, fork server, hosts, CPU sampler); summary.json is written
    even when it fails (with `error`)."""
    cfg, checked = job.cfg, job.checked
    network = checked.network
    topo = checked.topo
    folder = RunFolder(cfg.out)
    files = folder.ranks()
    top, beside = head(checked), models(checked)
    emulation = Emulation(dilation=cfg.dilation, data=cfg.data)
    state = {"started": time.time(), "spawned": time.time(), "port_drops": {}, "placement": {},
             "startup": {"method": rank_start()}}
    traffic = BackgroundTraffic(network.background, cfg.out, cfg.seed, cfg.dilation,
                                horizon_s(cfg.iters, checked.compute.mean, top.gst_theory_s),
                                network.tcp.congestion_control, network.tcp.socket_buffer_bytes)
    state["traffic"] = traffic
    probes = state["probes"] = LinkProbes(checked.network.topo, network.events, cfg.out)

    def body(life: Lifecycle) -> None:
        hosts = life.hosts
        describe_hosts(hosts, emulation)
        state["placement"] = hosts.placement
        traffic.start(hosts, lambda name: topo.node(name).ip)
        probes.start(hosts, lambda name: checked.network.topo.node(name).ip)
        state["spawned"] = time.time()
        procs = start_ranks(hosts, files, rank_configs(checked, os.path.abspath(files.path)), server=life.server)
        log(started_line(cfg, topo, len(procs)))
        drops_before = hosts.port_drops()
        schedule = state["events"] = EventSchedule(network.events, files, len(topo.hosts), cfg.dilation,
                                                   lambda event: apply_event(hosts, event, cfg.dilation))
        schedule.start()
        try:
            with life.sampling():
                watch_training(procs, files, topo, cfg.iters,
                               stall_s=(cfg.timeout + 3 * top.gst_theory_s) * cfg.dilation,
                               progress=f"{cfg.algo} on {topo.spec}" if progress else None,
                               on_first_iteration=lambda: state["startup"].update(memory=memory_of(procs)))
        finally:
            schedule.stop()
            probes.stop(hosts)
            traffic.stop(hosts)
        if schedule.error is not None:
            raise RuntimeError(f"applying a link event failed: {schedule.error}")
        emulation.packet_in = hosts.packet_ins()
        state["reroutes"] = hosts.reroutes()
        state["port_drops"] = counter_gains(drops_before, hosts.port_drops())

    def finish(life: Lifecycle) -> Summary:
        records = files.read_all(len(topo.hosts))
        return summary_of(job, records, life, top, beside, emulation, state)

    def start() -> None:
        os.makedirs(cfg.out, exist_ok=True)
        clear(cfg.out, RunFolder.RESULTS)
        shutil.rmtree(files.path, ignore_errors=True)
        os.makedirs(files.path)

    return Lifecycle(network, log, folder.file(RunFolder.SUMMARY), fork_server=files).run(body, finish, start)


def describe_hosts(hosts, emulation: Emulation) -> None:
    """What the hosts came up as, into the emulation section: datapath, shaping, controller, TCP, impairment and,
    across machines, the cluster."""
    emulation.datapath, emulation.shaping = hosts.datapath, hosts.shaping
    emulation.controller, emulation.tcp = hosts.controller_summary(), hosts.tcp_summary()
    emulation.impairment = hosts.impairment_summary()
    if hosts.placement:
        emulation.cluster = hosts.cluster_summary()


def summary_of(job: RunJob, records: RankRecords, life: Lifecycle, top, beside, emulation: Emulation,
               state: dict) -> Summary:
    """A finished (or failed) run's summary from its ranks' records, read once; also its CSVs and trace.json."""
    cfg, checked = job.cfg, job.checked
    topo, shaped, error = checked.topo, list(checked.shaped), life.error
    emulated_topo = None if cfg.local else topo
    raw = per_iteration(records.rows, checked.contributors, emulated_topo)
    iterations = dilate(raw, cfg.dilation)
    write_iterations(cfg.out, iterations)
    write_workers(cfg.out, records.rows, emulated_topo)
    write_trace(cfg.out, records, [h.name for h in topo.hosts], cfg.dilation, shaped)
    checks = verify(RunFolder(cfg.out).ranks().checks) if error is None else {}
    m = measured(iterations, records.finals, checked.contributors, checks, error, cfg.dilation,
                 period_median(records.rows, checked.contributors, cfg.dilation))
    theory_s = top.gst_theory_s
    traffic = state["traffic"]
    window = links.measured_window(records.rows, WARMUP)
    events = checked.network.events
    schedule = state.get("events")
    effect, applied, in_force = measured_schedule(checked, raw, records.rows, [
        schedule.applied.get(n) if schedule else None for n in range(len(events))], cfg.dilation) if events else \
        ((), (), None)
    verdict = fidelity.report(fidelity.Evidence(
        topo, shaped, theory_s * cfg.dilation, raw, records.rows, records.transfers, records.finals,
        life.cpu.report(window), not cfg.local, switch_port_drops=state["port_drops"], placement=state["placement"],
        link_rates=checked.network.shaped_link_rates, stragglers=checked.compute.varies, background=traffic.foreign(),
        network=checked.network.topo, schedule=in_force, filtered=top.gst_theory_filtered is True,
        scenario=None if cfg.local or error is not None else state.get("scenario") or scenario_model(
            cfg, len(topo.hosts), replayed_events(events, effect) if events else None)))
    life.log(fidelity.one_line(verdict))
    m.fill(emulation)
    emulation.rank_start = dict(state["startup"], first_iteration_s=first_iteration_s(records.rows, state["spawned"]))
    emulation.hosts_up = life.hosts is not None
    outcome = m.outcome(MODE, theory_s, verdict, cfg.iters)
    if checked.compute.varies:
        outcome.stragglers = measured_stragglers(records.rows, checked, cfg.dilation)
    traffic_out = m.traffic(shaped, time.time() - state["started"])
    if checked.network.background:
        traffic_out.background = traffic.report(window)
        write_series(cfg.out, traffic.series())
    if checked.compute.varies or background_varies(checked.network.background) or events:
        outcome.iteration_mean_s = mean_after_warmup([it["iteration_s"] for it in iterations])
    if events:
        outcome.link_events = event_rows(checked, [it["gst_s"] for it in iterations], effect, applied)
        walls = [schedule.applied.get(n) if schedule else None for n in range(len(events))]
        for n, row in enumerate(outcome.link_events):
            if walls[n] is not None:
                row.update(failure_fields(checked, events[n], walls, n, raw, records.transfers, state, cfg.dilation))
    summary = Summary(top, beside, outcome, traffic=traffic_out, emulation=emulation, extras=m.extras)
    if cfg.calibration:
        emulation.gst_ratio_calibrated = calibrated_ratio(summary)
    return summary


def failure_fields(checked, event, walls, n: int, raw, transfers, state: dict, dilation: float) -> dict:
    """A link event in an emulated run: what it did to the iterations (recovery) and how many of the job's
    connections crossed the link in the iteration before; for a link taken down also the probes' data-plane outage
    and the controller's reroute."""
    at = walls[n]
    until = min((w for w in walls[n + 1:] if w is not None and w > at), default=None)
    out = recovery(raw, at, until, dilation)
    hit = out.get("affected_iteration")
    if hit:  # routed as the links were then (a link down before it: around it)
        earlier = [e for e, w in zip(checked.network.events, walls) if w is not None and w < at]
        paths = links.Paths(checked.topo, with_events(checked.network.link_rates, earlier), checked.network.topo)
        out["connections_across_before"] = flows_across(paths, transfers, event.link, hit - 1)
    took = state["events"].took.get(n) if state.get("events") else None
    if took is not None:
        out["applied_in_s"] = round(took, 4)
    if event.state != DOWN:
        return out
    out["data_plane"] = state["probes"].outage(event.link, at, until)
    name = "-".join(event.link)
    reroute = next((r for r in state.get("reroutes", []) if r["link"] == name and r["state"] == DOWN and
                    r["port_status_at"] >= at - 0.5), None)
    if reroute and reroute["messages"]:
        out["controller"] = {"port_status_after_s": round(reroute["port_status_at"] - at, 4),
                             "flow_mods_after_s": round(reroute["sent_at"] - at, 4),
                             "messages": reroute["messages"]}
    return out


def measured_stragglers(rows, checked, dilation: float) -> dict:
    """straggler_report of the training ranks' records (compute ends at the iteration's start plus its compute)."""
    workers = [r for r in checked.contributors if r in rows]
    ends = {r: [(row["start"] + row["compute_s"]) / dilation for row in rows[r]] for r in workers}
    computes = {r: [row["compute_s"] / dilation for row in rows[r]] for r in workers}
    return straggler_report(ends, computes, [h.name for h in checked.topo.hosts], WARMUP)


class Emulate:
    """The emulate back end."""

    mode = MODE
    prepare = staticmethod(prepare)
    execute = staticmethod(execute)


BACKEND = Emulate()
