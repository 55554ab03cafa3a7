"""One rank of `dmlbed bench`: the algorithm's plan all-reducing raw fp32 buffers of every size (no model),
warm-up then timed repetitions, each checked against the exact sum."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

from emulation.spec.topology import parse
from workloads.algorithms import get
from workloads.channel import Channel
from workloads.plan import PieceLayout

PATTERN_PERIOD = 251  # values 0..250 times (rank + 1): every sum of up to 256 ranks is an exact fp32 integer


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", required=True)
    cfg = json.load(open(ap.parse_args().config))
    topo, rank = parse(cfg["topology"]), cfg["rank"]
    plan = get(cfg["algo"]).build_plan(topo, cfg["servers"])
    contributors = set(plan.contributors)
    total = sum(r + 1 for r in contributors)
    layouts = {size: PieceLayout([size // 4], plan.pieces) for size in cfg["sizes"]}
    channel = Channel(cfg, plan, layouts[cfg["sizes"][0]])
    path = os.path.join(cfg["out_dir"], f"rank-{rank}.bench.jsonl")
    try:
        with open(path, "a") as out:
            for size in cfg["sizes"]:
                pattern = (np.arange(size // 4, dtype=np.int64) % PATTERN_PERIOD).astype(np.float32)
                mine = pattern * (rank + 1) if rank in contributors else np.zeros_like(pattern)
                expected = pattern * total
                buf = np.empty_like(pattern)
                for rep in range(cfg["warmup"] + cfg["reps"]):
                    buf[:] = mine
                    start = time.time()
                    channel.run(buf, layout=layouts[size])
                    end = time.time()
                    wrong = rank in contributors and not np.array_equal(buf, expected)
                    out.write(json.dumps({"rank": rank, "size": size, "rep": rep, "warmup": rep < cfg["warmup"],
                                          "start": start, "end": end, "wrong": bool(wrong)}) + "\n")
                    out.flush()
    finally:
        channel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
