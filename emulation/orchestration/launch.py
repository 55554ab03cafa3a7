"""`dmlbed launch ... -- COMMAND ARGS`: a user's own training command on every emulated host, one process per host,
with torchrun's variables (RANK, WORLD_SIZE, MASTER_ADDR, ...), so an unmodified DDP script with the gloo backend
trains across the emulated network; each host's per-level addresses come in DMLBED_* variables, and with --algo a
script that calls dmlbed.ddp.register(model) synchronizes with that algorithm's DDP hook. The run folder gets each
rank's stdout and stderr, exit codes, wall time, bytes per level and link rates from the interface counters, the
hosts' TCP counters and a fidelity verdict."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Tuple

from emulation.orchestration import fidelity, signals
from emulation.orchestration.options import (Checked, OptionError, RunConfig, check_overlap, flag_of, option_of,
                                             validate)
from emulation.orchestration.outputs import clear, output_folder, write_atomic
from emulation.orchestration.provenance import provenance
from emulation.orchestration.ranks import PROJECT, RankError, hosts_for, network_lock, rank_configs, real_bw
from emulation.orchestration.sampling import CpuSampler, InterfaceSampler, switch_pid
from emulation.orchestration.timeline import launch_trace
from workloads.rankconfig import GLOO_PORT, RANK_CONFIG_ENV
from workloads.runfolder import RunFolder
from workloads.verify import verify

DEFAULT_ALGO = "gloo"  # without --algo a script's DDP synchronizes with its own all-reduce over gloo
RESULTS = RunFolder.RESULTS
ABOVE_RATE = 1.10  # a link sending faster than this share of its shaped wire rate is not shaped


class RankFailed(RankError):
    """A rank exited non-zero or outlived the time limit; codes: every rank's exit code so far."""

    def __init__(self, message: str, codes: Dict[int, Optional[int]]):
        super().__init__(message)
        self.codes = codes


@dataclass(frozen=True)
class LaunchJob:
    """A checked launch: the configuration, the network, the command, where and with what it runs."""

    cfg: RunConfig
    checked: Checked
    command: Tuple[str, ...]
    cwd: str
    env: Dict[str, str] = field(default_factory=dict)
    hooked: bool = False       # --algo given: ranks get a RankConfig for dmlbed.ddp.register
    time_limit: float = 0.0    # seconds the command may run (0: no limit)


def parse_env(pairs: List[str]) -> Dict[str, str]:
    """--env KEY=VALUE ... as a mapping (OptionError naming a malformed one)."""
    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key or not key.replace("_", "a").isalnum():
            raise OptionError(f"--env {pair!r} is invalid: give KEY=VALUE")
        out[key] = value
    return out


def prepare(cfg: RunConfig, command: List[str], cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
            time_limit: float = 0.0) -> LaunchJob:
    """Validate the network, the optional algorithm, the command and the output folder before anything starts."""
    command = list(command[1:] if command and command[0] == "--" else command)
    if not command:
        raise OptionError("a command is required after --, e.g. dmlbed launch --topo star:4 -- python train.py")
    cwd = os.path.abspath(cwd or os.getcwd())
    if not os.path.isdir(cwd):
        raise OptionError(f"--cwd {cwd} is not a folder")
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    if not (os.sep in command[0] and os.access(os.path.join(cwd, command[0]), os.X_OK)) and \
            not shutil.which(command[0], path=path):
        raise OptionError(f"command '{command[0]}' is not found on PATH (nor executable in {cwd})")
    if not 0 <= time_limit <= 7 * 86400:
        raise OptionError(f"--time-limit {time_limit:g} is out of range: give seconds in [0, 604800] (0: none)")
    hooked = cfg.algo is not None
    cfg = replace(cfg, algo=cfg.algo or DEFAULT_ALGO)
    checked = validate(cfg, workers=False)
    check_overlap(cfg, checked.algorithm, lambda n: "--algo" if n == "overlap" else flag_of(n, option_of(n)))
    cfg = replace(cfg, out=output_folder(cfg.out, RESULTS, "a run's results", cfg.force, "launch"))
    return LaunchJob(cfg, checked, tuple(command), cwd, dict(env or {}), hooked, time_limit)


