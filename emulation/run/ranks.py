"""Ranks, shared by every command that starts them (run, launch, bench, calibrate): one RankConfig per rank, starting
the ranks (forked from one fork server, or each its own interpreter) on their hosts (hosts.py), and watching them
until they finish, fail or stall."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

from emulation.core.addressing import PLAN_PORT
from emulation.core.compute import FIXED
from emulation.core.topology import Topology
from emulation.net.controller_process import free_ports, stop_process_group
from emulation.run.forkclient import ForkedRank, ForkServer, rank_start
from emulation.run.hosts import Hosts
from emulation.run.progress import Progress
from emulation.run.resolution import Checked
from emulation.results.iterations import per_iteration
from emulation.run.sampling import rank_memory
from workloads.models import is_user_model
from workloads.rankconfig import GLOO_PORT, BenchJob, RankConfig
from workloads.runfolder import RankFiles

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOOPBACK_PORT_SETS = 4  # concurrent plan channels a rank may open (iBatch: push, pull, profile, chosen pull)
PORT_STRIDE = 10  # each set of ranks on one network listens on its own ports (no TIME_WAIT clash with the last)
FAILURE_SETTLE_S = 0.5  # after a rank fails, how long its peers' failures (broken transfers) may take to show
STARTUP_GRACE_S = 60.0  # the first iteration also waits for every rank to import torch and connect
FORK_SERVER_EXIT_S = 5.0  # a closed fork server whose ranks have ended leaves at once
TRAINING_RANK = "workloads.worker"
BENCH_RANK = "workloads.bench_worker"


class RankError(RuntimeError):
    """A rank failed after it started (died, stalled, ran out of time); the message names it."""


def rank_configs(checked: Checked, out_dir: str, port: int = PLAN_PORT,
                 bench: Optional[BenchJob] = None) -> List[RankConfig]:
    """What every rank is told: the job's settings in real time (dilated), its host, its addresses and ports (a
    job without a synchronization, calibrate's probes, tells no algorithm)."""
    cfg, network, sync = checked.cfg, checked.network, checked.sync
    topo = checked.topo
    ranks = len(topo.hosts)
    ports = free_ports(LOOPBACK_PORT_SETS * ranks + 1) if network.local else None
    algorithm = dict(algo=cfg.algo, servers=sync.servers, options=sync.options, codec_options=sync.codec_options,
                     shared=sync.algorithm.shared(topo, sync.servers, sync.typed)) if sync else {}
    common = dict(ranks=ranks, topology=topo.spec, job_hosts=tuple(h.name for h in topo.hosts) if topo.bystanders
                  else (), **algorithm, bw=network.bw, model=cfg.model, data=cfg.data,
                  batch=cfg.batch, iters=cfg.iters, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay,
                  lr_schedule=cfg.lr_schedule, eval_every=cfg.eval_every, seed=cfg.seed, codec=cfg.codec,
                  compute_time=checked.compute.mean * cfg.dilation, dilation=cfg.dilation, overlap=cfg.overlap,
                  compute_draws="" if checked.compute.kind == FIXED else checked.compute.text,
                  bucket_mb=cfg.bucket_mb, python_path=(os.getcwd(),) if is_user_model(cfg.model) else (),
                  timeout=cfg.timeout * cfg.dilation, out_dir=out_dir, port=port,
                  socket_buffer=network.tcp.socket_buffer_bytes, bench=bench)
    if network.local:  # lo is shared by all ranks: no per-rank byte counts
        sets = tuple(tuple(ports[ranks * i:ranks * (i + 1)]) for i in range(LOOPBACK_PORT_SETS))
        common.update(master="127.0.0.1", master_port=ports[-1], loopback_ports=sets)
    else:  # the emulated network's TCP: set on every socket the transport opens
        common.update(master=topo.hosts[0].ip, master_port=GLOO_PORT, tcp_cc=cfg.tcp_cc)
    return [RankConfig(rank=r, host=host.name, **common,
                       compute_slow=tuple((s.factor, s.start) for s in checked.compute.slow if s.rank == r),
                       **({} if network.local else {
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


def run_bench_ranks(hosts: Hosts, checked: Checked, job: BenchJob, files: RankFiles, port: int, what: str, log,
                    server: Optional[ForkServer] = None) -> List[dict]:
    """Start one bench rank per host for one algorithm (or calibration probe), wait for them, return their
    repetitions."""
    cfg = checked.cfg
    procs = start_ranks(hosts, files, rank_configs(checked, os.path.abspath(files.path), port, job), BENCH_RANK,
                        server)
    log(f"{what}: {len(procs)} ranks, {len(job.sizes)} sizes x ({job.warmup} warm-up + {job.reps} timed)")
    wait_ranks(procs, files, what, cfg.timeout * cfg.dilation * (len(job.sizes) * (job.warmup + job.reps) + 1))
    return files.read_bench(len(procs))
