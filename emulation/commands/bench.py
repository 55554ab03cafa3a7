"""`dmlbed bench`: a collective benchmark in the style of nccl-tests -- a sweep of message sizes per algorithm,
raw fp32 buffers, the network brought up once; time, algorithm and bus bandwidth, theory, and a sum check."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
from dataclasses import dataclass, replace
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from emulation.commands.base import WARMUP, Command, reps_option
from emulation.core.addressing import PLAN_PORT
from emulation.core.calibration import load as load_calibration
from emulation.results.bench_best import best_by_op
from emulation.results.bench_fidelity import host_tcp, judge
from emulation.results.bench_tables import bench_label, nccl_tests_blocks, print_bench, write_nccl_tests
from emulation.results.fidelity import one_line
from emulation.run.lifecycle import Lifecycle
from emulation.run.options import (DILATION, LINKS, NETWORK, OUTPUT, PLAN_INPUTS, RANKS, REPLACE, TOPOLOGY, WAIT,
                                   OptionError, RunConfig, command_option)
from emulation.run.outputs import output_folder
from emulation.results.files import write_atomic, write_table
from emulation.run.progress import log
from emulation.results.provenance import provenance
from emulation.run.ranks import PORT_STRIDE, run_bench_ranks
from emulation.run.resolution import Checked, NetworkSettings, payload_rates
from emulation.results.iterations import rep_times
from emulation.run.sampling import counter_gains, gains
from emulation.run.validation import (check_calibration, check_network, check_synchronization, check_values,
                                      check_workers)
from emulation.simulation.calibrated import calibrated_gst
from emulation.simulation.flows import simulate_plan
from emulation.simulation.routes import Router
from workloads.algorithms import names_with
from workloads.bench_worker import GLOO
from workloads.collectives import ALLREDUCE, OPS, get as get_collective
from workloads.engine import CHUNK_BYTES
from workloads.plan import Plan, PlanError
from workloads.rankconfig import BenchJob
from workloads.runfolder import RunFolder

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
MAX_SIZE = 1 << 30
COLUMNS = ["op", "algo", "size_bytes", "time_s", "algbw_mbps", "busbw_mbps", "theory_s", "ratio", "wrong", "reps",
           "faster_than_links", "fidelity"]
SIMULATED_COLUMNS = ["sim_s", "ratio_sim"]
CALIBRATED_COLUMNS = ["theory_cal_s", "ratio_cal"]
BENCH_FILES = ("bench.json", "bench.csv")
EMULATE, SIMULATE = "emulate", "simulate"
MODES = (EMULATE, SIMULATE)
FORMATS = ("dmlbed", "nccl-tests")
UNLIMITED = 1e6  # times a link's rate: a direction the flow model treats as unshaped
FASTER_THAN_LINKS = 0.9  # a row this far below its model moved data faster than the shaped links carry
INGRESS_MARGIN = 0.02  # a plan this much faster with switch->host unshaped has hosts receiving faster than they send
class Bench(Command):
    name, help = "bench", "collective benchmark: message-size sweep, algbw/busbw (like nccl-tests)"
    description = ("Brings the network up once and, per collective and algorithm, runs it on raw fp32 buffers of "
                   "each size: warm-up, then timed repetitions, each checked against the op's exact result; "
                   "bench.csv/json and busbw.png with the closed form and the flow model beside every size. "
                   "torch.distributed's own gloo collective is timed as --algo gloo.")
    examples = (
        ("ring, halving-doubling and gloo's all-reduce across message sizes, nccl-tests style",
         "--topo star:8 --algo ring,hd,gloo --sizes 64K:64M:x4"),
        ("all-gather and all-to-all of 64 hosts in the flow model",
         "--topo star:64 --op allgather,alltoall --mode simulate"),
    )
    groups = (TOPOLOGY, LINKS, NETWORK, RANKS, DILATION, PLAN_INPUTS, OUTPUT, REPLACE, WAIT)
    own = (command_option("op", f"comma-separated collectives ({', '.join(OPS)})", ALLREDUCE),
           command_option("algo", "comma-separated algorithms, e.g. ring,ps,gloo (all-reduce: required; other ops: "
                                  "every algorithm of each, and gloo, when not given)"),
           command_option("sizes", "MIN:MAX:xFACTOR or a list (bytes, K/M/G; all-to-all: each rank's send buffer)",
                          "1M:64M:x4"),
           WARMUP, reps_option(5),
           command_option("mode", "emulate: run it on the emulated network; simulate: the flow model beside the "
                                  "closed form only, no network (any host count; gloo has no model)", EMULATE,
                          choices=MODES),
           command_option("format", "the table printed: dmlbed's (every model beside every size) or nccl-tests' "
                                    "(its columns and units, as its parsers read; written to "
                                    "OUT/nccl-tests/LABEL.txt either way)", "dmlbed", choices=FORMATS))

    def prepare(self, args):
        values = self.values(args)
        algos = [a.strip() for a in (values["algo"] or "").split(",") if a.strip()]
        ops = [o.strip() for o in values["op"].split(",") if o.strip()]
        return prepare(self.config(args), algos, parse_sizes(values["sizes"]), values["warmup"], values["reps"], ops,
                       values["mode"], values["format"])

    def needs_root(self, job):
        return job.mode == EMULATE and not job.network.local

    def execute(self, job, args):
        return bench(job, log=log) if job.mode == EMULATE else modelled(job)

    def show(self, report):
        if report.get("format") == "nccl-tests":
            print("".join(nccl_tests_blocks(report).values()), end="")
        else:
            print_bench(report)

    def exit_code(self, report):
        return 0 if not report.get("error") and not any(r["wrong"] for r in report["rows"]) else 1


def parse_size(text: str) -> int:
    """'64K' -> 65536 (binary units, as nccl-tests)."""
    m = re.fullmatch(r"(\d+)([KMG]?)B?", text.strip().upper())
    if not m:
        raise OptionError(f"--sizes value '{text}' is invalid: give bytes with an optional K, M or G (e.g. 64K)")
    return int(m.group(1)) * UNITS[m.group(2)]


def parse_sizes(text: str) -> List[int]:
    """'1M:64M:x4' (min:max:xFACTOR) or '64K,1M,16M' -> sizes in bytes, each a multiple of 4 (fp32)."""
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3 or not re.fullmatch(r"x\d+", parts[2]):
            raise OptionError(f"--sizes '{text}' is invalid: give MIN:MAX:xFACTOR (e.g. 64K:256M:x4) or a list")
        low, high, factor = parse_size(parts[0]), parse_size(parts[1]), int(parts[2][1:])
        if factor < 2 or low > high:
            raise OptionError(f"--sizes '{text}' is invalid: MIN <= MAX and a factor of 2 or more")
        sizes = []
        while low <= high:
            sizes.append(low)
            low *= factor
    else:
        sizes = [parse_size(s) for s in text.split(",")]
    for size in sizes:
        if size < 4 or size % 4 or size > MAX_SIZE:
            raise OptionError(f"--sizes {size} bytes is invalid: give multiples of 4 bytes (fp32) from 4 to 1G")
    return sizes


@dataclass(frozen=True)
class BenchRun:
    """One (op, algorithm) of a benchmark, checked: its configuration (with its synchronization for an all-reduce
    plan) and, for the rest, the (op, algorithm, root) its ranks run."""

    op: str
    algo: str
    checked: Checked
    collective: Optional[Tuple[str, str, int]] = None

    @property
    def label(self) -> str:
        """Its rows' and folders' name: the algorithm, and the op when it is not all-reduce."""
        return bench_label(self.op, self.algo)

    def plan_pieces(self, size: int) -> Tuple[Plan, List[int]]:
        """Its plan for a buffer of size bytes (one tensor), and the bytes of each piece (not gloo's: gloo runs its
        own algorithm)."""
        c, topo = self.checked, self.checked.topo
        if self.op == ALLREDUCE:
            plan = c.algorithm.build_plan(topo, c.servers, c.options, c.bw, size, [size // 4])
            return plan, [4 * n for n in plan.piece_sizes([size // 4])]
        collective = get_collective(self.op)
        plan = collective.plan(self.algo, len(topo.hosts))
        return plan, [4 * n for n in collective.op_pieces(size, len(topo.hosts))]


@dataclass(frozen=True)
class BenchPlan:
    """A benchmark checked before anything starts: the network, one checked run per (op, algorithm), the sizes,
    the repetitions."""

    cfg: RunConfig
    network: NetworkSettings
    runs: List[BenchRun]
    sizes: List[int]
    warmup: int = 2
    reps: int = 5
    ingress_bound: Tuple[str, ...] = ()  # runs whose hosts receive faster than they send: switch->host shaped
    mode: str = EMULATE
    format: str = FORMATS[0]  # the table printed (both are written)


def prepare(base: RunConfig, algos: List[str], sizes: List[int], warmup: int = 2, reps: int = 5,
            ops: Sequence[str] = (ALLREDUCE,), mode: str = EMULATE, table_format: str = FORMATS[0]) -> BenchPlan:
    """Everything a benchmark needs, checked before anything starts: the network section, one run per op and
    algorithm (all-reduce: the plan algorithms and gloo; other ops: their plans and gloo; every op's algorithms and
    gloo when none are named), memory for the largest buffer, a calibration, and an --out free of another
    benchmark. Simulated: no host cap, memory or calibration, and no gloo (torch's algorithm has no model)."""
    check_values(base, groups=Bench.groups)
    if table_format not in FORMATS:
        raise OptionError(f"--format {table_format} is invalid: give one of {', '.join(FORMATS)}")
    emulated = mode == EMULATE
    if not emulated and base.local:
        raise OptionError("--mode simulate runs no ranks and --local runs them on loopback: give one of them")
    if not emulated and GLOO in algos:
        raise OptionError("--algo gloo runs torch.distributed's own algorithm, which the flow model does not have: "
                          "drop it with --mode simulate, or emulate")
    network = check_network(base, emulated=emulated)
    if not ops or len(set(ops)) != len(ops) or any(op not in OPS for op in ops):
        raise OptionError(f"--op '{','.join(ops)}' is invalid: give distinct collectives from {', '.join(OPS)}")
    if algos and len(set(algos)) != len(algos):
        raise OptionError(f"--algo '{','.join(algos)}' is invalid: give one or more distinct algorithms, e.g. ring,ps")
    if not algos and ALLREDUCE in ops:
        raise OptionError("--algo is required with --op allreduce: give plan all-reduce algorithms or gloo, e.g. "
                          "ring,ps,gloo")
    runs, ranks = [], len(network.topo.hosts)
    for algo in algos:  # an algorithm runs on the ops that have it, and must have one
        if not any(does(op, algo) for op in ops):
            valid = sorted({a for op in ops for a in get_collective(op).algorithms + (GLOO,)} - {""})
            raise OptionError(f"--algo {algo} does not do {', '.join(ops)}: valid are {', '.join(valid)}"
                              + (" and the plan all-reduce algorithms" if ALLREDUCE in ops else ""))
    for op in ops:
        for algo in [a for a in algos if does(op, a)] or get_collective(op).algorithms + ((GLOO,) if emulated else ()):
            runs.append(check_run(base, network, op, algo, sizes, ranks))
    if not emulated:
        out = output_folder(base.out, BENCH_FILES, "a benchmark", base.force, "bench")
        return BenchPlan(replace(base, out=out), network, runs, sizes, warmup, reps, mode=mode, format=table_format)
    binding = [run.label for run in runs if ingress_binds(run, max(sizes), base)]
    if binding and not network.local and not network.shape_ingress:
        network = replace(network, shape_ingress=True)
        runs = [replace(run, checked=replace(run.checked, network=network)) for run in runs]
    check_workers(network, max(collective_buffer(run.op, size, ranks) for run in runs for size in sizes), buffers=True)
    check_calibration(base, network, emulated=True)
    out = output_folder(base.out, BENCH_FILES, "a benchmark", base.force, "bench")
    return BenchPlan(replace(base, out=out), network,
                     [replace(r, checked=replace(r.checked, cfg=replace(r.checked.cfg, out=out))) for r in runs],
                     sizes, warmup, reps, tuple(binding), format=table_format)


def does(op: str, algo: str) -> bool:
    """Whether bench can run op with algo (all-reduce: any algorithm name; check_run says which can)."""
    return algo == GLOO or op == ALLREDUCE or algo in get_collective(op).algorithms


def check_run(base: RunConfig, network: NetworkSettings, op: str, algo: str, sizes: List[int], ranks: int
              ) -> BenchRun:
    """One (op, algorithm) checked: OptionError naming what is wrong and what is valid."""
    if op == ALLREDUCE and algo != GLOO:
        plans = names_with(lambda a: a.plan is not None)
        if algo not in plans:
            raise OptionError(f"--algo {algo} cannot be benchmarked: bench runs the plan all-reduce algorithms "
                              f"({', '.join(plans)}) and gloo")
        cfg = replace(base, algo=algo)
        return BenchRun(op, algo, Checked(cfg, network, check_synchronization(cfg, network.topo)))
    if op == ALLREDUCE:
        return BenchRun(op, algo, Checked(base, network), (op, algo, 0))
    collective = get_collective(op)
    if algo == GLOO:
        even = collective.pieces(ranks) // collective.buffer_factor(ranks) if collective.pieces(ranks) > 1 else 1
        uneven = [s for s in sizes if s % (4 * even)]
        if uneven and collective.split is None:  # an op of uneven pieces gives gloo each piece's size
            raise OptionError(f"--sizes {uneven[0]} bytes is invalid for gloo's {op} over {ranks} ranks: its pieces "
                              f"must be equal, so give multiples of {4 * even} bytes")
    else:
        try:
            collective.plan(algo, ranks)
        except PlanError as exc:
            raise OptionError(f"--algo {algo}: {exc}") from None
    return BenchRun(op, algo, Checked(base, network), (op, algo, 0))


class UnshapedIngress(Router):
    """Routes as the network's, every switch->host direction as good as unlimited (the userspace datapath without
    --shape-ingress)."""

    def capacity(self, hop, rates):
        return super().capacity(hop, rates) * (UNLIMITED if self.topo.is_host(hop[1]) else 1)


def ingress_binds(run: BenchRun, size: int, base: RunConfig) -> bool:
    """Whether a run's hosts would receive faster than their links carry were switch->host unshaped: its plan in
    the flow model runs faster with those directions unlimited (gloo's: its op lands on the root, as gather's and
    reduce's do)."""
    if run.algo == GLOO:
        return get_collective(run.op).into_root
    plan, pieces = run.plan_pieces(size)
    rates = payload_rates(base, run.checked.bw)
    times = [simulate_plan(plan, pieces, router, rates, chunk_bytes=CHUNK_BYTES).gst_s
             for router in (Router(run.checked.topo), UnshapedIngress(run.checked.topo))]
    return times[1] < times[0] * (1 - INGRESS_MARGIN)


def collective_buffer(op: str, size: int, ranks: int) -> int:
    """Bytes of one rank's buffer for an op of size bytes."""
    return size if op == ALLREDUCE else get_collective(op).buffer_bytes(size, ranks)


def table(algo: str, records: List[dict], contributors: int, theory: Callable[[int], Optional[float]],
          calibrated: Callable[[int], float] = None, dilation: float = 1.0, op: str = ALLREDUCE,
          simulated: Optional[Callable[[int], Optional[float]]] = None) -> List[dict]:
    """nccl-tests' columns for one algorithm of one op: median time, algbw = size/time, busbw = algbw x the op's
    factor (all-reduce: 2(n-1)/n), the closed form, the flow model (when given) and the calibrated theory (when
    there is a calibration)."""
    factor = busbw_factor(op, contributors)
    times = rep_times(records, dilation)
    rows = []
    for size, ts in times.items():
        t = statistics.median(ts)
        th = theory(size)
        wrong = sum(r["wrong"] for r in records if r["size"] == size and not r["warmup"])
        rows.append(dict(timing_row(op, algo, size, t, th, factor), wrong=wrong, reps=len(ts), time_min_s=min(ts),
                         time_max_s=max(ts)))
        if simulated:
            sim = simulated(size)
            rows[-1].update(sim_s=sim, ratio_sim=t / sim if sim else None)
        # the lower of the plan's flow model and its closed form (gloo: the op's bound): the engine's send is done
        # once in the socket's buffer, the model's once arrived, so a plan can run ahead of its flow model, never
        # ahead of its bound
        model = min((m for m in (rows[-1].get("sim_s"), th) if m), default=None)
        rows[-1]["faster_than_links"] = bool(model) and t < FASTER_THAN_LINKS * model
        if calibrated:
            cal = calibrated(size)
            rows[-1].update(theory_cal_s=cal, ratio_cal=t / cal if cal else None)
    return rows


def timing_row(op: str, algo: str, size: int, t: float, th: Optional[float], factor: float) -> dict:
    """The columns every row has from its time and its closed form: algbw = size/time, busbw = algbw x the op's
    factor, the ratio to theory and theory's own busbw."""
    algbw = size * 8 / t / 1e6
    return {"op": op, "algo": algo, "size_bytes": size, "time_s": t, "algbw_mbps": algbw, "busbw_mbps": algbw * factor,
            "theory_s": th, "ratio": t / th if th else None,
            "theory_busbw_mbps": size * 8 / th / 1e6 * factor if th else None}


def busbw_factor(op: str, ranks: int) -> float:
    """nccl-tests' bus bandwidth factor of an op over this many ranks (all-reduce: n = ranks that contribute)."""
    return get_collective(op).busbw(ranks)


def bench(job: BenchPlan, log: Callable[[str], None] = lambda m: None) -> dict:
    """Run the sweep for every checked (op, algorithm) on one network, in one lifecycle; bench.json is written even
    when it fails (with `error` and the rows measured so far), bench.csv and busbw.png from the rows."""
    base, network, sizes = job.cfg, job.network, job.sizes
    folder = RunFolder(base.out)
    rows: List[dict] = []
    ops = list(dict.fromkeys(r.op for r in job.runs))
    report = {"mode": EMULATE, "topology": network.topo.spec, "routing": network.topo.routing,
              "bw_mbps": list(network.bw), "sizes": sizes,
              "warmup": job.warmup, "reps": job.reps, "ops": ops,
              "busbw_factor": {op: get_collective(op).busbw_text for op in ops},
              "busbw_note": busbw_note(network.topo), "local": base.local, "calibration": base.calibration,
              "dilation": base.dilation, "mtu": None if base.local else base.mtu, "provenance": provenance(),
              "ingress_bound": list(job.ingress_bound), "ranks": len(network.topo.hosts), "format": job.format}
    cal = load_calibration(base.calibration, network.topo.spec, network.bw) if base.calibration else None

    def body(life: Lifecycle) -> None:
        report.update(datapath=life.hosts.datapath, shaping=life.hosts.shaping, fidelity={})
        pids = life.hosts.namespace_pids()
        with life.sampling():
            for i, run in enumerate(job.runs):
                files = folder.ranks(run.label)
                shutil.rmtree(files.path, ignore_errors=True)
                tcp_before, drops_before = host_tcp(pids), life.hosts.port_drops()
                records = run_bench_ranks(life.hosts, run.checked, BenchJob(tuple(sizes), job.warmup, job.reps,
                                                                            collective=run.collective),
                                          files, PLAN_PORT + PORT_STRIDE * i, run.label, log, life.server)
                tcp = gains(tcp_before, host_tcp(pids))
                drops = counter_gains(drops_before, life.hosts.port_drops())
                ranks = len(run.checked.contributors) if run.checked.sync else len(network.topo.hosts)
                ports = {} if base.local else {(t["rank"], t["peer"], t["stream"]): tuple(t["ports"])
                                               for t in files.read_transfers(len(network.topo.hosts))
                                               if t.get("ports")}
                theory, simulated, calibrated = models(run, cal, base, ports)
                mine = table(run.algo, records, ranks, theory, calibrated, base.dilation, run.op, simulated)
                for row in mine if base.local else ():  # loopback shapes nothing: no timing is judged against links
                    row["faster_than_links"] = None
                verdict = judge(mine, rep_times(records, base.dilation), records, life.cpu.report, tcp, drops,
                                not base.local)
                report["fidelity"][run.label] = verdict
                log(f"{run.label}: {one_line(verdict)}")
                for row in mine:
                    row["fidelity"] = verdict["verdict"]
                rows.extend(mine)

    def finish(life: Lifecycle) -> dict:
        report.update(rows=rows, error=life.error, best=best_by_op(rows, network.bw[0], GLOO))
        if rows:
            write_table(os.path.join(base.out, "bench.csv"), rows,
                        COLUMNS + SIMULATED_COLUMNS + (CALIBRATED_COLUMNS if base.calibration else []))
            report["plot"] = plot(os.path.join(base.out, "busbw.png"), rows, network)
            write_nccl_tests(base.out, report)
        return report

    return Lifecycle(network, log, os.path.join(base.out, "bench.json"), fork_server=folder.ranks(),
                     reraise=True).run(body, finish, lambda: os.makedirs(base.out, exist_ok=True))


def modelled(job: BenchPlan) -> dict:
    """The benchmark in the flow model beside the closed form, no network: per (op, algorithm) and size the plan's
    flow-model time as its time (busbw from it) and its ratio to the closed form; nothing is run, so nothing is
    checked (#wrong is None: `dmlbed bench` emulated, or tests/test_collectives.py, checks the plans' sums)."""
    base, network = job.cfg, job.network
    rows = []
    for run in job.runs:
        ranks = len(run.checked.contributors) if run.checked.sync else len(network.topo.hosts)
        theory, simulated, _ = models(run, None, base)  # each flow spread over its equal-cost paths
        factor = busbw_factor(run.op, ranks)
        for size in job.sizes:
            t = simulated(size)
            rows.append(dict(timing_row(run.op, run.algo, size, t, theory(size), factor), wrong=None, reps=0,
                             faster_than_links=None, fidelity="flow model", sim_s=t, ratio_sim=1.0))
    ops = list(dict.fromkeys(r.op for r in job.runs))
    os.makedirs(base.out, exist_ok=True)
    report = {"mode": SIMULATE, "topology": network.topo.spec, "routing": network.topo.routing,
              "bw_mbps": list(network.bw), "sizes": job.sizes,
              "ops": ops, "busbw_factor": {op: get_collective(op).busbw_text for op in ops},
              "busbw_note": busbw_note(network.topo), "datapath": "flow model",
              "ecmp": "dmodk" if network.topo.routing == "dmodk" else "spread",
              "provenance": provenance(), "rows": rows, "error": None, "best": best_by_op(rows, network.bw[0], GLOO),
              "ranks": len(network.topo.hosts), "format": job.format}
    write_table(os.path.join(base.out, "bench.csv"), rows, COLUMNS + SIMULATED_COLUMNS)
    report["plot"] = plot(os.path.join(base.out, "busbw.png"), rows, network)
    write_nccl_tests(base.out, report)
    write_atomic(os.path.join(base.out, "bench.json"), json.dumps(report, indent=1))
    return report


def models(run: BenchRun, cal, base: RunConfig, ports: Optional[Dict] = None):
    """A run's closed form, flow model and calibrated theory, each seconds per size (None where it has none): an
    all-reduce plan's are its algorithm's; another op's plan's are its own; gloo's closed form is the op's bound (its
    bandwidth-optimal time, at which busbw is the link rate) and it has no flow model (its algorithm is gloo's). The
    flow model puts each connection on the ECMP path its recorded TCP ports hashed to (ports), else spreads it."""
    c, topo = run.checked, run.checked.topo
    ranks = len(topo.hosts)
    rate = min(c.bw) * 1e6 / 8
    if run.algo == GLOO:
        return (lambda size: get_collective(run.op).bound_s(ranks, size, rate)), None, None
    router = Router(topo, "hash", ports) if ports else Router(topo)
    rates = payload_rates(base, c.bw)

    def simulated(size: int) -> float:
        return simulate_plan(*run.plan_pieces(size), router, rates, latency_s=base.latency_us * 1e-6,
                             chunk_bytes=CHUNK_BYTES).gst_s
    if run.op == ALLREDUCE:
        theory = lambda size: c.algorithm.gst_theory(  # noqa: E731 (a raw buffer is one tensor)
            topo, size, c.bw, c.servers, options=c.options, layer_sizes=[size // 4]).gst_s
        calibrated = None if cal is None else \
            lambda size: calibrated_gst(c.algorithm, topo, c.servers, [size // 4], cal, c.options)  # noqa: E731
        return theory, simulated, calibrated
    collective = get_collective(run.op)
    return (lambda size: collective.theory_s(run.algo, ranks, size, rate, CHUNK_BYTES)), simulated, None


def busbw_note(topo) -> str:
    """What bus bandwidth means on this topology."""
    nics = max(len(h.interfaces) for h in topo.hosts)
    if nics > 1:
        return (f"hosts have {nics} NICs: busbw counts the data each host moves, so it can reach {nics}x one link's "
                f"rate (BML and BlueConnect use every NIC; ring and PS use the level the rules pin)")
    return "one NIC per host: busbw near the link rate means the links are saturated"


def plot(path: str, rows: List[dict], network: NetworkSettings) -> str:
    """busbw against size per algorithm, with the theoretical curve dashed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for n, (op, algo) in enumerate(dict.fromkeys((r["op"], r["algo"]) for r in rows)):
        mine = [r for r in rows if (r["op"], r["algo"]) == (op, algo)]
        colour = plt.get_cmap("tab20")(n % 20)
        name = algo if op == ALLREDUCE else f"{op} {algo}"
        ax.plot([r["size_bytes"] for r in mine], [r["busbw_mbps"] for r in mine], "o-", color=colour,
                label=f"{name} measured")
        ax.plot([r["size_bytes"] for r in mine], [r["theory_busbw_mbps"] for r in mine], "--", color=colour,
                label=f"{name} theory")
    ax.axhline(min(network.bw), color="0.5", lw=0.8, label="link rate")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (Mbit/s, algbw x the op's factor)")
    ax.set_title(f"dmlbed bench on {network.topo.spec}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


COMMAND = Bench()
