"""One run: network + controller + one training process per host -> summary.json, iterations.csv, workers.csv."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from typing import Callable, Dict, List

from emulation.net.controller import free_ports
from emulation.orchestration.options import Checked, OptionError, RunConfig, cluster_servers, link_goodput, tcp_settings, validate, worker_options
from emulation.orchestration import fidelity, signals
from emulation.orchestration.fidelity import CpuSampler
from emulation.orchestration.results import (WARMUP, dilate, per_iteration, read_finals, read_rows, summarize,
                                             write_atomic, write_csvs)
from emulation.orchestration.timeline import write_trace
from emulation.simulation.calibrated import calibrated_fields, calibrated_ratio, delay_fields
from emulation.spec.addressing import PLAN_PORT
from emulation.spec.topology import Topology
from workloads.models import parameter_count_of, tensor_sizes
from workloads.records import read_traces
from workloads.verify import verify

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GLOO_PORT = 29500
LOOPBACK_PORT_SETS = 4  # concurrent plan channels a rank may open (iBatch: push, pull, profile, chosen pull)


class RunError(RuntimeError):
    """A run failed after it started (a worker died, timed out, ...); partial results are kept."""


class LocalHosts:
    """Runs every rank as a plain process on 127.0.0.1 (no emulation): for tests without root."""

    datapath = "loopback"
    shaping = "none (loopback)"

    def __init__(self):
        self.procs: List[subprocess.Popen] = []

    def __enter__(self) -> "LocalHosts":
        return self

    def __exit__(self, *exc) -> None:
        from emulation.net.controller import stop_process_group
        for proc in self.procs:
            stop_process_group(proc.pid, proc, grace=1.0)

    def popen(self, host: str, args: List[str], **kwargs) -> subprocess.Popen:
        """Start a rank's process."""
        proc = subprocess.Popen(args, start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def packet_ins(self) -> int:
        """No controller on loopback."""
        return 0

    def port_drops(self) -> dict:
        """No switch on loopback."""
        return {}

    def tcp_summary(self) -> dict:
        """Loopback runs use the machine's own TCP."""
        return {"congestion_control": "machine default (loopback)"}

    def impairment_summary(self) -> dict:
        """Loopback has no links to delay."""
        return {"applied": "none (loopback)"}


def worker_configs(cfg: RunConfig, checked: Checked, workdir: str) -> List[dict]:
    """The JSON config of every rank."""
    topo = checked.topo
    ranks = len(topo.hosts)
    ports = free_ports(LOOPBACK_PORT_SETS * ranks + 1) if cfg.local else None
    base = dict(worker_options(cfg), topology=topo.spec, servers=checked.servers, out_dir=workdir, ranks=ranks,
                socket_buffer=tcp_settings(cfg).socket_buffer_bytes, timeout=cfg.timeout * cfg.dilation,
                compute_time=cfg.compute_time * cfg.dilation,
                port=PLAN_PORT, master="127.0.0.1" if cfg.local else topo.hosts[0].ip,
                master_port=ports[-1] if cfg.local else GLOO_PORT)
    base.update(cfg.extra)
    out = []
    for r, host in enumerate(topo.hosts):
        c = dict(base, rank=r, host=host.name)
        if cfg.local:  # lo is shared by all ranks: no per-rank byte counts
            c.update(interfaces=[], ifname=None,
                     loopback_port_sets=[ports[ranks * i:ranks * (i + 1)] for i in range(LOOPBACK_PORT_SETS)])
        else:  # the emulated network's TCP: set on every socket the transport opens
            c.update(interfaces=[i.name for i in host.interfaces], ifname=host.interfaces[0].name, tcp_cc=cfg.tcp_cc)
        out.append(c)
    return out


def monitor(procs: Dict[int, subprocess.Popen], topo: Topology, cfg: RunConfig, workdir: str,
            progress: bool, stall_s: float = None) -> None:
    """Wait for every worker, showing progress; raise RunError naming the worker that failed or stalled (no
    iteration finished for stall_s: --timeout plus three theoretical GSTs, so a long healthy step is no stall)."""
    stall_s = stall_s or cfg.timeout * cfg.dilation
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=cfg.iters, desc=f"{cfg.algo} on {topo.spec}", unit="it", file=sys.stderr)
    last_progress, last_done = time.monotonic(), -1
    startup_grace = 60.0
    try:
        while True:
            rows = read_rows(workdir, len(topo.hosts))
            done = min(len(v) for v in rows.values())
            if done != last_done:
                last_done, last_progress = done, time.monotonic()
                if bar is not None:
                    bar.n = done
                    its = per_iteration(rows, range(len(topo.hosts)), None)
                    if its:
                        bar.set_postfix(gst=f"{its[-1]['gst_s']:.3f}s")
                    bar.refresh()
            for r, proc in procs.items():
                code = proc.poll()
                if code not in (None, 0):
                    raise RunError(f"worker {topo.hosts[r].name} (rank {r}) exited with code {code} in iteration "
                                   f"{len(rows[r])}: {last_line(workdir, r)}")
            if all(p.poll() == 0 for p in procs.values()):
                return
            allowed = stall_s + (startup_grace if done <= 0 else 0)
            if time.monotonic() - last_progress > allowed:
                stuck = [topo.hosts[r].name for r in rows if len(rows[r]) == done]
                raise RunError(f"no progress for {allowed:.0f}s in iteration {done}; waiting on "
                               f"{', '.join(stuck[:6])}")
            time.sleep(0.3)
    finally:
        if bar is not None:
            bar.close()


