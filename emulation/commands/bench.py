"""`dmlbed bench`: a collective benchmark in the style of nccl-tests -- a sweep of message sizes per algorithm,
raw fp32 buffers, the network brought up once; time, algorithm and bus bandwidth, theory, and a sum check."""

from __future__ import annotations

import os
import re
import shutil
import statistics
from dataclasses import dataclass, replace
from typing import Callable, List

from emulation.commands.base import WARMUP, Command, reps_option
from emulation.core.addressing import PLAN_PORT
from emulation.core.calibration import load as load_calibration
from emulation.run.lifecycle import Lifecycle
from emulation.run.options import (DILATION, LINKS, NETWORK, OUTPUT, PLAN_INPUTS, RANKS, REPLACE, TOPOLOGY, WAIT,
                                   OptionError, RunConfig, command_option)
from emulation.run.outputs import output_folder, write_table
from emulation.run.progress import log
from emulation.run.provenance import provenance
from emulation.run.ranks import PORT_STRIDE, run_bench_ranks
from emulation.run.resolution import Checked, NetworkSettings
from emulation.run.results import rep_times
from emulation.run.validation import (check_calibration, check_network, check_synchronization, check_values,
                                      check_workers)
from emulation.simulation.calibrated import calibrated_gst
from workloads.algorithms import names_with
from workloads.rankconfig import BenchJob
from workloads.runfolder import RunFolder

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
MAX_SIZE = 1 << 30
BUSBW_FACTOR = "2(n-1)/n"  # all-reduce, as nccl-tests: n = ranks that contribute
COLUMNS = ["algo", "size_bytes", "time_s", "algbw_mbps", "busbw_mbps", "theory_s", "ratio", "wrong", "reps"]
CALIBRATED_COLUMNS = ["theory_cal_s", "ratio_cal"]
BENCH_FILES = ("bench.json", "bench.csv")
class Bench(Command):
    name, help = "bench", "collective benchmark: message-size sweep, algbw/busbw (like nccl-tests)"
    description = ("Brings the network up once and, per algorithm, all-reduces raw fp32 buffers of each size: "
                   "warm-up, then timed repetitions, each checked against the exact sum; bench.csv/json and "
                   "busbw.png with the closed form beside every size.")
    groups = (TOPOLOGY, LINKS, NETWORK, RANKS, DILATION, PLAN_INPUTS, OUTPUT, REPLACE, WAIT)
    own = (command_option("algo", "comma-separated plan algorithms, e.g. ring,ps", required=True),
           command_option("sizes", "MIN:MAX:xFACTOR or a list (bytes, K/M/G)", "1M:64M:x4"),
           WARMUP, reps_option(5))

    def prepare(self, args):
        values = self.values(args)
        algos = [a.strip() for a in values["algo"].split(",") if a.strip()]
        return prepare(self.config(args), algos, parse_sizes(values["sizes"]), values["warmup"], values["reps"])

    def needs_root(self, job):
        return not job.network.local

    def execute(self, job, args):
        return bench(job, log=log)

    def show(self, report):
        print_bench(report)

    def exit_code(self, report):
        return 0 if not report.get("error") and all(r["wrong"] == 0 for r in report["rows"]) else 1


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
class BenchPlan:
    """A benchmark checked before anything starts: the network, one checked synchronization per algorithm, the
    sizes, the repetitions."""

    cfg: RunConfig
    network: NetworkSettings
    runs: List[Checked]
    sizes: List[int]
    warmup: int = 2
    reps: int = 5


