"""Several jobs on one emulated network: each job alone on its hosts first (an ordinary run), then every job at once
under one controller; after their first (warm-up) iteration the ranks wait at a start gate and are released
together, each job at its own offset; each job's summary judged with the other jobs' transfers as traffic beside it,
and its synchronizations' overlap with theirs."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from dataclasses import replace
from typing import Dict, List

from emulation.backends import emulator
from emulation.backends.base import Log, quiet
from emulation.backends.job_rows import job_row, overlap_fields, start_s
from emulation.backends.jobs_flow import JobsFlowModel
from emulation.core.background import horizon_s
from emulation.core.job_specs import Hold, holds
from emulation.run.background_traffic import BackgroundTraffic
from emulation.run.forkclient import rank_start
from emulation.run.jobs_check import CheckedJobs
from emulation.run.lifecycle import Lifecycle
from emulation.run.outputs import clear
from emulation.run.ranks import rank_configs, start_ranks, watch_training
from emulation.results.iterations import mean_after_warmup, median_after_warmup, per_iteration
from emulation.run.sampling import counter_gains
from emulation.results.files import read_iterations, write_summary
from emulation.results.summary import Emulation
from emulation.backends.heads import head, models
from emulation.run.validation import validate
from workloads.rankconfig import starts_file
from workloads.runfolder import RunFolder

GATE = "start.json"
GATE_LEAD_S = 0.5  # from the last rank ready to the first job's start


class BesideTraffic:
    """Background flows, and the other jobs' transfers, as what a job's fidelity counts beside it."""

    def __init__(self, background: BackgroundTraffic, others: List[dict]):
        self.background, self.others = background, others

    def foreign(self) -> List[dict]:
        return self.background.foreign() + self.others

    def report(self, window):
        return self.background.report(window)

    def series(self):
        return self.background.series()


def transfers_as_traffic(name: str, topo, transfers: List[dict]) -> List[dict]:
    """A job's sends as traffic beside another job: each connection's bytes over time, on its own ports."""
    out = []
    for t in transfers:
        if t["dir"] != "send" or t["start"] is None or t["end"] is None:
            continue
        out.append({"src": topo.hosts[t["rank"]].name, "dst": topo.hosts[t["peer"]].name,
                    "ports": tuple(t["ports"]) if t.get("ports") else None, "label": f"job {name}",
                    "received": [(t["start"], 0), (t["end"], t["wire_bytes"])]})
    return out


def emulated_rows(jobs: CheckedJobs, log: Log = quiet) -> List[dict]:
    """Each job alone, then together; per job its figures both ways, its slowdown and its overlap."""
    alone = {}
    for spec, checked in zip(jobs.specs, jobs.checked):
        log(f"job {spec.name} alone on {','.join(jobs.hosts[spec.name])}")
        cfg = replace(checked.cfg, out=os.path.join(checked.cfg.out, "alone"), force=True)
        alone[spec.name] = brief(emulator.execute(emulator.RunJob(cfg, validate(cfg, workers=False)), log,
                                                  progress=False).to_dict())
    periods = {s.name: alone[s.name]["iteration_median_s"] for s in jobs.specs}
    starts = {s.name: start_s(s, periods[s.name]) for s in jobs.specs}
    computes = {s.name: alone[s.name]["compute_median_s"] for s in jobs.specs}
    waits = holds(jobs.specs, starts, {n: (computes[n], periods[n] - computes[n]) for n in periods})
    together = run_together(jobs, starts, waits, log)
    rows = []
    for spec, checked in zip(jobs.specs, jobs.checked):
        row = job_row(spec, checked, jobs.hosts[spec.name])
        row["alone"] = alone[spec.name]
        row["together"] = brief(together["summaries"][spec.name])
        row["start_s"] = together["starts"][spec.name]
        before, now = row["alone"]["iteration_mean_s"], row["together"]["iteration_mean_s"]
        row["slowdown"] = now / before if before and now else None
        row.update(together["overlap"][spec.name])
        rows.append(row)
    return rows


def replayed_model(jobs: CheckedJobs, syncs: Dict[str, List[tuple]], dilation: float) -> Dict[str, dict]:
    """Per job, each measured iteration's GST on the flow model of every job together, each iteration's
    synchronization beginning when the measured one did (so the model overlaps the jobs as much as the wire did, and
    a drift out of phase is the scenario's), in the run's own time; or why there is none."""
    try:
        origin = min(iv[0][0] for iv in syncs.values() if iv)
        model = JobsFlowModel(jobs)
        iterations = min(len(iv) for iv in syncs.values())
        if not iterations:
            raise ValueError("a job finished no iteration")
        timeline = model.run(model.replaying({n: [(a - origin) / dilation for a, _ in iv[:iterations]]
                                              for n, iv in syncs.items()}), iterations=iterations)
    except (ValueError, RuntimeError) as exc:
        return {s.name: {"none": f"no flow model of the jobs together: {exc}"} for s in jobs.specs}
    return {t.name: {"gst_s": [g * dilation for g in timeline.gsts(t.name)]} for t in model.timed}


def iteration_times(summary: dict) -> List[float]:
    """A summary's iteration times, from its iterations.csv."""
    return [r["iteration_s"] for r in read_iterations(summary["config"]["out"])]


def brief(summary: dict) -> dict:
    """What jobs.json keeps of a job's run: its mean and median iteration past warm-up, from every iteration."""
    times = iteration_times(summary) if summary.get("iterations") else []
    return {"iteration_mean_s": mean_after_warmup(times), "iteration_median_s": median_after_warmup(times), "gst_median_s": summary.get("gst_median_s"),
            "compute_median_s": summary.get("compute_median_s"),
            "correct": summary.get("correct"), "error": summary.get("error"),
            "fidelity": {k: (summary.get("fidelity") or {}).get(k) for k in ("verdict", "cause", "scenario_note")},
            "out": summary["config"]["out"]}


def run_together(jobs: CheckedJobs, starts: Dict[str, float], waits: Dict[str, List[Hold]], log: Log) -> dict:
    """Every job at once in one lifecycle (waits: each job's held offsets); each job's summary, start and
    per-iteration overlap."""
    cfg, network = jobs.cfg, jobs.network
    folders = {s.name: RunFolder(os.path.join(c.cfg.out, "together")) for s, c in zip(jobs.specs, jobs.checked)}
    checks = {s.name: replace(c, cfg=replace(c.cfg, out=folders[s.name].root)) for s, c in zip(jobs.specs,
                                                                                                 jobs.checked)}
    state = {"started": time.time(), "spawned": time.time(), "port_drops": {}, "placement": {},
             "startup": {"method": rank_start()}}
    horizon = horizon_s(cfg.iters, max(c.compute.mean for c in jobs.checked),
                        max(head(c).gst_theory_s for c in jobs.checked))
    traffic = BackgroundTraffic(network.background, cfg.out, cfg.seed, cfg.dilation, horizon,
                                network.tcp.congestion_control, network.tcp.socket_buffer_bytes)
    emulations = {name: Emulation(dilation=cfg.dilation, data=c.cfg.data) for name, c in checks.items()}
    actual: Dict[str, float] = {}

    def body(life: Lifecycle) -> None:
        hosts = life.hosts
        traffic.start(hosts, lambda name: network.topo.node(name).ip)
        procs = {}
        gates = {n: os.path.abspath(os.path.join(folders[n].ranks().path, GATE)) for n in checks}
        for name, c in checks.items():
            files = folders[name].ranks()
            held = tuple((starts_file(gates[w.job]), w.shift, w.lag_s * cfg.dilation) for w in waits[name])
            configs = [replace(rc, start_gate=gates[name], holds=held)
                       for rc in rank_configs(c, os.path.abspath(files.path))]
            procs[name] = start_ranks(hosts, files, configs, server=life.server)
            emulator.describe_hosts(hosts, emulations[name])
        log(f"started {sum(len(p) for p in procs.values())} ranks of {len(procs)} jobs; releasing them together")
        release(checks, folders, starts, cfg.dilation, actual, cfg.timeout * cfg.dilation, procs)
        state["spawned"] = time.time()
        drops_before = hosts.port_drops()
        try:
            with life.sampling():
                errors = watch_jobs(checks, procs, folders, cfg.dilation)
        finally:
            traffic.stop(hosts)
        state["port_drops"] = counter_gains(drops_before, hosts.port_drops())
        if errors:
            raise errors[0]

    def finish(life: Lifecycle) -> dict:
        out = job_summaries(jobs, checks, folders, life, emulations, dict(state, traffic=traffic))
        out["starts"] = {n: actual.get(n) for n in checks}
        return out

    def start() -> None:
        for folder in folders.values():  # an earlier run's records must not mix in (--force)
            os.makedirs(folder.root, exist_ok=True)
            clear(folder.root, RunFolder.RESULTS)
            shutil.rmtree(folder.ranks().path, ignore_errors=True)
            os.makedirs(folder.ranks().path)

    return Lifecycle(network, log, None, fork_server=folders[jobs.specs[0].name].ranks()).run(body, finish, start)


def job_summaries(jobs: CheckedJobs, checks, folders, life: Lifecycle, emulations, state: dict) -> dict:
    """Each job's summary (written to its folder), judged against the flow model of the jobs together replaying
    their measured starts, with the others' transfers as traffic beside it, and how much its synchronizations
    overlapped theirs."""
    records = {n: folders[n].ranks().read_all(len(c.topo.hosts)) for n, c in checks.items()}
    syncs = {n: [(it["sync_start"], it["sync_end"]) for it in per_iteration(records[n].rows, c.contributors, c.topo)]
             for n, c in checks.items()}
    scenarios = replayed_model(jobs, syncs, jobs.cfg.dilation)
    out = {"summaries": {}, "overlap": {}}
    for n, c in checks.items():
        others = [x for m, o in checks.items() if m != n for x in transfers_as_traffic(m, o.topo, records[m].transfers)]
        job_state = dict(state, traffic=BesideTraffic(state["traffic"], others), scenario=scenarios[n])
        summary = emulator.summary_of(emulator.RunJob(c.cfg, c), records[n], life, head(c), models(c), emulations[n],
                                      job_state)
        out["summaries"][n] = summary.to_dict()
        write_summary(folders[n].root, out["summaries"][n])
        theirs = [iv for m, ivs in syncs.items() if m != n for iv in ivs]
        out["overlap"][n] = overlap_fields(syncs[n], theirs)
    return out


def watch_jobs(checks, procs, folders, dilation: float) -> List[BaseException]:
    """Watch every job's ranks train, each in a thread of its own, until all have ended; what went wrong."""
    errors: List[BaseException] = []

    def watch(name: str) -> None:
        c = checks[name]
        try:
            watch_training(procs[name], folders[name].ranks(), c.topo, c.cfg.iters,
                           stall_s=(c.cfg.timeout + 3 * head(c).gst_theory_s) * dilation)
        except BaseException as exc:  # reported after every job's watch ends
            errors.append(exc)
    threads = [threading.Thread(target=watch, args=(n,), daemon=True) for n in checks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def release(checks, folders, starts: Dict[str, float], dilation: float, actual: Dict[str, float],
            timeout_s: float, procs) -> None:
    """Wait until every rank of every job has done its first (warm-up) iteration and is at its gate, then give each
    job its start time (its offset after the first, in emulated seconds)."""
    deadline = time.time() + timeout_s
    while True:
        for n, ranks in procs.items():
            failed = [r for r, p in ranks.items() if p.poll() not in (None, 0)]
            if failed:
                raise RuntimeError(f"job {n}: rank {failed[0]} exited with code {ranks[failed[0]].poll()} before "
                                   f"the start: {folders[n].ranks().last_error_line(failed[0])}")
        waiting = [(n, r) for n, c in checks.items() for r in range(len(c.topo.hosts))
                   if not os.path.exists(os.path.join(folders[n].ranks().path, f"{GATE}.ready-{r}"))]
        if not waiting:
            break
        if time.time() > deadline:
            n, r = waiting[0]
            raise RuntimeError(f"job {n}: rank {r} was not ready to start within {timeout_s:g} s")
        time.sleep(0.05)
    t0 = time.time() + GATE_LEAD_S
    for n in checks:
        gate = os.path.join(folders[n].ranks().path, GATE)
        actual[n] = starts[n]
        with open(gate + ".tmp", "w") as f:
            json.dump({"t": t0 + starts[n] * dilation}, f)
        os.replace(gate + ".tmp", gate)