def last_line(workdir: str, rank: int) -> str:
    """The last non-empty line a worker wrote to stderr."""
    try:
        with open(os.path.join(workdir, f"rank-{rank}.stderr")) as f:
            lines = [l.strip() for l in f if l.strip()]
        return lines[-1] if lines else "(no output)"
    except OSError:
        return "(no log)"


def real_bw(bw, cfg: RunConfig):
    """What the links are shaped to: the asked-for rate divided by the time dilation factor."""
    return tuple(b / cfg.dilation for b in bw)


def network_for(cfg: RunConfig, checked: Checked, log):
    """The emulated network (or loopback processes) the run's workers start in."""
    if cfg.local:
        return LocalHosts()
    from emulation.net.network import EmulatedNetwork
    return EmulatedNetwork(checked.topo, real_bw(checked.bw, cfg), datapath=cfg.datapath,
                           ingress_shaping=cfg.shape_ingress,
                           log=log, tcp=tcp_settings(cfg), cluster=cluster_servers(cfg), tunnel=cfg.tunnel,
                           impairment=checked.impairment)


RESULT_FILES = ("summary.json", "iterations.csv", "workers.csv", "links.csv", "trace.json", "timeline.png")


def check_output(cfg: RunConfig) -> None:
    """Refuse an --out folder that holds another run's results unless --force (nothing is written here)."""
    found = [f for f in RESULT_FILES if os.path.exists(os.path.join(cfg.out, f))]
    if found and not cfg.force:
        raise OptionError(f"--out {cfg.out} already holds a run's results ({', '.join(found)}): choose another "
                          f"folder or pass --force to replace them")
    if os.path.exists(cfg.out) and not os.path.isdir(cfg.out):
        raise OptionError(f"--out {cfg.out} is a file, not a folder")


def clear_results(out: str) -> None:
    """Remove an earlier run's result files (--force): they must not sit beside this run's partial ones."""
    for name in RESULT_FILES:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(out, name))


def network_lock(cfg: RunConfig):
    """The machine-wide network lock for an emulated run; nothing for a loopback run."""
    if cfg.local:
        return contextlib.nullcontext()
    from emulation.net.lock import NetworkLock
    return NetworkLock(wait=cfg.wait)


def run(cfg: RunConfig, log: Callable[[str], None] = lambda m: None, progress: bool = True) -> dict:
    """Run one experiment end to end; always writes summary.json (with `error` on failure). Holds the network
    lock from before bring-up to after teardown."""
    checked = validate(cfg)
    check_output(cfg)
    with network_lock(cfg):
        return _run(cfg, checked, log, progress)