def prepare(base: RunConfig, algos: List[str], sizes: List[int], warmup: int = 2, reps: int = 5) -> BenchPlan:
    """Everything a benchmark needs, checked before anything starts: the network section, one synchronization per
    algorithm (plan all-reduce algorithms only; no model: the buffers are raw), memory for the largest size, a
    calibration, and an --out free of another benchmark."""
    check_values(base, groups=Bench.groups)
    network = check_network(base)
    if not algos or len(set(algos)) != len(algos):
        raise OptionError(f"--algo '{','.join(algos)}' is invalid: give one or more distinct algorithms, e.g. ring,ps")
    plans = names_with(lambda a: a.plan is not None)
    runs = []
    for algo in algos:
        if algo not in plans:
            raise OptionError(f"--algo {algo} cannot be benchmarked: bench runs the plan all-reduce algorithms "
                              f"({', '.join(plans)})")
        cfg = replace(base, algo=algo)
        runs.append(Checked(cfg, network, check_synchronization(cfg, network.topo)))
    check_workers(network, 3 * max(sizes) // 2)
    check_calibration(base, network, emulated=True)
    out = output_folder(base.out, BENCH_FILES, "a benchmark", base.force, "bench")
    return BenchPlan(replace(base, out=out), network, [replace(c, cfg=replace(c.cfg, out=out)) for c in runs],
                     sizes, warmup, reps)


def table(algo: str, records: List[dict], contributors: int, theory: Callable[[int], float],
          calibrated: Callable[[int], float] = None, dilation: float = 1.0) -> List[dict]:
    """nccl-tests' columns for one algorithm: median time, algbw = size/time, busbw = algbw x 2(n-1)/n (and the
    calibrated theory when there is a calibration)."""
    factor = 2 * (contributors - 1) / contributors if contributors > 1 else 1.0
    times = rep_times(records, dilation)
    rows = []
    for size, ts in times.items():
        t = statistics.median(ts)
        algbw = size * 8 / t / 1e6
        th = theory(size)
        wrong = sum(r["wrong"] for r in records if r["size"] == size and not r["warmup"])
        rows.append({"algo": algo, "size_bytes": size, "time_s": t, "algbw_mbps": algbw, "busbw_mbps": algbw * factor,
                     "theory_s": th, "ratio": t / th if th else None, "wrong": wrong, "reps": len(ts),
                     "time_min_s": min(ts), "time_max_s": max(ts),
                     "theory_busbw_mbps": size * 8 / th / 1e6 * factor if th else None})
        if calibrated:
            cal = calibrated(size)
            rows[-1].update(theory_cal_s=cal, ratio_cal=t / cal if cal else None)
    return rows


def bench(job: BenchPlan, log: Callable[[str], None] = lambda m: None) -> dict:
    """Run the sweep for every checked algorithm on one network, in one lifecycle; bench.json is written even when
    it fails (with `error` and the rows measured so far), bench.csv and busbw.png from the rows."""
    base, network, sizes = job.cfg, job.network, job.sizes
    folder = RunFolder(base.out)
    rows: List[dict] = []
    report = {"topology": network.topo.spec, "bw_mbps": list(network.bw), "sizes": sizes, "warmup": job.warmup,
              "reps": job.reps, "busbw_factor": BUSBW_FACTOR, "busbw_note": busbw_note(network.topo),
              "local": base.local, "calibration": base.calibration, "dilation": base.dilation,
              "mtu": None if base.local else base.mtu, "provenance": provenance()}
    cal = load_calibration(base.calibration, network.topo.spec, network.bw) if base.calibration else None

    def body(life: Lifecycle) -> None:
        report.update(datapath=life.hosts.datapath, shaping=life.hosts.shaping)
        for i, checked in enumerate(job.runs):
            algo = checked.cfg.algo
            files = folder.ranks(algo)
            shutil.rmtree(files.path, ignore_errors=True)
            records = run_bench_ranks(life.hosts, checked, BenchJob(tuple(sizes), job.warmup, job.reps), files,
                                      PLAN_PORT + PORT_STRIDE * i, algo, log, life.server)
            theory = lambda size, c=checked: c.algorithm.gst_theory(  # noqa: E731 (a raw buffer is one tensor)
                c.topo, size, c.bw, c.servers, options=c.options, layer_sizes=[size // 4]).gst_s
            calibrated = None if cal is None else \
                lambda size, c=checked: calibrated_gst(c.algorithm, c.topo, c.servers, [size // 4], cal,  # noqa
                                                       c.options)
            rows.extend(table(algo, records, len(checked.contributors), theory, calibrated, base.dilation))

    def finish(life: Lifecycle) -> dict:
        report.update(rows=rows, error=life.error)
        if rows:
            write_table(os.path.join(base.out, "bench.csv"), rows,
                        COLUMNS + (CALIBRATED_COLUMNS if base.calibration else []))
            report["plot"] = plot(os.path.join(base.out, "busbw.png"), rows, network)
        return report

    return Lifecycle(network, log, os.path.join(base.out, "bench.json"), fork_server=folder.ranks(),
                     reraise=True).run(body, finish, lambda: os.makedirs(base.out, exist_ok=True))


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
    for n, algo in enumerate(dict.fromkeys(r["algo"] for r in rows)):
        mine = [r for r in rows if r["algo"] == algo]
        colour = plt.get_cmap("tab10")(n)
        ax.plot([r["size_bytes"] for r in mine], [r["busbw_mbps"] for r in mine], "o-", color=colour,
                label=f"{algo} measured")
        ax.plot([r["size_bytes"] for r in mine], [r["theory_busbw_mbps"] for r in mine], "--", color=colour,
                label=f"{algo} theory")
    ax.axhline(min(network.bw), color="0.5", lw=0.8, label="link rate")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel(f"bus bandwidth (Mbit/s, algbw x {BUSBW_FACTOR})")
    ax.set_title(f"dmlbed bench on {network.topo.spec}")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def print_bench(report: dict) -> None:
    """nccl-tests' table: per algorithm and size, time, algbw, busbw, theory and wrong results."""
    print(f"bench on {report['topology']} at {report['bw_mbps']} Mbit/s ({report['datapath']}); busbw = algbw x "
          f"{report['busbw_factor']}; {report['busbw_note']}")
    cal = bool(report.get("calibration"))
    print(f"{'algo':<12} {'size':>10} {'time_s':>9} {'algbw':>9} {'busbw':>9} {'theory_s':>9} {'ratio':>6} "
          + (f"{'cal_s':>9} {'ratio':>6} " if cal else "") + f"{'#wrong':>6}")
    for r in report["rows"]:
        extra = (f"{r['theory_cal_s']:>9.4f} {r['ratio_cal']:>6.2f} " if cal else "")
        print(f"{r['algo']:<12} {r['size_bytes']:>10} {r['time_s']:>9.4f} {r['algbw_mbps']:>9.2f} "
              f"{r['busbw_mbps']:>9.2f} {r['theory_s']:>9.4f} {r['ratio']:>6.2f} {extra}{r['wrong']:>6}")
    print(f"results: {os.path.dirname(report['plot'])}/bench.csv, bench.json; plot: {report['plot']}")


COMMAND = Bench()