def rank_environment(job: LaunchJob, rank: int, master_port: int, config_path: Optional[str],
                     files_path: str) -> Dict[str, str]:
    """The caller's environment, the project's Python first, torchrun's variables and dmlbed's."""
    topo, cfg = job.checked.topo, job.cfg
    host = topo.hosts[rank]
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join([p for p in (PROJECT, env.get("PYTHONPATH")) if p])
    env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun sets it: one thread per rank
    env.update(RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE=str(len(topo.hosts)), LOCAL_WORLD_SIZE="1",
               GROUP_RANK=str(rank), ROLE_RANK=str(rank), ROLE_WORLD_SIZE=str(len(topo.hosts)),
               MASTER_ADDR="127.0.0.1" if cfg.local else topo.hosts[0].ip, MASTER_PORT=str(master_port),
               DMLBED_HOST=host.name, DMLBED_TOPOLOGY=topo.spec, DMLBED_LEVELS=str(len(host.interfaces)),
               DMLBED_ADDRESSES=",".join(i.ip for i in host.interfaces), DMLBED_OUT=files_path,
               DMLBED_BW_MBPS=",".join(f"{b:g}" for b in job.checked.bw))
    for intf in host.interfaces:
        env[f"DMLBED_ADDR_L{intf.level}"] = intf.ip
        env[f"DMLBED_IFNAME_L{intf.level}"] = intf.name
    if not cfg.local:
        env["GLOO_SOCKET_IFNAME"] = host.interfaces[0].name  # the host's hostname resolves outside the network
    if config_path:
        env[RANK_CONFIG_ENV] = config_path
    env.update(job.env)
    return env


def execute(job: LaunchJob, log: Callable[[str], None] = lambda m: None) -> dict:
    """Run the command on every host; summary.json with exit codes, wall time, bytes and fidelity (always written,
    with `error` when a rank failed)."""
    with network_lock(job.cfg):
        return _execute(job, log)


def _execute(job: LaunchJob, log: Callable[[str], None]) -> dict:
    cfg, checked = job.cfg, job.checked
    topo, ranks = checked.topo, len(checked.topo.hosts)
    folder, files = RunFolder(cfg.out), RunFolder(cfg.out).ranks()
    os.makedirs(cfg.out, exist_ok=True)
    clear(cfg.out, RESULTS)
    shutil.rmtree(files.path, ignore_errors=True)
    os.makedirs(files.path)
    summary = {"topology": topo.spec, "command": shlex.join(job.command), "cwd": job.cwd, "ranks": ranks,
               "algo": cfg.algo if job.hooked else None,
               "synchronization": (f"{cfg.algo} (DDP communication hook, dmlbed.ddp.register)" if job.hooked else
                                   "the script's own (DDP's all-reduce over gloo unless it registers a hook)"),
               "bw_mbps": checked.bw[0] if len(set(checked.bw)) == 1 else list(checked.bw),
               "shaped_mbps": list(real_bw(checked.bw, cfg)), "config": {"out": cfg.out, "topology": topo.spec,
                                                                          "bw": cfg.bw, "local": cfg.local},
               "provenance": provenance()}
    error, interruption, exit_codes, started, ended = None, None, {}, time.time(), None
    procs: Dict[int, subprocess.Popen] = {}
    cpu = CpuSampler(switch=None if cfg.local else switch_pid())
    sampler, port_drops = None, {}
    try:
        with hosts_for(cfg, topo, checked.bw, checked.impairment, log) as hosts:
            summary.update(datapath=hosts.datapath, shaping=hosts.shaping, controller=hosts.controller_summary(),
                           tcp=hosts.tcp_summary())
            configs = rank_configs(cfg, checked, os.path.abspath(files.path))
            master_port = configs[0].master_port if cfg.local else GLOO_PORT
            sampler = InterfaceSampler(hosts.namespace_pids(), {h.name: [i.name for i in h.interfaces]
                                                                for h in topo.hosts})
            drops_before = hosts.port_drops()
            with cpu, sampler:
                started = time.time()
                for c in configs:
                    path = None
                    if job.hooked:
                        path = os.path.abspath(files.config(c.rank))
                        c.write(path)
                    env = rank_environment(job, c.rank, master_port, path, os.path.abspath(files.path))
                    with open(files.stdout(c.rank), "w") as out, open(files.stderr(c.rank), "w") as err:
                        procs[c.rank] = hosts.popen(c.host, list(job.command), stdout=out, stderr=err,
                                                    cwd=job.cwd, env=env)
                log(f"started `{shlex.join(job.command)}` on {ranks} hosts of {topo.spec}")
                exit_codes = watch(procs, files, topo, job.time_limit)
                ended = time.time()
            summary["packet_in"] = hosts.packet_ins()
            port_drops = {k: v - drops_before.get(k, 0) for k, v in hosts.port_drops().items()}
    except RankFailed as exc:
        error, exit_codes = str(exc), exc.codes
    except RuntimeError as exc:
        error = str(exc) or type(exc).__name__
    except KeyboardInterrupt as exc:
        error, interruption = signals.error_of(exc), exc
    except Exception as exc:  # a bug: summary.json still says what happened, then the traceback follows
        error, interruption = f"{type(exc).__name__}: {exc}", exc
    finally:
        summary.update(results(job, folder, sampler, cpu, port_drops, exit_codes, started, ended or time.time(),
                               error))
        log(fidelity.one_line(summary["fidelity"]))
        write_atomic(folder.file(RunFolder.SUMMARY), json.dumps(summary, indent=1))
    if interruption is not None:
        raise interruption
    return summary


