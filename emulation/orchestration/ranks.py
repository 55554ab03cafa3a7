"""Ranks and the hosts they run on, shared by every command that starts ranks (run, bench, calibrate): the hosts
protocol (an emulated network, or loopback processes without emulation), one RankConfig per rank, starting the
ranks, and watching them until they finish, fail or stall."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Protocol, Sequence, Tuple

from emulation.net.controller import free_ports, stop_process_group
from emulation.orchestration.forkclient import ForkedRank, ForkServer, rank_start
from emulation.orchestration.options import (Checked, OptionError, RunConfig, algorithm_options, cluster_servers,
                                            controller_choice, tcp_settings)
from emulation.orchestration.progress import Progress
from emulation.orchestration.results import per_iteration
from emulation.orchestration.sampling import rank_memory
from emulation.spec.addressing import PLAN_PORT
from emulation.spec.impairment import Impairment
from emulation.spec.topology import Topology
from workloads.models import is_user_model
from workloads.rankconfig import GLOO_PORT, BenchJob, RankConfig
from workloads.runfolder import RankFiles

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOOPBACK_PORT_SETS = 4  # concurrent plan channels a rank may open (iBatch: push, pull, profile, chosen pull)
PORT_STRIDE = 10  # each set of ranks on one network listens on its own ports (no TIME_WAIT clash with the last)
FAILURE_SETTLE_S = 0.5  # after a rank fails, how long its peers' failures (broken transfers) may take to show
STARTUP_GRACE_S = 60.0  # the first iteration also waits for every rank to import torch and connect
WARMUP_RANGE, REPS_RANGE = (0, 100), (1, 1000)  # a bench rank's untimed and timed repetitions per size
FORK_SERVER_EXIT_S = 5.0  # a closed fork server whose ranks have ended leaves at once
TRAINING_RANK = "workloads.worker"
BENCH_RANK = "workloads.bench_worker"


class RankError(RuntimeError):
    """A rank failed after it started (died, stalled, ran out of time); the message names it."""


class Hosts(Protocol):
    """Where ranks run: an EmulatedNetwork (emulation/net/network.py) or LoopbackHosts."""

    datapath: str
    shaping: str
    placement: Dict[str, str]

    def popen(self, host: str, args: List[str], **kwargs) -> subprocess.Popen:
        """Start a process on a host; it is stopped when the hosts go down."""

    def packet_ins(self) -> int:
        """Data-plane PacketIns the controller saw."""

    def port_drops(self) -> Dict[str, int]:
        """Cumulative drop counters of the switches' ports."""

    def controller_summary(self) -> Optional[dict]:
        """Which controller ran the switches (None without switches)."""

    def tcp_summary(self) -> dict:
        """The hosts' TCP settings (for results)."""

    def impairment_summary(self) -> dict:
        """The links' delay and loss (for results)."""

    def cluster_summary(self) -> dict:
        """Servers and tunnels of an emulation across machines ({} on one machine)."""

    def namespace_pids(self) -> Dict[str, int]:
        """Host -> a pid in its network namespace (per-host counters from /proc/PID/net)."""

    def fork_namespace(self, host: str) -> Optional[int]:
        """The pid whose network namespace a rank forked on this machine enters (0: this process's own), or None
        where a rank cannot be forked from here (a host on another machine)."""

    def adopt(self, proc, host: str, what: str) -> None:
        """Stop proc (started outside popen) with the hosts; record it for `dmlbed clean`."""


