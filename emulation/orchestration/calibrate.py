"""`dmlbed calibrate`: measure per-message latency and achieved bandwidth per hierarchy level on the emulated
network, through the same engine and transport the algorithms use, and fit the alpha-beta model.

Per level two probes, each a sweep of message sizes: a ping-pong between host 0 and its neighbour across
the level (one-way time = round trip / 2, messages up to one engine chunk so the reply cannot overlap the
request: the idle network's textbook alpha and beta), and an exchange in
which every host sends one message to its neighbour across the level at once (the load a collective's step
puts on every host, its CPU and the switch: the fit the model uses)."""

from __future__ import annotations

import json
import os
import shutil
import statistics
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Tuple

from emulation.orchestration.options import Checked, RunConfig, validate
from emulation.orchestration.outputs import output_folder, write_atomic
from emulation.orchestration.provenance import provenance
from emulation.orchestration.ranks import (PORT_STRIDE, check_repetitions, fork_server_ahead, hosts_for,
                                           network_lock, run_bench_ranks)
from emulation.orchestration.results import rep_times
from emulation.spec.addressing import PLAN_PORT
from emulation.spec.calibration import Calibration, CalibrationError, fit
from workloads.engine import CHUNK_BYTES
from workloads.probes import build, probe_levels
from workloads.rankconfig import BenchJob
from workloads.runfolder import RunFolder

MESSAGE_SIZES = (64, 4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20)
CALIBRATION_FILE = "calibration.json"


@dataclass(frozen=True)
class CalibrationPlan:
    """A calibration checked before anything starts: its configuration, what validation learned, the repetitions."""

    cfg: RunConfig
    checked: Checked
    warmup: int = 2
    reps: int = 7


def prepare(base: RunConfig, warmup: int = 2, reps: int = 7) -> CalibrationPlan:
    """The checked configuration (any plan algorithm validates the topology and rates; probes need no model)."""
    check_repetitions(warmup, reps)
    cfg = replace(base, algo="ring", model="mlp:1K")
    checked = validate(cfg, workers=False)
    out = output_folder(base.out, (CALIBRATION_FILE,), "a calibration", base.force, "calibrate")
    return CalibrationPlan(replace(cfg, out=out), checked, warmup, reps)


def one_way_times(records: List[dict], kind: str, pieces: int, dilation: float = 1.0) -> List[Tuple[int, float]]:
    """(message bytes, median one-way seconds) per size: a ping-pong is two messages in a row (emulated time:
    divided by the time dilation)."""
    times = rep_times(records, dilation)
    per_message = 2 if kind == "pingpong" else 1
    return [(size // pieces, statistics.median(ts) / per_message) for size, ts in sorted(times.items())]


def calibrate(job: CalibrationPlan, sizes=MESSAGE_SIZES, log: Callable[[str], None] = lambda m: None) -> dict:
    """Run every probe on one network; write calibration.json to --out and return its contents."""
    cfg, checked, warmup, reps = job.cfg, job.checked, job.warmup, job.reps
    topo = checked.topo
    folder = RunFolder(cfg.out)
    os.makedirs(cfg.out, exist_ok=True)
    fits: Dict[str, list] = {"pingpong": [], "exchange": []}
    wrong = 0
    unresolved: List[dict] = []
    with network_lock(cfg), fork_server_ahead(folder.ranks()) as server, \
            hosts_for(cfg, topo, checked.bw, checked.impairment, log) as hosts:
        datapath = hosts.datapath
        for i, level in enumerate(probe_levels(topo)):
            for j, kind in enumerate(("pingpong", "exchange")):
                plan = build(topo, kind, level)
                # a ping-pong message of more than one engine chunk would overlap its own reply
                messages = [m for m in sizes if kind == "exchange" or m <= CHUNK_BYTES]
                buffers = [m * plan.pieces for m in messages]
                files = folder.ranks(f"{kind}-L{level}")
                shutil.rmtree(files.path, ignore_errors=True)
                records = run_bench_ranks(hosts, cfg, checked, BenchJob(tuple(buffers), warmup, reps, (kind, level)),
                                          files, PLAN_PORT + PORT_STRIDE * (2 * i + j), f"{kind} across level {level}",
                                          log, server)
                wrong += sum(r["wrong"] for r in records)
                points = one_way_times(records, kind, plan.pieces, cfg.dilation)
                try:
                    fits[kind].append(fit(level, points))
                except CalibrationError as exc:
                    if kind == "exchange":  # the model needs it: say so in one line
                        raise RuntimeError(f"calibration failed: {exc} (rerun with more --reps)") from None
                    # a ping-pong whose time does not grow up to one chunk (loopback) resolves no rate
                    unresolved.append({"level": level, "points": points, "reason": str(exc)})
    cal = Calibration(topo.spec, tuple(checked.bw), datapath, tuple(fits["exchange"]), tuple(fits["pingpong"]),
                      {"sizes": list(sizes), "warmup": warmup, "reps": reps, "wrong": wrong, "local": cfg.local,
                       "dilation": cfg.dilation, "mtu": None if cfg.local else cfg.mtu, "idle_unresolved": unresolved,
                       "provenance": provenance()})
    report = cal.to_dict()
    write_atomic(os.path.join(cfg.out, CALIBRATION_FILE), json.dumps(report, indent=1))
    report["path"] = os.path.join(cfg.out, CALIBRATION_FILE)
    return report
