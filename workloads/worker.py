"""One training process per emulated host, and the one loop every algorithm runs: compute (forward/backward,
timed by the compute clock), synchronize through the algorithm's strategy (which applies the result), record.
Dedicated servers run the strategy's server side instead."""

from __future__ import annotations

import argparse
import json
import importlib
import os
import sys
import time
from typing import Optional

import torch
import torch.nn.functional as F

from workloads.data import batches, evaluation_set
from workloads.models import build_model
from workloads.netstats import delta, qdisc_counters
from workloads.rankconfig import RankConfig, starts_file
from workloads.records import IterationRecord, Recorder
from workloads.strategies.base import ComputeClock, ModelState, RankContext, Strategy
from workloads.strategies.ddp_overlap import DDPOverlap


def load_strategy(path: str):
    """The strategy class named 'module:Class' by an algorithm's descriptor."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def accuracy(model, source: str) -> Optional[float]:
    """Accuracy on the held-out part of a real data set, or None for synthetic data."""
    held_out = evaluation_set(source)
    if held_out is None:
        return None
    x, y = held_out
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def train(ctx: RankContext, state: ModelState, strategy: Strategy, data, recorder: Recorder,
          clock: ComputeClock) -> None:
    """The BSP loop, its end noted for jobs that hold offsets to this one."""
    try:
        iterate(ctx, state, strategy, data, recorder, clock)
    finally:
        if ctx.cfg.start_gate and ctx.rank == 0:  # jobs holding offsets to this one stop waiting for it
            open(starts_file(ctx.cfg.start_gate) + ".done", "w").close()


def iterate(ctx: RankContext, state: ModelState, strategy: Strategy, data, recorder: Recorder,
            clock: ComputeClock) -> None:
    """Every iteration (strategies may relax BSP: Parameter Flow's SSP completes records later), each begun at its
    gate or held offset where jobs share the network."""
    gate_at = min(GATE_ITERATION, ctx.cfg.iters - 1)
    for it in range(ctx.cfg.iters):
        if ctx.cfg.start_gate and it == gate_at:  # the release, not part of any iteration
            wait_at_gate(ctx.cfg.start_gate, ctx.rank, ctx.cfg.timeout)
        rec = IterationRecord(ctx.rank, it, ctx.role, start=time.time())
        if ctx.cfg.holds and it > gate_at:  # waiting out a held offset is part of the iteration
            hold_offsets(ctx.cfg.holds, it, ctx.cfg.timeout)
            rec.marks["hold"] = [rec.start, time.time()]
        if ctx.cfg.start_gate and ctx.rank == 0 and it >= gate_at:
            note_start(ctx.cfg.start_gate, it, time.time())
        if ctx.is_server:
            strategy.serve(it, rec)
        else:
            strategy.before_compute(it, rec)
            x, y = next(data)
            state.zero_grad()
            clock.begin(it)
            out = strategy.forward(x, clock)
            with clock.segment():
                loss = F.cross_entropy(out, y)
            strategy.backward(loss, clock, rec)
            clock.finish(rec)
            rec.loss = float(loss.detach())
            strategy.synchronize(it, rec)
        if not rec.pending:
            rec.end = time.time()
        if ctx.cfg.eval_every and (it + 1) % ctx.cfg.eval_every == 0 and ctx.rank == min(ctx.contributors):
            rec.accuracy = accuracy(state.model, ctx.cfg.data)  # after the iteration's end: not in its times
        recorder.add(rec)


# Jobs sharing a network meet at the gate after their first iteration: its connections' first bytes and warm caches
# would otherwise shift each job's phase by a different amount before the offsets mean anything (warm-up: untimed).
GATE_ITERATION = 1


def wait_at_gate(gate: str, rank: int, timeout: float) -> None:
    """Jobs sharing a network start together: say this rank is ready, wait for the runner's start file, then until
    the time it gives this job."""
    with open(f"{gate}.ready-{rank}", "w") as f:
        f.write(str(time.time()))
    deadline = time.time() + timeout
    while not os.path.exists(gate):
        if time.time() > deadline:
            raise RuntimeError(f"no start time in {gate} within {timeout:g} s")
        time.sleep(0.01)
    with open(gate) as f:
        begin = float(json.load(f)["t"])
    time.sleep(max(0.0, begin - time.time()))


def note_start(gate: str, iteration: int, t: float) -> None:
    """Note that this job began an iteration at t (one line, appended: readers see whole lines)."""
    with open(starts_file(gate), "a") as f:
        f.write(f"{iteration} {t!r}\n")


def started(path: str, iteration: int) -> Optional[float]:
    """When a job began an iteration, from its starts file (None: not yet)."""
    try:
        with open(path) as f:
            for line in f:
                k, _, t = line.partition(" ")
                if t.endswith("\n") and int(k) == iteration:
                    return float(t)
    except FileNotFoundError:
        pass
    return None


HOLD_POLL_S = 0.002


def hold_offsets(holds, iteration: int, timeout: float) -> None:
    """Held offsets: wait until each named job began its iteration (this one + shift), then its lag more; a job that
    has ended (its rank 0 wrote its final file) or never runs that iteration is not waited for."""
    for path, shift, lag in holds:
        deadline = time.time() + timeout
        begun = started(path, iteration + shift)
        while begun is None:
            if os.path.exists(path + ".done"):
                begun = started(path, iteration + shift)
                break
            if time.time() > deadline:
                raise RuntimeError(f"held offset: no start of iteration {iteration + shift} in {path} within "
                                   f"{timeout:g} s")
            time.sleep(HOLD_POLL_S)
            begun = started(path, iteration + shift)
        if begun is not None:
            time.sleep(max(0.0, begun + lag - time.time()))


def main(argv=None) -> int:
    """Run one rank from the RankConfig the runner wrote."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", required=True)
    cfg = RankConfig.read(ap.parse_args(argv).config)
    torch.set_num_threads(1)
    ctx = RankContext(cfg)
    model, input_shape = build_model(cfg.model, seed=cfg.seed, folders=cfg.python_path)
    if ctx.algorithm.prepare_model is not None:
        ctx.algorithm.prepare_model(model, ctx.rank, ctx.ranks, ctx.options)
    state = ModelState(model, cfg.lr, cfg.momentum, cfg.weight_decay, cfg.lr_schedule, cfg.iters)
    strategy = (DDPOverlap if cfg.overlap else load_strategy(ctx.algorithm.strategy))(ctx, state)
    data = None if ctx.is_server else iter(batches(cfg.data, input_shape, cfg.batch, ctx.rank, ctx.ranks, cfg.seed))
    recorder = Recorder(ctx.files.records(ctx.rank), ctx.files.transfers(ctx.rank), cfg.interfaces)
    qdisc_before = qdisc_counters(cfg.interfaces)
    try:
        clock = ComputeClock(cfg.compute_time, stretch=cfg.dilation, per_iteration=cfg.device_times())
        train(ctx, state, strategy, data, recorder, clock)
        extras = strategy.finish()
    finally:
        recorder.close()
    strategy.close()
    ctx.files.write_final(ctx.rank, {
        "rank": ctx.rank, "role": ctx.role, "checksum": strategy.checksum(),
        "accuracy": accuracy(model, cfg.data) if ctx.rank == min(ctx.contributors) else None,
        "extras": extras, "net": {"qdisc": delta(qdisc_counters(cfg.interfaces), qdisc_before)}})
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # gloo's threads can abort the interpreter's own shutdown ("terminate called without an active
    # exception") after every result is on disk; leave without running C++ static destructors.
    os._exit(code)
