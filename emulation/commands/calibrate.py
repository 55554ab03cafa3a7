"""`dmlbed calibrate`: measure per-message latency and achieved bandwidth per hierarchy level on the emulated
network, through the same engine and transport the algorithms use, and fit the alpha-beta model.

Per level two probes, each a sweep of message sizes: a ping-pong between host 0 and its neighbour across
the level (one-way time = round trip / 2, messages up to one engine chunk so the reply cannot overlap the
request: the idle network's textbook alpha and beta), and an exchange in
which every host sends one message to its neighbour across the level at once (the load a collective's step
puts on every host, its CPU and the switch: the fit the model uses)."""

from __future__ import annotations

import os
import shutil
import statistics
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Tuple

from emulation.commands.base import WARMUP, Command, reps_option
from emulation.core.addressing import PLAN_PORT
from emulation.core.calibration import Calibration, CalibrationError, fit
from emulation.run.lifecycle import Lifecycle
from emulation.run.options import (DILATION, LINKS, NETWORK, OUTPUT, RANKS, REPLACE, TOPOLOGY, WAIT, OptionError,
                                   RunConfig)
from emulation.run.outputs import output_folder
from emulation.run.progress import log
from emulation.results.provenance import provenance
from emulation.run.ranks import PORT_STRIDE, run_bench_ranks
from emulation.run.resolution import Checked
from emulation.results.iterations import rep_times
from emulation.run.validation import check_network, check_values
from workloads.calibration_probes import build, probe_levels
from workloads.engine import CHUNK_BYTES
from workloads.rankconfig import BenchJob
from workloads.runfolder import RunFolder

MESSAGE_SIZES = (64, 4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20)
CALIBRATION_FILE = "calibration.json"


class Calibrate(Command):
    name, help = "calibrate", "fit per-level latency and bandwidth (ping-pong and exchange probes)"
    description = ("Per link level, a ping-pong between two hosts and an exchange in which every host sends across "
                   "the level at once, through the engine and transport the algorithms use; fits one message's "
                   "time as alpha + bytes / rate and writes calibration.json for --calibration.")
    examples = (
        ("each BCube level's latency and rate, the model theory and simulate take with --calibration",
         "--topo bcube:3,2 --bw 100"),
        ("a 1 Gbit/s star, dilated 4 times, with more repetitions",
         "--topo star:4 --bw 1000 --dilation 4 --reps 20"),
    )
    groups = (TOPOLOGY, LINKS, NETWORK, RANKS, DILATION, OUTPUT, REPLACE, WAIT)
    own = (WARMUP, reps_option(7))

    def prepare(self, args):
        values = self.values(args)
        return prepare(self.config(args), values["warmup"], values["reps"])

    def needs_root(self, job):
        return not job.checked.network.local

    def execute(self, job, args):
        return calibrate(job, log=log)

    def show(self, report):
        print_calibration(report)

    def exit_code(self, report):
        return 0 if report["meta"]["wrong"] == 0 else 1


@dataclass(frozen=True)
class CalibrationPlan:
    """A calibration checked before anything starts: the network (probes need no algorithm and no model), the
    repetitions."""

    checked: Checked
    warmup: int = 2
    reps: int = 7


def prepare(base: RunConfig, warmup: int = 2, reps: int = 7) -> CalibrationPlan:
    """The values and the network section, and an --out free of another calibration."""
    check_values(base, groups=Calibrate.groups)
    network = check_network(base)
    if network.link_rates:
        raise OptionError("--link-rate does not apply to calibrate: a calibration fits one model per link level "
                          "(calibrate with every link at its level's rate, then run with --link-rate)")
    if base.cpu_hog:
        raise OptionError("--cpu-hog does not apply to calibrate: a calibration fits the links of a machine that is "
                          "not short of CPU (run, jobs and bench take it, to see the verdict catch it)")
    out = output_folder(base.out, (CALIBRATION_FILE,), "a calibration", base.force, "calibrate")
    return CalibrationPlan(Checked(replace(base, out=out), network), warmup, reps)