TEARDOWN_ABORT = "terminate called without an active exception"


def teardown_hint(code: int, last_line: str) -> str:
    """Why a rank aborted after its script ended, when it is PyTorch's gloo teardown race, and the script's fix."""
    if code != -signal.SIGABRT or TEARDOWN_ABORT not in last_line:
        return ""
    # DDP's reference cycles keep the gloo process group alive until the interpreter's final garbage collection;
    # a gloo thread then drops a work object that needs the GIL and C++ terminates (torchrun shows the same).
    return (" (PyTorch's gloo threads outlived the interpreter: `del` the DDP model and optimizer and call "
            "gc.collect() before destroy_process_group; README, launch)")


def watch(procs: Dict[int, subprocess.Popen], files, topo, time_limit: float) -> Dict[int, int]:
    """Wait for every rank; RankFailed naming the first that exits non-zero (with its last stderr line), or the ranks
    still running when the time limit passes."""
    deadline = time.monotonic() + time_limit if time_limit else None
    while True:
        codes = {r: p.poll() for r, p in procs.items()}
        failed = [r for r, c in codes.items() if c not in (None, 0)]
        if failed:
            r = min(failed, key=lambda r: procs[r].returncode is None)
            raise RankFailed(f"rank {r} ({topo.hosts[r].name}) exited with code {codes[r]}: "
                             f"{files.last_error_line(r)}{teardown_hint(codes[r], files.last_error_line(r))}", codes)
        if all(c == 0 for c in codes.values()):
            return codes
        if deadline is not None and time.monotonic() > deadline:
            running = [f"rank {r}" for r, c in codes.items() if c is None]
            raise RankFailed(f"--time-limit passed with {', '.join(running[:6])} still running", codes)
        time.sleep(0.2)


