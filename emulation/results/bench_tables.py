"""A benchmark's tables as text: dmlbed's own (every model beside every size) and nccl-tests' (its columns and units,
one block per op and algorithm, the way its parsers and plotting scripts read a log)."""

from __future__ import annotations

import os
import shutil
from typing import Dict, List, Optional

from emulation.results.fidelity import one_line
from emulation.results.files import write_atomic
from workloads.collectives import ALLREDUCE, get as get_collective

SIMULATE = "simulate"
NCCL_TESTS_FOLDER = "nccl-tests"
NCCL_TYPE = "float"  # every buffer is fp32
REDUCING = {"allreduce", "reduce", "reducescatter"}  # nccl-tests' redop column: sum for these, none for the rest
# nccl-tests' count column is the count it passes the call: per rank for these (size is the whole array), else all
PER_RANK_COUNT = {"allgather", "reducescatter", "alltoall", "alltoallv", "gather", "scatter"}


def bench_label(op: str, algo: str) -> str:
    """A benchmarked (op, algorithm)'s name for its rows, folders and logs: the algorithm, and the op unless
    all-reduce."""
    return algo if op == ALLREDUCE else f"{op}-{algo}"


def print_bench(report: dict) -> None:
    """dmlbed's table: per algorithm and size, time, algbw, busbw, theory, the flow model and wrong results."""
    factors = ", ".join(f"{op} {text}" for op, text in report["busbw_factor"].items())
    print(f"bench on {report['topology']} at {report['bw_mbps']} Mbit/s ({report['datapath']}); busbw = algbw x "
          f"{factors}; {report['busbw_note']}")
    cal = bool(report.get("calibration"))
    print(f"{'op':<13} {'algo':<12} {'size':>10} {'time_s':>9} {'algbw':>9} {'busbw':>9} {'theory_s':>9} {'ratio':>6} "
          f"{'sim_s':>9} {'ratio':>6} " + (f"{'cal_s':>9} {'ratio':>6} " if cal else "") + f"{'#wrong':>6}")
    for r in report["rows"]:
        extra = (f"{r['theory_cal_s']:>9.4f} {r['ratio_cal']:>6.2f} " if cal else "")
        print(f"{r['op']:<13} {r['algo']:<12} {r['size_bytes']:>10} {r['time_s']:>9.4f} {r['algbw_mbps']:>9.2f} "
              f"{r['busbw_mbps']:>9.2f} {r['theory_s']:>9.4f} {r['ratio']:>6.2f} {number(r.get('sim_s'), 9, 4)} "
              f"{number(r.get('ratio_sim'), 6, 2)} {extra}{'-' if r['wrong'] is None else r['wrong']:>6}")
    for r in report["rows"]:
        if r.get("faster_than_links"):
            share = r["time_s"] / (r.get("sim_s") or r["theory_s"])
            print(f"warning: {r['op']} {r['algo']} at {r['size_bytes']} bytes took {share:.2f} of its model's time: "
                  f"faster than the shaped links carry, not a faithful timing")
    for label, verdict in (report.get("fidelity") or {}).items():
        print(f"{label}: {one_line(verdict)}")
    if report.get("mode") == SIMULATE:
        paths = ("each flow on its destination's one path, D-mod-k" if report.get("routing") == "dmodk" else
                 "each flow spread over its equal-cost paths")
        print(f"simulated: time_s is the plan in the flow model ({paths}), ratio its closed form's; nothing ran, so "
              f"nothing was checked (#wrong -)")
    if report.get("ingress_bound"):
        print(f"switch->host shaped too (--shape-ingress): {', '.join(report['ingress_bound'])} receive faster than "
              f"their senders send")
    print(f"results: {os.path.dirname(report['plot'])}/bench.csv, bench.json; plot: {report['plot']}")


def number(value: Optional[float], width: int, places: int) -> str:
    """A table cell: the value, or '-' where there is none."""
    return f"{value:>{width}.{places}f}" if value is not None else f"{'-':>{width}}"


