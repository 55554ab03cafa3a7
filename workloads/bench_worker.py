"""One rank of `dmlbed bench` (and of `dmlbed calibrate`'s probes): a plan moving raw fp32 buffers of every
size (no model), warm-up then timed repetitions, each checked against the exact result."""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from emulation.core.topology import parse
from workloads.algorithms import get
from workloads.channel import Channel
from workloads.plan import PieceLayout, simulate
from workloads.calibration_probes import build as build_probe
from workloads.rankconfig import RankConfig
from workloads.runfolder import RankFiles

PATTERN_PERIOD = 251  # values 0..250 times (rank + 1): every sum of up to 256 ranks is an exact fp32 integer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", required=True)
    cfg = RankConfig.read(ap.parse_args().config)
    job, topo, rank = cfg.bench, parse(cfg.topology), cfg.rank
    probe = job.probe
    # a raw buffer is one tensor (a plan that places whole tensors puts it on one server, as TensorFlow would)
    plan = build_probe(topo, *probe) if probe else get(cfg.algo).build_plan(topo, cfg.servers, cfg.options, cfg.bw,
                                                                            layer_sizes=[1])
    contributors = set(plan.contributors)
    involved = any(rank in (t.src, t.dst) for t in plan.transfers())
    layouts = {size: plan.piece_layout([size // 4]) for size in job.sizes}
    channel = Channel(cfg, topo, plan, layouts[job.sizes[0]])
    try:
        with open(RankFiles(cfg.out_dir).bench(rank), "a") as out:
            for size in job.sizes:
                pattern = (np.arange(size // 4, dtype=np.int64) % PATTERN_PERIOD).astype(np.float32)
                mine = pattern * (rank + 1) if probe or rank in contributors else np.zeros_like(pattern)
                expected = expected_result(plan, rank, pattern, layouts[size], bool(probe))
                buf = np.empty_like(pattern)
                for rep in range(job.warmup + job.reps):
                    buf[:] = mine
                    start = time.time()
                    channel.run(buf, layout=layouts[size])
                    end = time.time()
                    if not involved:  # a probe's bystander: its instant no-op would skew the timing
                        continue
                    wrong = (probe or rank in contributors) and not np.array_equal(buf, expected)
                    out.write(json.dumps({"rank": rank, "size": size, "rep": rep, "warmup": rep < job.warmup,
                                          "start": start, "end": end, "wrong": bool(wrong)}) + "\n")
                    out.flush()
    finally:
        channel.close()
    return 0


def expected_result(plan, rank: int, pattern: np.ndarray, layout: PieceLayout, probe: bool) -> np.ndarray:
    """What this rank must hold after the plan, when rank r starts from pattern x (r + 1): the exact sum for
    an all-reduce (every partial sum is an fp32 integer), the in-memory reference for a probe (one layer, so
    the buffer is already piece-major)."""
    if probe:
        return simulate(plan, {r: pattern * (r + 1) for r in range(plan.ranks)}, layout, zero_others=False)[rank]
    return pattern * sum(r + 1 for r in plan.contributors)


if __name__ == "__main__":
    sys.exit(main())
