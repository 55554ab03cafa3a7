"""One run: network + controller + one training process per host -> summary.json, iterations.csv, workers.csv."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List

from emulation.controller import free_ports
from emulation.theory import gst_theory
from emulation.topology import Topology, parse, parse_bandwidth
from workloads.algorithms import build_plan
from workloads.data import check_data
from workloads.models import build_model, input_shape, parameter_count
from workloads.plan import PlanError
from workloads.results import per_iteration, read_finals, read_rows, summarize, write_csvs
from workloads.worker import verify_sums

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAN_PORT = 7000
GLOO_PORT = 29500


class RunError(RuntimeError):
    """A run failed after it started (a worker died, timed out, ...); partial results are kept."""


@dataclass
class RunConfig:
    """Everything one run needs; validated before anything starts."""

    topology: str
    algo: str
    model: str = "lenet5"
    batch: int = 32
    iters: int = 10
    bw: str = "100"
    out: str = "results/run"
    servers: int = 0
    data: str = "synthetic"
    lr: float = 0.01
    seed: int = 0
    timeout: float = 120.0
    datapath: str = "auto"
    shape_ingress: bool = False
    local: bool = False
    codec: str = "none"
    pull: str = "ibatch"
    staleness: int = 0
    pf_tree: str = "5,3"
    pf_dvf: str = "1e-5,2e-5"
    pf_blocks: int = 8
    extra: Dict[str, object] = field(default_factory=dict)


def validate(cfg: RunConfig):
    """(topology, bandwidths, model input shape) or a ValueError subclass naming the bad parameter."""
    topo = parse(cfg.topology)
    bw = parse_bandwidth(cfg.bw, topo)
    if cfg.algo == "pflow":
        from workloads.pflow_worker import overlay_for, parse_tree
        servers = max(1, cfg.servers)
        if not 1 <= servers < len(topo.hosts):
            raise PlanError(f"--servers {cfg.servers} is invalid: give 1..{len(topo.hosts) - 1} on {topo.spec}")
        if not 0 <= cfg.staleness <= 100:
            raise ValueError(f"--staleness {cfg.staleness} is out of range: give 0 (BSP) .. 100 (SSP bound)")
        if not 1 <= cfg.pf_blocks <= 1024:
            raise ValueError(f"--pf-blocks {cfg.pf_blocks} is out of range: give 1..1024")
        try:
            parse_tree(cfg.pf_tree)
        except ValueError:
            raise ValueError(f"--pf-tree {cfg.pf_tree} is invalid: give none or T,H (max degree, max depth)") from None
        if cfg.pf_dvf not in ("none", ""):
            try:
                low, up = (float(v) for v in cfg.pf_dvf.split(","))
            except ValueError:
                raise ValueError(f"--pf-dvf {cfg.pf_dvf} is invalid: give none or LOW,UP thresholds") from None
            if not 0 <= low <= up:
                raise ValueError(f"--pf-dvf {cfg.pf_dvf} is invalid: need 0 <= LOW <= UP")
        overlay_for(asdict(cfg), topo, servers)  # infeasible T,H is an input error
    elif cfg.algo == "ibatch":
        servers = max(1, cfg.servers)
        if not 1 <= servers < len(topo.hosts):
            raise PlanError(f"--servers {cfg.servers} is invalid: give 1..{len(topo.hosts) - 1} on {topo.spec}")
        if cfg.pull not in ("ibatch", "layer", "default"):
            raise ValueError(f"--pull {cfg.pull} is unknown: valid are ibatch, layer, default")
        if cfg.codec != "none":
            raise ValueError("--codec applies to gradient all-reduce plans, not ibatch")
    elif cfg.algo != "gloo":
        build_plan(cfg.algo, topo, cfg.servers)
    elif cfg.servers:
        raise PlanError("--servers applies to ps only, not gloo")
    shape = input_shape(cfg.model)
    if cfg.codec not in ("none", "terngrad"):
        raise ValueError(f"--codec {cfg.codec} is unknown: valid are none, terngrad")
    if cfg.codec != "none" and cfg.algo == "gloo":
        raise ValueError(f"--codec {cfg.codec} needs a dmlbed plan (ps, ring, bml, ...), not gloo")
    if not 1 <= cfg.batch <= 4096:
        raise ValueError(f"--batch {cfg.batch} is out of range: give 1..4096")
    if not 1 <= cfg.iters <= 100000:
        raise ValueError(f"--iters {cfg.iters} is out of range: give 1..100000")
    if not 1 <= cfg.timeout <= 3600:
        raise ValueError(f"--timeout {cfg.timeout:g} is out of range: give 1..3600 seconds")
    if not 0 < cfg.lr < 10:
        raise ValueError(f"--lr {cfg.lr:g} is out of range: give a value in (0, 10)")
    check_data(cfg.data, shape)
    return topo, bw


class LocalHosts:
    """Runs every rank as a plain process on 127.0.0.1 (no emulation): for tests without root."""

    datapath = "loopback"
    shaping = "none (loopback)"

    def __init__(self):
        self.procs: List[subprocess.Popen] = []

    def popen(self, host: str, args: List[str], **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(args, start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def packet_ins(self) -> int:
        return 0

    def stop_all(self) -> None:
        from emulation.controller import stop_process_group
        for proc in self.procs:
            stop_process_group(proc.pid, proc, grace=1.0)


def worker_configs(cfg: RunConfig, topo: Topology, workdir: str) -> List[dict]:
    """The JSON config of every rank."""
    ranks = len(topo.hosts)
    ports = free_ports(4 * ranks + 1) if cfg.local else None  # 4 plan channels per rank + gloo
    base = {"topology": topo.spec, "algo": cfg.algo, "servers": cfg.servers, "model": cfg.model,
            "batch": cfg.batch, "iters": cfg.iters, "seed": cfg.seed, "lr": cfg.lr, "data": cfg.data,
            "out_dir": workdir, "timeout": cfg.timeout, "codec": cfg.codec, "pull": cfg.pull,
            "staleness": cfg.staleness, "pf_tree": cfg.pf_tree, "pf_dvf": cfg.pf_dvf, "pf_blocks": cfg.pf_blocks,
            "bw": cfg.bw, "ranks": ranks, "port": PLAN_PORT,
            "master": "127.0.0.1" if cfg.local else topo.hosts[0].ip,
            "master_port": ports[-1] if cfg.local else GLOO_PORT, **cfg.extra}
    out = []
    for r, host in enumerate(topo.hosts):
        c = dict(base, rank=r, host=host.name)
        if cfg.local:
            # lo is shared by all ranks: no per-rank byte counts
            c.update(interfaces=[], ifname=None, loopback_port_sets=[ports[ranks * i:ranks * (i + 1)] for i in range(4)])
        else:
            c.update(interfaces=[i.name for i in host.interfaces], ifname=host.interfaces[0].name)
        out.append(c)
    return out


def monitor(hosts, procs: Dict[int, subprocess.Popen], topo: Topology, cfg: RunConfig, workdir: str,
            progress: bool) -> None:
    """Wait for every worker, showing progress; raise RunError naming the worker that failed or stalled."""
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
            allowed = cfg.timeout + (startup_grace if done <= 0 else 0)
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


def run(cfg: RunConfig, log: Callable[[str], None] = lambda m: None, progress: bool = True) -> dict:
    """Run one experiment end to end; always writes summary.json (with `error` on failure)."""
    topo, bw = validate(cfg)
    model, _ = build_model(cfg.model)
    parameters = parameter_count(model)
    del model
    gradient_bytes = parameters * 4
    theory = gst_theory(cfg.algo, topo, gradient_bytes, bw, cfg.servers)
    if cfg.algo in ("ibatch", "pflow"):
        cfg.servers = max(1, cfg.servers)
    os.makedirs(cfg.out, exist_ok=True)
    workdir = os.path.join(cfg.out, "workers")
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    if cfg.algo in ("ibatch", "pflow"):
        plan = None
        contributors = list(range(max(1, cfg.servers), len(topo.hosts)))
    else:
        plan = build_plan(cfg.algo, topo, cfg.servers) if cfg.algo != "gloo" else None
        contributors = list(plan.contributors) if plan else list(range(len(topo.hosts)))
    summary = {"topology": topo.spec, "algo": cfg.algo, "model": cfg.model, "workers": len(contributors),
               "ranks": len(topo.hosts), "servers": cfg.servers, "parameters": parameters,
               "gradient_bytes": gradient_bytes, "bw_mbps": bw[0] if len(set(bw)) == 1 else list(bw),
               "batch": cfg.batch, "data": cfg.data, "codec": cfg.codec, "iterations_requested": cfg.iters,
               "gst_theory_s": theory["gst_s"], "gst_formula": theory["formula"], "tf_s": theory["tf_s"],
               "config": asdict(cfg)}
    error = None
    started = time.time()
    if cfg.local:
        network = contextlib.nullcontext(LocalHosts())
    else:
        from emulation.network import EmulatedNetwork
        network = EmulatedNetwork(topo, bw, datapath=cfg.datapath, ingress_shaping=cfg.shape_ingress, log=log)
    try:
        with network as hosts:
            summary.update(datapath=hosts.datapath, shaping=hosts.shaping)
            try:
                procs = {}
                for c in worker_configs(cfg, topo, os.path.abspath(workdir)):
                    path = os.path.join(workdir, f"rank-{c['rank']}.config.json")
                    with open(path, "w") as f:
                        json.dump(c, f)
                    err = open(os.path.join(workdir, f"rank-{c['rank']}.stderr"), "w")
                    procs[c["rank"]] = hosts.popen(c["host"], [sys.executable, "-m", "workloads.worker", "--config",
                                                              os.path.abspath(path)],
                                                   stdout=subprocess.DEVNULL, stderr=err, cwd=PROJECT)
                    err.close()
                log(f"started {len(procs)} workers: {cfg.algo} on {topo.spec}, {cfg.model}, batch {cfg.batch}")
                monitor(hosts, procs, topo, cfg, workdir, progress)
                summary["packet_in"] = hosts.packet_ins()
            finally:
                if cfg.local:
                    hosts.stop_all()
    except (RunError, RuntimeError, KeyboardInterrupt) as exc:
        error = str(exc) or type(exc).__name__
        if isinstance(exc, KeyboardInterrupt):
            error = "interrupted"
    finally:
        rows = read_rows(workdir, len(topo.hosts))
        iterations = per_iteration(rows, contributors, None if cfg.local else topo)
        write_csvs(cfg.out, rows, iterations, None if cfg.local else topo)
        verified = verify_sums(workdir, contributors, range(len(topo.hosts))) if error is None else None
        summary.update(summarize(iterations, read_finals(workdir, len(topo.hosts)), contributors, verified, error))
        summary["gst_ratio"] = (summary["gst_median_s"] / theory["gst_s"]) if summary["gst_median_s"] else None
        summary["duration_s"] = time.time() - started
        with open(os.path.join(cfg.out, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
    if error == "interrupted":
        raise KeyboardInterrupt
    return summary