def nccl_tests_blocks(report: dict) -> Dict[str, str]:
    """Per (op, algorithm), its rows as nccl-tests prints them: size (B), count (elements), type, redop, root, then
    out-of-place time (us), algbw and busbw (GB/s) and #wrong, then in-place's. dmlbed times each size once and
    the buffer's placement changes nothing on the network, so the time is in the out-of-place columns and in-place
    is N/A; bandwidths carry six decimals (emulated links run at Mbit/s, 0.0125 GB/s at 100); #wrong counts the
    rank-repetitions whose result was not exact (N/A in the flow model, which checks nothing)."""
    blocks = {}
    for op, algo in dict.fromkeys((r["op"], r["algo"]) for r in report["rows"]):
        rows = [r for r in report["rows"] if (r["op"], r["algo"]) == (op, algo)]
        root = 0 if get_collective(op).rooted else -1
        sizes = [r["size_bytes"] for r in rows]
        lines = [f"# dmlbed bench --op {op} --algo {algo} on {report['topology']} at "
                 f"{','.join(f'{b:g}' for b in report['bw_mbps'])} Mbit/s "
                 f"({report.get('datapath')}): minBytes {min(sizes)} maxBytes {max(sizes)} warmup iters: "
                 f"{report.get('warmup', 0)} iters: {rows[0]['reps']} validation: "
                 f"{0 if report.get('mode') == SIMULATE else 1}",
                 "# dmlbed: one timing per size, in the out-of-place columns (in-place was not timed apart: N/A); "
                 "#wrong: rank-repetitions not exact"
                 + ("; times are the flow model's (nothing ran)" if report.get("mode") == SIMULATE else ""),
                 "#",
                 f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}           out-of-place                       "
                 f"in-place          ",
                 f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  {'time':>7}  {'algbw':>6}  "
                 f"{'busbw':>6} {'#wrong':>6}  {'time':>7}  {'algbw':>6}  {'busbw':>6} {'#wrong':>6}",
                 f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}  {'(us)':>7}  {'(GB/s)':>6}  "
                 f"{'(GB/s)':>6}  {'':>5}  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>5}"]
        for r in rows:
            wrong = "N/A" if r["wrong"] is None else str(r["wrong"])
            count = r["size_bytes"] // 4 // (report["ranks"] if op in PER_RANK_COUNT else 1)
            lines.append(f"{r['size_bytes']:>12}  {count:>12}  {NCCL_TYPE:>8}  "
                         f"{'sum' if op in REDUCING else 'none':>6}  {root:>6}  {r['time_s'] * 1e6:>7.1f}  "
                         f"{gbytes(r['algbw_mbps'])}  {gbytes(r['busbw_mbps'])}  {wrong:>5}  {'N/A':>7}  "
                         f"{'N/A':>6}  {'N/A':>6}  {'N/A':>5}")
        lines += ["# Out of bounds values : N/A (dmlbed checks every result exactly: #wrong)",
                  f"# Avg bus bandwidth    : {sum(r['busbw_mbps'] for r in rows) / len(rows) / 8000:.6f} ", "#"]
        blocks[bench_label(op, algo)] = "\n".join(lines) + "\n"
    return blocks


def gbytes(mbps: float) -> str:
    """A bandwidth in nccl-tests' GB/s (10^9 bytes a second) from Mbit/s."""
    return f"{mbps / 8000:.6f}"


def write_nccl_tests(out: str, report: dict) -> List[str]:
    """Each (op, algorithm)'s nccl-tests block as its own log, out/nccl-tests/LABEL.txt; the paths written."""
    folder = os.path.join(out, NCCL_TESTS_FOLDER)
    shutil.rmtree(folder, ignore_errors=True)  # a log of an earlier benchmark's algorithm is not this one's
    os.makedirs(folder)
    paths = []
    for label, text in nccl_tests_blocks(report).items():
        paths.append(os.path.join(folder, f"{label}.txt"))
        write_atomic(paths[-1], text)
    return paths
