"""A user's command on every emulated host, one process per host, with torchrun's variables (RANK, WORLD_SIZE,
MASTER_ADDR, ...), so an unmodified DDP script with the gloo backend trains across the emulated network; each host's
per-level addresses come in DMLBED_* variables, and with an algorithm a script that calls dmlbed.ddp.register(model)
synchronizes with that algorithm's DDP hook. The run folder gets each rank's stdout and stderr, exit codes, wall
time, bytes per level and link rates from the interface counters, the hosts' TCP counters and a fidelity verdict
(the launch back end: `dmlbed launch`, `dmlbed run --parallel`)."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Tuple

from emulation.results import fidelity
from emulation.run.idle import IdleWatch, readers
from emulation.run.lifecycle import Lifecycle
from emulation.run.options import (CONTROLLER, DILATION, LINKS, NETWORK, OUTPUT, RANKS, REPLACE, TOPOLOGY, WAIT,
                                   OptionError, RunConfig, flag_label)
from emulation.run.outputs import clear, output_folder
from emulation.results.provenance import provenance
from emulation.run.ranks import PROJECT, RankError, rank_configs
from emulation.run.resolution import Checked
from emulation.run.sampling import CpuSampler, InterfaceSampler, counter_gains
from emulation.results.summary import LaunchSummary, bw_value
from emulation.results.trace import launch_trace
from emulation.run.validation import check_network, check_overlap, check_synchronization, check_values
from workloads.rankconfig import GLOO_PORT, RANK_CONFIG_ENV
from workloads.runfolder import RunFolder
from workloads.verify import verify

DEFAULT_ALGO = "gloo"  # without --algo a script's DDP synchronizes with its own all-reduce over gloo
RESULTS = RunFolder.RESULTS
ABOVE_RATE = 1.10  # a link sending faster than this share of its shaped wire rate is not shaped
MAX_TIME_LIMIT_S = 7 * 86400
IDLE_LOOK_S = 1.0
GROUPS = (TOPOLOGY, LINKS, NETWORK, CONTROLLER, RANKS, DILATION, OUTPUT, REPLACE, WAIT)  # what a launch takes


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
    idle_warning: float = 0.0  # say when every rank has been idle this long (0: never)


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
    """Validate the network, the optional algorithm, the command and the output folder before anything starts (the
    script brings its own model: no training section)."""
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
    if not 0 <= time_limit <= MAX_TIME_LIMIT_S:
        raise OptionError(f"--time-limit {time_limit:g} is out of range: give seconds in [0, {MAX_TIME_LIMIT_S}] "
                          f"(0: none)")
    hooked = cfg.algo is not None
    cfg = replace(cfg, algo=cfg.algo or DEFAULT_ALGO)
    check_values(cfg, groups=GROUPS)
    network = check_network(cfg)
    sync = check_synchronization(cfg, network.topo)
    check_overlap(cfg, sync.algorithm, lambda n: "--algo" if n == "overlap" else flag_label(n))
    cfg = replace(cfg, out=output_folder(cfg.out, RESULTS, "a run's results", cfg.force, "launch"))
    return LaunchJob(cfg, Checked(cfg, network, sync), tuple(command), cwd, dict(env or {}), hooked, time_limit)


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
               DMLBED_BW_MBPS=",".join(f"{b:g}" for b in job.checked.bw), DMLBED_DILATION=f"{cfg.dilation:g}")
    for intf in host.interfaces:
        env[f"DMLBED_ADDR_L{intf.level}"] = intf.ip
        env[f"DMLBED_IFNAME_L{intf.level}"] = intf.name
    if not cfg.local:
        env["GLOO_SOCKET_IFNAME"] = host.interfaces[0].name  # the host's hostname resolves outside the network
    if config_path:
        env[RANK_CONFIG_ENV] = config_path
    env.update(job.env)
    return env


def execute(job: LaunchJob, log: Callable[[str], None] = lambda m: None) -> LaunchSummary:
    """Run the command on every host in one lifecycle; summary.json with exit codes, wall time, bytes and fidelity
    (always written, with `error` when a rank failed)."""
    cfg, checked = job.cfg, job.checked
    topo, ranks = checked.topo, len(checked.topo.hosts)
    folder, files = RunFolder(cfg.out), RunFolder(cfg.out).ranks()
    summary = LaunchSummary(
        topology=topo.spec, command=shlex.join(job.command), cwd=job.cwd, ranks=ranks,
        algo=cfg.algo if job.hooked else None,
        synchronization=(f"{cfg.algo}{'' if cfg.codec == 'none' else ' with codec ' + cfg.codec} (DDP communication "
                         f"hook, dmlbed.ddp.register)" if job.hooked else
                         "the script's own (DDP's all-reduce over gloo unless it registers a hook)"),
        bw_mbps=bw_value(checked.bw), shaped_mbps=list(checked.shaped), dilation=cfg.dilation,
        config={"out": cfg.out, "topology": topo.spec, "bw": cfg.bw, "local": cfg.local}, provenance=provenance())
    state = {"exit_codes": {}, "started": time.time(), "ended": None, "port_drops": {}}
    procs: Dict[int, subprocess.Popen] = {}

    def body(life: Lifecycle) -> None:
        hosts = life.hosts
        summary.datapath, summary.shaping = hosts.datapath, hosts.shaping
        summary.controller, summary.tcp = hosts.controller_summary(), hosts.tcp_summary()
        configs = rank_configs(checked, os.path.abspath(files.path))
        master_port = configs[0].master_port if cfg.local else GLOO_PORT
        drops_before = hosts.port_drops()
        with life.sampling(interfaces=True):
            state["started"] = time.time()
            for c in configs:
                path = None
                if job.hooked:
                    path = os.path.abspath(files.config(c.rank))
                    c.write(path)
                env = rank_environment(job, c.rank, master_port, path, os.path.abspath(files.path))
                with open(files.stdout(c.rank), "w") as out, open(files.stderr(c.rank), "w") as err:
                    procs[c.rank] = hosts.popen(c.host, list(job.command), stdout=out, stderr=err, cwd=job.cwd,
                                                env=env)
            log(f"started `{shlex.join(job.command)}` on {ranks} hosts of {topo.spec}")
            try:
                idle = IdleWatch(ranks, job.idle_warning, readers({r: p.pid for r, p in procs.items()},
                                                                  own_links=not cfg.local)) \
                    if job.idle_warning else None
                state["exit_codes"] = watch(procs, files, topo, job.time_limit, idle, log)
            except RankFailed as exc:
                state["exit_codes"] = exc.codes
                raise
            state["ended"] = time.time()
        summary.packet_in = hosts.packet_ins()
        state["port_drops"] = counter_gains(drops_before, hosts.port_drops())

    def finish(life: Lifecycle) -> LaunchSummary:
        results(job, folder, summary, life, state)
        life.log(fidelity.one_line(summary.fidelity))
        return summary

    def start() -> None:
        os.makedirs(cfg.out, exist_ok=True)
        clear(cfg.out, RESULTS)
        shutil.rmtree(files.path, ignore_errors=True)
        os.makedirs(files.path)

    return Lifecycle(checked.network, log, folder.file(RunFolder.SUMMARY)).run(body, finish, start)


TEARDOWN_ABORT = "terminate called without an active exception"


def teardown_hint(code: int, last_line: str) -> str:
    """Why a rank aborted after its script ended, when it is PyTorch's gloo teardown race, and the script's fix."""
    if code != -signal.SIGABRT or TEARDOWN_ABORT not in last_line:
        return ""
    # DDP's reference cycles keep the gloo process group alive until the interpreter's final garbage collection;
    # a gloo thread then drops a work object that needs the GIL and C++ terminates (torchrun shows the same).
    return (" (PyTorch's gloo threads outlived the interpreter: `del` the DDP model and optimizer and call "
            "gc.collect() before destroy_process_group; docs/how-to/your-own-script.md)")


def watch(procs: Dict[int, subprocess.Popen], files, topo, time_limit: float, idle: Optional[IdleWatch] = None,
          log: Callable[[str], None] = lambda m: None) -> Dict[int, int]:
    """Wait for every rank; RankFailed naming the first that exits non-zero (with its last stderr line), or the ranks
    still running when the time limit passes; says once when they have all been idle a while (idle)."""
    deadline = time.monotonic() + time_limit if time_limit else None
    next_look = time.monotonic()
    while True:
        if idle is not None and time.monotonic() >= next_look:
            next_look += IDLE_LOOK_S
            said = idle.look(time.monotonic())
            if said:
                log(said)
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


def results(job: LaunchJob, folder: RunFolder, summary: LaunchSummary, life: Lifecycle, state: dict) -> None:
    """The measured part of a launch's summary (the ranks' files read once), and its trace.json."""
    cfg, topo = job.cfg, job.checked.topo
    files = folder.ranks()
    ranks = len(topo.hosts)
    sampler, error, exit_codes = life.interfaces, life.error, state["exit_codes"]
    started, ended = state["started"], state["ended"] or time.time()
    records = files.read_all(ranks)
    level_of = {i.name: i.level for h in topo.hosts for i in h.interfaces}
    totals = sampler.totals() if sampler else {}
    by_level: Dict[str, int] = {}
    for name, t in totals.items():
        if name in level_of:
            by_level[f"L{level_of[name]}"] = by_level.get(f"L{level_of[name]}", 0) + t["tx"]
    rates = sampler.rates() if sampler else []
    shaped = job.checked.shaped
    peaks = {}
    for _, _, sample in rates:
        for name, mbps in sample.items():
            if name in level_of:
                key = f"L{level_of[name]}"
                peaks[key] = max(peaks.get(key, 0.0), mbps)
    checks = verify(files.checks) if job.hooked and error is None else {}
    summary.exit_codes = {str(r): c for r, c in sorted(exit_codes.items())}
    summary.wall_s = ended - started
    summary.bytes_by_level = dict(sorted(by_level.items()))
    summary.link_peak_mbps = {k: round(v, 3) for k, v in sorted(peaks.items())}
    summary.buckets, summary.checks, summary.error = summarize_buckets(records.buckets), checks, error
    summary.completed = error is None and len(exit_codes) == ranks and all(c == 0 for c in exit_codes.values())
    summary.fidelity = launch_fidelity(cfg, topo, shaped, peaks, sampler, life.cpu, state["port_drops"],
                                       files.read_measured(ranks))
    launch_trace(folder.file(RunFolder.TRACE), topo, started, ended, rates, level_of, records.buckets,
                 records.transfers, list(shaped))


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
                    cpu: CpuSampler, port_drops: dict, measured: Optional[Dict[int, dict]] = None) -> dict:
    """The verdict from what can be seen from outside a user's script: CPU and switch-thread saturation (over the
    seconds the ranks say they measured, when they write rank-N.measured.json), the hosts' TCP counters and queue
    drops, links sending above their shaped rate, and the ranks' own count of compute over its device time."""
    window = measured_window(measured or {})
    if cfg.local:
        return {"verdict": "not measured", "cause": "loopback run: no emulated network", "cpu": cpu.report(window)}
    hosts = {h: {k: v for k, v in c.items()} for h, c in (sampler.tcp() if sampler else {}).items()}
    fid = {"cpu": cpu.report(window), "hosts": hosts, "switch_port_drops": port_drops,
           "tcp_totals": {k: sum(h.get(k, 0) for h in hosts.values()) for k in
                          ("retrans_segs", "rto_timeouts", "loss_probes", "dsack_received", "out_segs")},
           "levels": {}, "scope": "counters sampled every 0.5 s from outside the ranks (no per-transfer timing)"}
    if measured:
        fid["compute_over_budget"] = sum(int(m.get("compute_over_budget") or 0) for m in measured.values())
        fid["compute_rank_iterations"] = sum(int(m.get("rank_iterations") or 0) for m in measured.values())
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


def measured_window(measured: Dict[int, dict]) -> Optional[Tuple[float, float]]:
    """From the first rank's start to the last rank's end of what they measured (wall clock), if any said."""
    starts = [m["start"] for m in measured.values() if isinstance(m.get("start"), (int, float))]
    ends = [m["end"] for m in measured.values() if isinstance(m.get("end"), (int, float))]
    return (min(starts), max(ends)) if starts and ends and min(starts) < max(ends) else None