def one_way_times(records: List[dict], kind: str, pieces: int, dilation: float = 1.0) -> List[Tuple[int, float]]:
    """(message bytes, median one-way seconds) per size: a ping-pong is two messages in a row (emulated time:
    divided by the time dilation)."""
    times = rep_times(records, dilation)
    per_message = 2 if kind == "pingpong" else 1
    return [(size // pieces, statistics.median(ts) / per_message) for size, ts in sorted(times.items())]


def calibrate(job: CalibrationPlan, sizes=MESSAGE_SIZES, log: Callable[[str], None] = lambda m: None) -> dict:
    """Run every probe on one network in one lifecycle; calibration.json is written to --out (with `error`, and
    no fit, when it fails) and its contents returned."""
    checked, warmup, reps = job.checked, job.warmup, job.reps
    cfg, topo = checked.cfg, checked.topo
    folder = RunFolder(cfg.out)
    fits: Dict[str, list] = {"pingpong": [], "exchange": []}
    state = {"wrong": 0, "datapath": None}
    unresolved: List[dict] = []

    def body(life: Lifecycle) -> None:
        state["datapath"] = life.hosts.datapath
        for i, level in enumerate(probe_levels(topo)):
            for j, kind in enumerate(("pingpong", "exchange")):
                plan = build(topo, kind, level)
                # a ping-pong message of more than one engine chunk would overlap its own reply
                messages = [m for m in sizes if kind == "exchange" or m <= CHUNK_BYTES]
                buffers = [m * plan.pieces for m in messages]
                files = folder.ranks(f"{kind}-L{level}")
                shutil.rmtree(files.path, ignore_errors=True)
                records = run_bench_ranks(life.hosts, checked, BenchJob(tuple(buffers), warmup, reps, (kind, level)),
                                          files, PLAN_PORT + PORT_STRIDE * (2 * i + j),
                                          f"{kind} across level {level}", log, life.server)
                state["wrong"] += sum(r["wrong"] for r in records)
                points = one_way_times(records, kind, plan.pieces, cfg.dilation)
                try:
                    fits[kind].append(fit(level, points))
                except CalibrationError as exc:
                    if kind == "exchange":  # the model needs it: say so in one line
                        raise RuntimeError(f"calibration failed: {exc} (rerun with more --reps)") from None
                    # a ping-pong whose time does not grow up to one chunk (loopback) resolves no rate
                    unresolved.append({"level": level, "points": points, "reason": str(exc)})

    def finish(life: Lifecycle) -> dict:
        meta = {"sizes": list(sizes), "warmup": warmup, "reps": reps, "wrong": state["wrong"], "local": cfg.local,
                "dilation": cfg.dilation, "mtu": None if cfg.local else cfg.mtu, "idle_unresolved": unresolved,
                "provenance": provenance()}
        if life.error is not None:  # no fit: a later --calibration refuses this file, naming the error
            return {"topology": topo.spec, "bw_mbps": list(checked.bw), "error": life.error, "meta": meta}
        cal = Calibration(topo.spec, tuple(checked.bw), state["datapath"], tuple(fits["exchange"]),
                          tuple(fits["pingpong"]), meta)
        return cal.to_dict()

    path = os.path.join(cfg.out, CALIBRATION_FILE)
    report = Lifecycle(checked.network, log, path, fork_server=folder.ranks(), reraise=True).run(
        body, finish, lambda: os.makedirs(cfg.out, exist_ok=True))
    return dict(report, path=path)


def print_calibration(report: dict) -> None:
    """Per level: the idle and loaded fits of alpha and rate."""
    print(f"calibration of {report['topology']} at {report['bw_mbps']} Mbit/s ({report['datapath']}): one message "
          f"takes alpha + bytes / rate")
    print(f"{'level':>5} {'shaped':>8} {'idle alpha':>11} {'idle rate':>10} {'loaded alpha':>13} {'loaded rate':>12}")
    shaped = report["bw_mbps"]
    idle_by_level = {f["level"]: f for f in report["idle"]}
    for loaded in report["loaded"]:
        level, idle = loaded["level"], idle_by_level.get(loaded["level"])
        idle_text = (f"{idle['alpha_s'] * 1e3:>8.3f} ms {idle['rate_mbps']:>10.2f}" if idle else
                     f"{'-':>11} {'unresolved':>10}")
        print(f"{level:>5} {shaped[min(level, len(shaped) - 1)]:>8g} {idle_text} "
              f"{loaded['alpha_s'] * 1e3:>10.3f} ms {loaded['rate_mbps']:>12.2f}")
    print(f"rates in Mbit/s of payload; idle = ping-pong of two hosts, loaded = every host sending across the "
          f"level at once (the model theory, bench and simulate use with --calibration {report['path']})")


COMMAND = Calibrate()
