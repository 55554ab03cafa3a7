"""One rank of `dmlbed bench` (and of `dmlbed calibrate`'s probes): a plan, or torch.distributed's gloo, moving raw
fp32 buffers of every size (no model), warm-up then timed repetitions, each checked against the exact result."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Tuple

import numpy as np

from emulation.core.topology import parse
from workloads.algorithms import get
from workloads.channel import Channel
from workloads.collectives import get as get_collective
from workloads.plan import PieceLayout, simulate
from workloads.calibration_probes import build as build_probe
from workloads.rankconfig import RankConfig
from workloads.runfolder import RankFiles

PATTERN_PERIOD = 251  # values 0..250 times (rank + 1): every sum of up to 256 ranks is an exact fp32 integer
GLOO = "gloo"  # the algorithm name that times torch.distributed's own collective


class PlanSubject:
    """An all-reduce plan (or a calibration probe) on this rank: the buffer in, the exact result out."""

    def __init__(self, cfg: RankConfig, topo):
        job = cfg.bench
        self.probe = job.probe
        # a raw buffer is one tensor (a plan that places whole tensors puts it on one server, as TensorFlow would)
        self.plan = build_probe(topo, *self.probe) if self.probe else \
            get(cfg.algo).build_plan(topo, cfg.servers, cfg.options, cfg.bw, layer_sizes=[1])
        self.rank = cfg.rank
        self.involved = any(cfg.rank in (t.src, t.dst) for t in self.plan.transfers())
        self.layouts = {size: self.plan.piece_layout([size // 4]) for size in job.sizes}
        self.channel = Channel(cfg, topo, self.plan, self.layouts[job.sizes[0]])

    def elements(self, size: int) -> int:
        """fp32 values in this rank's buffer for an op of size bytes."""
        return size // 4

    def inputs(self, size: int, pattern: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(what this rank starts from, what it must end with, where that is defined)."""
        mine = self.probe or self.rank in self.plan.contributors
        start = pattern * (self.rank + 1) if mine else np.zeros_like(pattern)
        return start, expected_result(self.plan, self.rank, pattern, self.layouts[size], bool(self.probe)), \
            np.full(len(pattern), bool(mine))

    def run(self, buf: np.ndarray, size: int) -> None:
        self.channel.run(buf, layout=self.layouts[size])

    def settle(self, buf: np.ndarray, size: int) -> None:
        """Nothing: a plan leaves its result in place."""

    def barrier(self) -> None:
        """Nothing: in an all-reduce every rank's end waits for every rank's start."""

    def note_ports(self, path: str) -> None:
        """Write the TCP ports of each connection this rank sent on (one line each), for the flow model to put every
        connection on the ECMP path the switches hashed it to."""
        seen = {}
        for t in self.channel.executor.drain_transfers() if self.channel else ():
            if t["dir"] == "send" and t.get("ports"):
                seen[(t["peer"], t["stream"])] = t
        with open(path, "w") as f:
            for (peer, stream), t in sorted(seen.items()):
                f.write(json.dumps({"rank": self.rank, "peer": peer, "stream": stream, "dir": "send",
                                    "ports": t["ports"]}) + "\n")

    def close(self) -> None:
        self.channel.close()


class CollectiveSubject(PlanSubject):
    """A collective other than all-reduce on this rank: one of its plans, or gloo's own call."""

    def __init__(self, cfg: RankConfig, topo):
        op, algorithm, root = cfg.bench.collective
        self.op, self.root, self.rank, self.ranks = get_collective(op), root, cfg.rank, cfg.ranks
        self.layouts = {size: self.op.layout(self.elements(size), cfg.ranks) for size in cfg.bench.sizes}
        self.involved, self.channel, self.gloo = True, None, None
        if algorithm == GLOO:
            from workloads.gloo_collectives import GlooCollective
            from workloads.strategies.gloo import join_process_group
            self.dist = join_process_group(cfg)
            self.gloo = GlooCollective(self.dist, op, cfg.rank, cfg.ranks, root)
        else:
            plan = self.op.plan(algorithm, cfg.ranks, root)
            self.channel = Channel(cfg, topo, plan, self.layouts[cfg.bench.sizes[0]])
            gate = get_collective("allgather").plan("direct", cfg.ranks)  # every rank hears from every rank
            self.gate_layout = PieceLayout([cfg.ranks], cfg.ranks)
            self.gate = Channel(cfg, topo, gate, self.gate_layout, port_offset=1)

    def elements(self, size: int) -> int:
        return self.op.buffer_bytes(size, self.ranks) // 4

    def inputs(self, size: int, pattern: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        layout = self.layouts[size]
        want, defined = np.zeros_like(pattern), np.zeros(len(pattern), dtype=bool)
        for rank, piece, sources in self.op.result(self.ranks, self.root):
            if rank == self.rank:
                a, b = layout.bounds[piece]
                want[a:b] = pattern[a:b] * sum(s + 1 for s in sources)
                defined[a:b] = True
        return pattern * (self.rank + 1), want, defined

    def run(self, buf: np.ndarray, size: int) -> None:
        if self.gloo:
            self.gloo.run(buf, self.layouts[size])
        else:
            self.channel.run(buf, layout=self.layouts[size])

    def settle(self, buf: np.ndarray, size: int) -> None:
        if self.gloo:
            self.gloo.settle(buf, self.layouts[size])

    def barrier(self) -> None:
        """Every rank starts a repetition together: in a rooted op some ranks' ends wait for no one's start, and
        a rank starting late would find its data waiting and time almost nothing."""
        if self.gloo:
            self.dist.barrier()
        else:
            self.gate.run(np.zeros(len(self.gate_layout.index), dtype=np.float32), layout=self.gate_layout)

    def close(self) -> None:
        if self.gloo:
            from workloads.strategies.gloo import leave_process_group
            leave_process_group(self.dist)
        else:
            self.channel.close()
            self.gate.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", required=True)
    cfg = RankConfig.read(ap.parse_args().config)
    job, topo = cfg.bench, parse(cfg.topology)
    subject = CollectiveSubject(cfg, topo) if job.collective else PlanSubject(cfg, topo)
    try:
        with open(RankFiles(cfg.out_dir).bench(cfg.rank), "a") as out:
            for size in job.sizes:
                pattern = periodic_pattern(subject.elements(size))
                start_from, want, defined = subject.inputs(size, pattern)
                want = want[defined]  # only what the op defines is kept (an all-to-all's column of its N x N blocks)
                buf, pattern = pattern, None  # the pattern's memory becomes the buffer
                for rep in range(job.warmup + job.reps):
                    buf[:] = start_from
                    subject.barrier()
                    start = time.time()
                    subject.run(buf, size)
                    end = time.time()
                    subject.settle(buf, size)
                    if not subject.involved:  # a probe's bystander: its instant no-op would skew the timing
                        continue
                    wrong = not np.array_equal(buf[defined], want)
                    out.write(json.dumps({"rank": cfg.rank, "size": size, "rep": rep, "warmup": rep < job.warmup,
                                          "start": start, "end": end, "wrong": bool(wrong)}) + "\n")
                    out.flush()
        subject.note_ports(RankFiles(cfg.out_dir).transfers(cfg.rank))
    finally:
        subject.close()
    return 0


def periodic_pattern(elements: int, block: int = 1 << 20) -> np.ndarray:
    """0, 1, .., PATTERN_PERIOD - 1, 0, 1, .. as fp32, built a block at a time: an index array of the whole buffer
    (int64, twice its size) would be a peak the memory check does not count, as for an all-to-all of 16 MiB on
    16 ranks (256 MiB buffers), which the kernel killed."""
    out = np.empty(elements, dtype=np.float32)
    for lo in range(0, elements, block):
        out[lo:lo + block] = np.arange(lo, min(lo + block, elements)) % PATTERN_PERIOD
    return out


def expected_result(plan, rank: int, pattern: np.ndarray, layout: PieceLayout, probe: bool) -> np.ndarray:
    """What this rank must hold after the plan, when rank r starts from pattern x (r + 1): the exact sum for
    an all-reduce (every partial sum is an fp32 integer), the in-memory reference for a probe (one layer, so
    the buffer is already piece-major)."""
    if probe:
        return simulate(plan, {r: pattern * (r + 1) for r in range(plan.ranks)}, layout, zero_others=False)[rank]
    return pattern * sum(r + 1 for r in plan.contributors)


if __name__ == "__main__":
    sys.exit(main())