class LoopbackHosts:
    """Every rank as a plain process on 127.0.0.1 (no emulation, no root): for development and tests."""

    datapath = "loopback"
    shaping = "none (loopback)"
    placement: Dict[str, str] = {}

    def __init__(self):
        self.procs: List[subprocess.Popen] = []

    def __enter__(self) -> "LoopbackHosts":
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            stop_process_group(proc.pid, proc, grace=1.0)

    def popen(self, host: str, args: List[str], **kwargs) -> subprocess.Popen:
        """Start a rank's process in its own session (stopped with its children)."""
        proc = subprocess.Popen(args, start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def fork_namespace(self, host: str) -> Optional[int]:
        """Every loopback rank stays in this namespace."""
        return 0

    def adopt(self, proc, host: str, what: str) -> None:
        """Stopped on exit like the ranks popen() started."""
        self.procs.append(proc)

    def packet_ins(self) -> int:
        """No controller on loopback."""
        return 0

    def port_drops(self) -> Dict[str, int]:
        """No switch on loopback."""
        return {}

    def controller_summary(self) -> Optional[dict]:
        """No switches, no controller."""
        return None

    def tcp_summary(self) -> dict:
        """Loopback runs use the machine's own TCP."""
        return {"congestion_control": "machine default (loopback)"}

    def impairment_summary(self) -> dict:
        """Loopback has no links to delay."""
        return {"applied": "none (loopback)"}

    def cluster_summary(self) -> dict:
        """One machine."""
        return {}

    def namespace_pids(self) -> Dict[str, int]:
        """Every rank shares this machine's namespace: no per-host counters."""
        return {}


def real_bw(bw: Sequence[float], cfg: RunConfig):
    """What the links are shaped to: the asked-for rate divided by the time dilation factor."""
    return tuple(b / cfg.dilation for b in bw)


def network_lock(cfg: RunConfig):
    """The machine-wide network lock for an emulated run; nothing for a loopback run."""
    if cfg.local:
        return contextlib.nullcontext()
    from emulation.net.lock import NetworkLock
    return NetworkLock(wait=cfg.wait)


def hosts_for(cfg: RunConfig, topo: Topology, bw: Sequence[float], impairment: Optional[Impairment], log) -> Hosts:
    """The hosts a configuration's ranks start on: the emulated network of topo at the rates bw asked for (spread
    over --cluster servers when given), or loopback processes."""
    if cfg.local:
        return LoopbackHosts()
    from emulation.net.network import EmulatedNetwork
    servers = cluster_servers(cfg)
    cluster = None
    if servers:
        from emulation.net.cluster import Cluster
        cluster = Cluster(servers, cfg.tunnel)
    return EmulatedNetwork(topo, real_bw(bw, cfg), datapath=cfg.datapath, ingress_shaping=cfg.shape_ingress,
                           log=log, tcp=tcp_settings(cfg), cluster=cluster, impairment=impairment,
                           controller=controller_choice(cfg))


def rank_configs(cfg: RunConfig, checked: Checked, out_dir: str, port: int = PLAN_PORT,
                 bench: Optional[BenchJob] = None) -> List[RankConfig]:
    """What every rank is told: the run's settings in real time (dilated), its host, its addresses and ports."""
    topo = checked.topo
    ranks = len(topo.hosts)
    ports = free_ports(LOOPBACK_PORT_SETS * ranks + 1) if cfg.local else None
    options = algorithm_options(cfg)
    shared = checked.algorithm.shared(topo, checked.servers, checked.algorithm.options_of(options))
    common = dict(ranks=ranks, topology=topo.spec, algo=cfg.algo, servers=checked.servers,
                  options=options, shared=shared, bw=tuple(checked.bw), model=cfg.model, data=cfg.data,
                  batch=cfg.batch, iters=cfg.iters, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
                  lr_schedule=cfg.lr_schedule, eval_every=cfg.eval_every, seed=cfg.seed, codec=cfg.codec,
                  compute_time=cfg.compute_time * cfg.dilation, dilation=cfg.dilation, overlap=cfg.overlap,
                  bucket_mb=cfg.bucket_mb, python_path=(os.getcwd(),) if is_user_model(cfg.model) else (),
                  timeout=cfg.timeout * cfg.dilation, out_dir=out_dir, port=port,
                  socket_buffer=tcp_settings(cfg).socket_buffer_bytes, bench=bench)
    if cfg.local:  # lo is shared by all ranks: no per-rank byte counts
        sets = tuple(tuple(ports[ranks * i:ranks * (i + 1)]) for i in range(LOOPBACK_PORT_SETS))
        common.update(master="127.0.0.1", master_port=ports[-1], loopback_ports=sets)
    else:  # the emulated network's TCP: set on every socket the transport opens
        common.update(master=topo.hosts[0].ip, master_port=GLOO_PORT, tcp_cc=cfg.tcp_cc)
    return [RankConfig(rank=r, host=host.name, **common, **({} if cfg.local else {
        "interfaces": tuple(i.name for i in host.interfaces), "ifname": host.interfaces[0].name}))
        for r, host in enumerate(topo.hosts)]


def start_ranks(hosts: Hosts, files: RankFiles, configs: List[RankConfig], module: str = TRAINING_RANK,
                server: Optional[ForkServer] = None) -> Dict[int, subprocess.Popen]:
    """Write every rank's config and start `python -m module --config FILE` on its host (stderr to its file):
    forked from one fork server that has imported torch once (server: one launched earlier, see
    fork_server_ahead), or each as its own interpreter (DMLBED_RANK_START=exec, and hosts on other machines)."""
    os.makedirs(files.path, exist_ok=True)
    for c in configs:
        c.write(os.path.abspath(files.config(c.rank)))
    namespaces = {c.rank: hosts.fork_namespace(c.host) for c in configs}
    forked = [c for c in configs if namespaces[c.rank] is not None] if rank_start() == "fork" else []
    procs = fork_ranks(hosts, files, forked, namespaces, module, server) if forked else {}
    for c in configs:
        if c.rank not in procs:
            with open(files.stderr(c.rank), "w") as err:
                procs[c.rank] = hosts.popen(c.host, [sys.executable, "-m", module, "--config",
                                                     os.path.abspath(files.config(c.rank))],
                                            stdout=subprocess.DEVNULL, stderr=err, cwd=PROJECT)
    return procs


def fork_ranks(hosts: Hosts, files: RankFiles, configs: List[RankConfig], namespaces: Dict[int, Optional[int]],
               module: str, server: Optional[ForkServer] = None) -> Dict[int, ForkedRank]:
    """Fork each rank from one fork server into its host's namespace; the hosts stop them and the server. A server
    of its own leaves after these ranks; a server given stays for more until fork_server_ahead ends."""
    own = server is None
    server = server or ForkServer(PROJECT, files.fork_server_stderr).launch()
    procs: Dict[int, ForkedRank] = {}
    try:
        server.wait_ready()
        for c in configs:
            procs[c.rank] = server.fork(module, ["--config", os.path.abspath(files.config(c.rank))],
                                        os.path.abspath(files.stderr(c.rank)), namespaces[c.rank] or None)
            hosts.adopt(procs[c.rank], c.host, f"{module} rank {c.rank}")
    finally:
        if own:
            server.close()  # the server leaves after its last rank
        if server.proc is not None and not server.adopted:  # adopted after the first ranks: stopped after them
            hosts.adopt(server.proc, "this machine", "rank fork server")
            server.adopted = True
    return procs


@contextlib.contextmanager
def fork_server_ahead(files: RankFiles):
    """A fork server launched now, so that its imports overlap the hosts' bring-up, for every start_ranks until the
    block ends (then closed, and stopped if it lingers); None when ranks start as fresh interpreters. Its stderr
    goes to files' folder."""
    if rank_start() != "fork":
        yield None
        return
    os.makedirs(files.path, exist_ok=True)
    server = ForkServer(PROJECT, files.fork_server_stderr).launch()
    try:
        yield server
    finally:
        server.close()
        try:
            server.proc.wait(timeout=FORK_SERVER_EXIT_S)
        except subprocess.TimeoutExpired:
            stop_process_group(server.proc.pid, server.proc)


def watch_training(procs: Dict[int, subprocess.Popen], files: RankFiles, topo: Topology, iterations: int,
                   stall_s: float, progress: Optional[str] = None,
                   on_first_iteration: Optional[Callable[[], None]] = None) -> None:
    """Wait for every training rank, showing progress (a bar titled `progress`, or none), calling on_first_iteration
    once every rank has finished an iteration; RankError naming the rank that failed, or the ranks waited on when no
    iteration finished for stall_s."""
    bar = Progress(progress, iterations) if progress else None
    last_progress, last_done = time.monotonic(), -1
    try:
        while True:
            rows = files.read_rows(len(topo.hosts))
            done = min(len(v) for v in rows.values())
            if done != last_done:
                if done >= 1 and last_done < 1 and on_first_iteration is not None:
                    on_first_iteration()
                last_done, last_progress = done, time.monotonic()
                if bar is not None:
                    its = per_iteration(rows, range(len(topo.hosts)), None)
                    bar.update(done, its[-1]["gst_s"] if its else None)
            if any(p.poll() not in (None, 0) for p in procs.values()):
                r, code = first_failure(procs)
                raise RankError(f"worker {topo.hosts[r].name} (rank {r}) exited with code {code} in iteration "
                                f"{len(files.read_rows(len(topo.hosts))[r])}: {files.last_error_line(r)}")
            if all(p.poll() == 0 for p in procs.values()):
                return
            allowed = stall_s + (STARTUP_GRACE_S if done <= 0 else 0)
            if time.monotonic() - last_progress > allowed:
                stuck = [topo.hosts[r].name for r in rows if len(rows[r]) == done]
                raise RankError(f"no progress for {allowed:.0f}s in iteration {done}; waiting on "
                                f"{', '.join(stuck[:6])}")
            time.sleep(0.3)
    finally:
        if bar is not None:
            bar.close()


def first_failure(procs: Dict[int, subprocess.Popen], settle_s: float = FAILURE_SETTLE_S) -> Tuple[int, int]:
    """(rank, exit code) of the failure to report once one rank has failed: a rank's peers fail soon after it
    (their transfers break), so wait settle_s for the others, then name a rank ended by a signal before ranks that
    exited on their own, lowest rank first among equals."""
    time.sleep(settle_s)
    failed = {r: p.poll() for r, p in procs.items() if p.poll() not in (None, 0)}
    return min(failed.items(), key=lambda item: (item[1] >= 0, item[0]))


def memory_of(procs: Dict[int, subprocess.Popen]) -> dict:
    """Per-rank memory of running ranks, the fork server they came from counted in."""
    servers = {p.server.proc.pid for p in procs.values() if isinstance(p, ForkedRank) and p.server.proc}
    return rank_memory([p.pid for p in procs.values()], sorted(servers))


def wait_ranks(procs: Dict[int, subprocess.Popen], files: RankFiles, what: str, within_s: float) -> None:
    """Wait for ranks that record no iterations (bench, calibration probes); RankError naming the first that failed
    or did not finish within within_s."""
    deadline = time.monotonic() + within_s
    for rank, proc in procs.items():
        try:
            code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise RankError(f"bench {what}: rank {rank} did not finish in time") from None
        if code != 0:
            raise RankError(f"bench {what}: rank {rank} exited with code {code}: {files.last_error_line(rank)}")


def run_bench_ranks(hosts: Hosts, cfg: RunConfig, checked: Checked, job: BenchJob, files: RankFiles, port: int,
                    what: str, log, server: Optional[ForkServer] = None) -> List[dict]:
    """Start one bench rank per host for one algorithm (or calibration probe), wait for them, return their
    repetitions."""
    procs = start_ranks(hosts, files, rank_configs(cfg, checked, os.path.abspath(files.path), port, job), BENCH_RANK,
                        server)
    log(f"{what}: {len(procs)} ranks, {len(job.sizes)} sizes x ({job.warmup} warm-up + {job.reps} timed)")
    wait_ranks(procs, files, what, cfg.timeout * cfg.dilation * (len(job.sizes) * (job.warmup + job.reps) + 1))
    return files.read_bench(len(procs))


def check_repetitions(warmup: int, reps: int) -> None:
    """OptionError unless a bench rank's warm-up and timed repetitions are in range."""
    if not WARMUP_RANGE[0] <= warmup <= WARMUP_RANGE[1] or not REPS_RANGE[0] <= reps <= REPS_RANGE[1]:
        raise OptionError(f"--warmup must be in [{WARMUP_RANGE[0]}, {WARMUP_RANGE[1]}] and --reps in "
                          f"[{REPS_RANGE[0]}, {REPS_RANGE[1]}]")
