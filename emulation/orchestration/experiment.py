"""`dmlbed run`: one training run -- network + controller + one training rank per host -> summary.json,
iterations.csv, workers.csv, trace.json."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, replace
from typing import Callable, Optional

from emulation.orchestration import fidelity, signals
from emulation.orchestration.options import Checked, RunConfig, validate
from emulation.orchestration.outputs import check_space, clear, default_parent, output_folder, write_atomic
from emulation.orchestration.forkclient import rank_start
from emulation.orchestration.ranks import (RankError, fork_server_ahead, hosts_for, memory_of, network_lock,
                                           rank_configs, real_bw,
                                           start_ranks, watch_training)
from emulation.orchestration.results import WARMUP, dilate, per_iteration, summarize, write_csvs
from emulation.orchestration.sampling import CpuSampler, first_iteration_s, switch_pid
from emulation.orchestration.summary_head import head, model_fields, overlap_theory
from emulation.orchestration.timeline import write_trace
from emulation.simulation.calibrated import calibrated_ratio
from workloads.runfolder import RunFolder
from workloads.models import parameter_count_of
from workloads.verify import MAX_CHECK_BYTES, verify


@dataclass(frozen=True)
class RunJob:
    """A run checked before anything starts: its configuration and what validation learned."""

    cfg: RunConfig
    checked: Checked


def prepare(cfg: RunConfig, label: Optional[Callable[[str], str]] = None) -> RunJob:
    """Validate a run and its output folder (OptionError and its kin, all ValueErrors, name what is wrong)."""
    checked = validate(cfg, label)
    check_space(cfg.out or default_parent("run"),
                output_bytes(len(checked.topo.hosts), cfg.iters, parameter_count_of(cfg.model) * 4))
    cfg = replace(cfg, out=output_folder(cfg.out, RunFolder.RESULTS, "a run's results", cfg.force, "run"))
    return RunJob(cfg, checked)


def output_bytes(ranks: int, iterations: int, gradient_bytes: int) -> int:
    """About what a run writes at its peak: each rank's records and transfers per iteration (8 KiB per rank and
    iteration measured for PS and ring on star:4 and star:9), its first iteration's result checks (input and
    output, removed once compared), the CSVs, timeline and summary (64 KiB)."""
    checks = 2 * gradient_bytes if gradient_bytes <= MAX_CHECK_BYTES else 0
    return (64 << 10) + ranks * (iterations * (8 << 10) + checks)


def run(cfg: RunConfig, log: Callable[[str], None] = lambda m: None, progress: bool = True) -> dict:
    """Check and run one experiment end to end (see execute)."""
    return execute(prepare(cfg), log, progress)


def execute(job: RunJob, log: Callable[[str], None] = lambda m: None, progress: bool = True) -> dict:
    """Run a checked experiment; always writes summary.json (with `error` on failure). Holds the network lock from
    before bring-up to after teardown."""
    with network_lock(job.cfg):
        return _execute(job.cfg, job.checked, log, progress)


def _execute(cfg: RunConfig, checked: Checked, log: Callable[[str], None], progress: bool) -> dict:
    """execute() holding the lock."""
    topo, bw = checked.topo, checked.bw
    contributors = list(checked.contributors)
    folder = RunFolder(cfg.out)
    files = folder.ranks()
    summary = head(cfg, checked)
    theory_s = summary["gst_theory_s"]
    summary.update(dilation=cfg.dilation, shaped_mbps=list(real_bw(bw, cfg)), data=cfg.data, **model_fields(cfg, checked),
                   **overlap_theory(cfg, checked))
    os.makedirs(cfg.out, exist_ok=True)
    clear(cfg.out, RunFolder.RESULTS)
    shutil.rmtree(files.path, ignore_errors=True)
    os.makedirs(files.path)
    error, interruption = None, None
    started = spawned = time.time()
    startup = {"method": rank_start()}
    cpu = CpuSampler(switch=None if cfg.local else switch_pid())
    port_drops, placement = {}, {}
    try:
        with fork_server_ahead(files) as server, hosts_for(cfg, topo, bw, checked.impairment, log) as hosts:
            summary.update(datapath=hosts.datapath, shaping=hosts.shaping, controller=hosts.controller_summary(),
                           tcp=hosts.tcp_summary(),
                           impairment=hosts.impairment_summary())
            placement = hosts.placement
            if placement:
                summary["cluster"] = hosts.cluster_summary()
            spawned = time.time()
            procs = start_ranks(hosts, files, rank_configs(cfg, checked, os.path.abspath(files.path)), server=server)
            log(f"started {len(procs)} workers: {cfg.algo} on {topo.spec}, {cfg.model}, batch {cfg.batch}")
            drops_before = hosts.port_drops()
            with cpu:
                watch_training(procs, files, topo, cfg.iters, stall_s=(cfg.timeout + 3 * theory_s) * cfg.dilation,
                               progress=f"{cfg.algo} on {topo.spec}" if progress else None,
                               on_first_iteration=lambda: startup.update(memory=memory_of(procs)))
            summary["packet_in"] = hosts.packet_ins()
            port_drops = {k: v - drops_before.get(k, 0) for k, v in hosts.port_drops().items()}
    except (RankError, RuntimeError) as exc:
        error = str(exc) or type(exc).__name__
    except KeyboardInterrupt as exc:  # SIGINT, SIGTERM or SIGHUP (see signals.py): the network is down by now
        error, interruption = signals.error_of(exc), exc
    except Exception as exc:  # a bug: summary.json still says what happened, then the traceback follows
        error, interruption = f"{type(exc).__name__}: {exc}", exc
    finally:
        ranks = len(topo.hosts)
        rows, finals = files.read_rows(ranks), files.read_finals(ranks)
        raw = per_iteration(rows, contributors, None if cfg.local else topo)
        iterations = dilate(raw, cfg.dilation)
        write_csvs(cfg.out, rows, iterations, None if cfg.local else topo)
        write_trace(cfg.out, files, ranks, [h.name for h in topo.hosts], cfg.dilation, list(real_bw(bw, cfg)))
        checks = verify(files.checks) if error is None else {}
        summary.update(summarize(iterations, finals, contributors, checks, error, cfg.dilation))
        summary["gst_ratio"] = (summary["gst_median_s"] / theory_s) if summary["gst_median_s"] else None
        if cfg.calibration:
            summary["gst_ratio_calibrated"] = calibrated_ratio(summary)
        summary["fidelity"] = fidelity.report(topo, real_bw(bw, cfg), theory_s * cfg.dilation, raw, rows,
                                              files.read_transfers(ranks), finals,
                                              cpu.report(fidelity.measured_window(rows, WARMUP)), not cfg.local,
                                              port_drops, placement)
        log(fidelity.one_line(summary["fidelity"]))
        summary["rank_start"] = dict(startup, first_iteration_s=first_iteration_s(rows, spawned))
        summary["duration_s"] = time.time() - started
        summary["completed"] = error is None and summary.get("iterations") == cfg.iters
        write_atomic(folder.file(RunFolder.SUMMARY), json.dumps(summary, indent=1))
    if interruption is not None:
        raise interruption
    return summary