def results(job: LaunchJob, folder: RunFolder, sampler: Optional[InterfaceSampler], cpu: CpuSampler,
            port_drops: dict, exit_codes: Dict[int, int], started: float, ended: float, error: Optional[str]) -> dict:
    """The measured part of a launch's summary, and its trace.json."""
    cfg, topo = job.cfg, job.checked.topo
    files = folder.ranks()
    ranks = len(topo.hosts)
    level_of = {i.name: i.level for h in topo.hosts for i in h.interfaces}
    totals = sampler.totals() if sampler else {}
    by_level: Dict[str, int] = {}
    for name, t in totals.items():
        if name in level_of:
            by_level[f"L{level_of[name]}"] = by_level.get(f"L{level_of[name]}", 0) + t["tx"]
    rates = sampler.rates() if sampler else []
    shaped = real_bw(job.checked.bw, cfg)
    peaks = {}
    for _, _, sample in rates:
        for name, mbps in sample.items():
            if name in level_of:
                key = f"L{level_of[name]}"
                peaks[key] = max(peaks.get(key, 0.0), mbps)
    buckets = files.read_buckets(ranks)
    checks = verify(files.checks) if job.hooked and error is None else {}
    out = {"exit_codes": {str(r): c for r, c in sorted(exit_codes.items())}, "wall_s": ended - started,
           "bytes_by_level": dict(sorted(by_level.items())),
           "link_peak_mbps": {k: round(v, 3) for k, v in sorted(peaks.items())},
           "buckets": summarize_buckets(buckets), "checks": checks, "error": error,
           "completed": error is None and len(exit_codes) == ranks and all(c == 0 for c in exit_codes.values())}
    out["fidelity"] = launch_fidelity(cfg, topo, shaped, peaks, sampler, cpu, port_drops)
    launch_trace(folder.file(RunFolder.TRACE), topo, started, ended, rates, level_of, buckets,
                 files.read_transfers(ranks), list(shaped))
    return out


def summarize_buckets(buckets: List[dict]) -> dict:
    """Per-bucket records of a script that registered dmlbed's hook ({} otherwise)."""
    if not buckets:
        return {}
    spans = [b["end"] - b["start"] for b in buckets]
    digests: Dict[Tuple[int, int], set] = {}
    for b in buckets:
        digests.setdefault((b["iteration"], b["bucket"]), set()).add(b.get("digest"))
    ranks = len({b["rank"] for b in buckets})
    return {"records": len(buckets), "iterations": len({(b["rank"], b["iteration"]) for b in buckets}) // max(1, ranks),
            "per_iteration": max(b["bucket"] for b in buckets) + 1, "sync_s_median": sorted(spans)[len(spans) // 2],
            # every rank handed DDP the same averaged gradient in every bucket: replicas that start equal stay equal
            "same_average_on_every_rank": all(len(d) == 1 and None not in d for d in digests.values())}


def launch_fidelity(cfg: RunConfig, topo, shaped, peaks: Dict[str, float], sampler: Optional[InterfaceSampler],
                    cpu: CpuSampler, port_drops: dict) -> dict:
    """The verdict from what can be seen from outside a user's script: CPU and switch-thread saturation, the
    hosts' TCP counters and queue drops, and links sending above their shaped rate."""
    if cfg.local:
        return {"verdict": "not measured", "cause": "loopback run: no emulated network", "cpu": cpu.report()}
    hosts = {h: {k: v for k, v in c.items()} for h, c in (sampler.tcp() if sampler else {}).items()}
    fid = {"cpu": cpu.report(), "hosts": hosts, "switch_port_drops": port_drops,
           "tcp_totals": {k: sum(h.get(k, 0) for h in hosts.values()) for k in
                          ("retrans_segs", "rto_timeouts", "loss_probes", "dsack_received", "out_segs")},
           "levels": {}, "scope": "counters sampled every 0.5 s from outside the ranks (no per-transfer timing)"}
    fid.update(fidelity.verdict_and_cause(fid, 1, 0.0))
    # interface counters and the shaper both count whole frames: the peak compares with the shaped rate itself
    above = {level: round(mbps / shaped[int(level[1:])], 3) for level, mbps in peaks.items()
             if shaped[int(level[1:])] and mbps > ABOVE_RATE * shaped[int(level[1:])]}
    fid["link_peak_over_shaped"] = {level: round(mbps / shaped[int(level[1:])], 3) for level, mbps in peaks.items()
                                    if shaped[int(level[1:])]}
    if above:
        fid.update(verdict="not faithful", cause=f"links sent above their shaped rate ({above}): the shaping did not "
                                                 f"hold")
    return fid