def _run(cfg: RunConfig, checked: Checked, log: Callable[[str], None], progress: bool) -> dict:
    """run() once validated and holding the lock."""
    topo, bw, algorithm = checked.topo, checked.bw, checked.algorithm
    parameters = parameter_count_of(cfg.model)
    gradient_bytes = parameters * 4
    theory = algorithm.gst_theory(topo, gradient_bytes, bw, checked.servers, cfg.codec, worker_options(cfg))
    contributors = list(checked.contributors)
    os.makedirs(cfg.out, exist_ok=True)
    clear_results(cfg.out)
    workdir = os.path.join(cfg.out, "workers")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    summary = {"topology": topo.spec, "algo": cfg.algo, "model": cfg.model, "workers": len(contributors),
               "ranks": len(topo.hosts), "servers": checked.servers, "parameters": parameters,
               "gradient_bytes": gradient_bytes, "bw_mbps": bw[0] if len(set(bw)) == 1 else list(bw),
               "dilation": cfg.dilation, "shaped_mbps": list(real_bw(bw, cfg)),
               "batch": cfg.batch, "data": cfg.data, "codec": cfg.codec, "iterations_requested": cfg.iters,
               "gst_theory_s": theory.gst_s, "gst_formula": theory.formula, "tf_s": theory.tf_s,
               **calibrated_fields(cfg.calibration, algorithm, topo, checked.servers, tensor_sizes(cfg.model), bw,
                                   worker_options(cfg)),
               **delay_fields(checked.impairment, algorithm, topo, checked.servers, tensor_sizes(cfg.model), bw,
                              worker_options(cfg), link_goodput(cfg)),
               "config": asdict(cfg)}
    error, interruption = None, None
    started = time.time()
    cpu = CpuSampler(switch=None if cfg.local else fidelity.switch_pid())
    port_drops, placement = {}, {}
    try:
        with network_for(cfg, checked, log) as hosts:
            summary.update(datapath=hosts.datapath, shaping=hosts.shaping, tcp=hosts.tcp_summary(),
                           impairment=hosts.impairment_summary())
            placement = getattr(hosts, "placement", {})
            if placement:
                summary["cluster"] = {"servers": hosts.servers, "tunnel": hosts.tunnel,
                                      "hosts_per_server": hosts.hosts_per_server()}
            procs = {}
            for c in worker_configs(cfg, checked, os.path.abspath(workdir)):
                path = os.path.join(workdir, f"rank-{c['rank']}.config.json")
                with open(path, "w") as f:
                    json.dump(c, f)
                with open(os.path.join(workdir, f"rank-{c['rank']}.stderr"), "w") as err:
                    procs[c["rank"]] = hosts.popen(c["host"], [sys.executable, "-m", "workloads.worker", "--config",
                                                              os.path.abspath(path)],
                                                   stdout=subprocess.DEVNULL, stderr=err, cwd=PROJECT)
            log(f"started {len(procs)} workers: {cfg.algo} on {topo.spec}, {cfg.model}, batch {cfg.batch}")
            drops_before = hosts.port_drops()
            with cpu:
                monitor(procs, topo, cfg, workdir, progress, stall_s=(cfg.timeout + 3 * theory.gst_s) * cfg.dilation)
            summary["packet_in"] = hosts.packet_ins()
            port_drops = {k: v - drops_before.get(k, 0) for k, v in hosts.port_drops().items()}
    except (RunError, RuntimeError) as exc:
        error = str(exc) or type(exc).__name__
    except KeyboardInterrupt as exc:  # SIGINT, SIGTERM or SIGHUP (see signals.py): the network is down by now
        error, interruption = signals.error_of(exc), exc
    except Exception as exc:  # a bug: summary.json still says what happened, then the traceback follows
        error, interruption = f"{type(exc).__name__}: {exc}", exc
    finally:
        rows = read_rows(workdir, len(topo.hosts))
        raw = per_iteration(rows, contributors, None if cfg.local else topo)
        iterations = dilate(raw, cfg.dilation)
        write_csvs(cfg.out, rows, iterations, None if cfg.local else topo)
        write_trace(cfg.out, workdir, len(topo.hosts), [h.name for h in topo.hosts], cfg.dilation,
                    list(real_bw(bw, cfg)))
        checks = verify(workdir) if error is None else {}
        summary.update(summarize(iterations, read_finals(workdir, len(topo.hosts)), contributors, checks, error,
                                 cfg.dilation))
        summary["gst_ratio"] = (summary["gst_median_s"] / theory.gst_s) if summary["gst_median_s"] else None
        if cfg.calibration:
            summary["gst_ratio_calibrated"] = calibrated_ratio(summary)
        summary["fidelity"] = fidelity.report(topo, real_bw(bw, cfg), theory.gst_s * cfg.dilation, raw, rows,
                                              read_traces(workdir, len(topo.hosts)),
                                              read_finals(workdir, len(topo.hosts)),
                                              cpu.report(fidelity.measured_window(rows, WARMUP)), not cfg.local,
                                              port_drops, placement)
        log(fidelity.one_line(summary["fidelity"]))
        summary["duration_s"] = time.time() - started
        summary["completed"] = error is None and summary.get("iterations") == cfg.iters
        write_atomic(os.path.join(cfg.out, "summary.json"), json.dumps(summary, indent=1))
    if interruption is not None:
        raise interruption
    return summary
