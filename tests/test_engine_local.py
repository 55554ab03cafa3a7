"""The engine over real TCP on 127.0.0.1: several processes, every plan, the exact sum; failures are named."""

import multiprocessing as mp
import time

import numpy as np
import pytest

from emulation.net.controller_process import free_ports
from emulation.core.topology import parse
from workloads.algorithms import build_plan
from workloads.algorithms.ps import dedicated_ps
from workloads.engine import PlanExecutor
from workloads.plan import PieceLayout, fp32_sum_tolerance
from workloads.transport import Transport, TransportError


def rank_main(plan, rank, shape, ports, seed, iterations, queue, die_at=None, chunk_bytes=256 << 10):
    try:
        layout = PieceLayout(shape, plan.pieces)
        transport = Transport(rank, ("127.0.0.1", ports[rank]), timeout=10)
        ex = PlanExecutor(plan, rank, layout, transport, lambda peer, s, lvl: ("127.0.0.1", ports[peer]),
                          chunk_bytes=chunk_bytes)
        results = []
        for it in range(iterations):
            if die_at is not None and it == die_at:
                import os
                os._exit(1)
            rng = np.random.default_rng(seed + 1000 * it + rank)
            buf = rng.standard_normal(layout.total).astype(np.float32)
            if rank not in plan.contributors:
                buf[:] = 0
            ex.run(buf)
            results.append(buf)
        ex.close()
        queue.put((rank, "ok", results))
    except Exception as exc:
        queue.put((rank, "error", f"{type(exc).__name__}: {exc}"))


def run_local(plan, shape, iterations=2, die=None, chunk_bytes=256 << 10):
    ports = free_ports(plan.ranks)
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(plan, r, shape, ports, 7, iterations, queue,
                                                  die[1] if die and die[0] == r else None, chunk_bytes))
             for r in range(plan.ranks)]
    for p in procs:
        p.start()
    out = {}
    deadline = time.monotonic() + 60
    while len(out) < plan.ranks - (1 if die else 0) and time.monotonic() < deadline:
        try:
            rank, status, value = queue.get(timeout=1)
            out[rank] = (status, value)
        except Exception:
            pass
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
    return out


CASES = [("ps", "star:4"), ("ring", "star:5"), ("bml", "bcube:3,2"), ("bml", "bcube:2,3"), ("hier", "tree:3,2,2"),
         ("hier", "fattree:4"), ("ps", "bcube:2,2")]


@pytest.mark.parametrize("chunk_bytes", [256 << 10, 4096])
@pytest.mark.parametrize("algo,spec", CASES + [("blueconnect", "tree:3,2,2"), ("twolevel", "tree:2,2"),
                                               ("hd", "star:6")])
def test_engine_gives_exact_sum_over_tcp(algo, spec, chunk_bytes):
    """Whole pieces, and pieces cut into many chunks that flow between steps as soon as they are ready."""
    plan = build_plan(algo, parse(spec))
    shape = [30000, 100, 7]
    out = run_local(plan, shape, chunk_bytes=chunk_bytes)
    layout = PieceLayout(shape, plan.pieces)
    assert sorted(out) == list(range(plan.ranks)), out
    for it in range(2):
        inputs = [np.random.default_rng(7 + 1000 * it + r).standard_normal(layout.total).astype(np.float32)
                  for r in plan.contributors]
        expected = np.sum([x.astype(np.float64) for x in inputs], axis=0)
        tol = fp32_sum_tolerance(inputs)
        for r in plan.contributors:
            status, results = out[r]
            assert status == "ok", results
            assert np.all(np.abs(results[it] - expected) <= tol + 1e-30)


def test_dedicated_servers_over_tcp():
    plan = dedicated_ps(5, 2)
    out = run_local(plan, [2000, 3], iterations=1)
    layout = PieceLayout([2000, 3], plan.pieces)
    inputs = [np.random.default_rng(7 + r).standard_normal(layout.total).astype(np.float32) for r in plan.contributors]
    expected = np.sum(inputs, axis=0)
    for r in plan.contributors:
        assert out[r][0] == "ok"
        assert np.allclose(out[r][1][0], expected, atol=1e-4)


def test_vanished_peer_is_named_with_the_step():
    plan = build_plan("ring", parse("star:4"))
    out = run_local(plan, [1000], iterations=3, die=(2, 1))
    errors = [v for s, v in out.values() if s == "error"]
    assert errors, out
    assert any("rank 2" in e and "step" in e for e in errors), errors


def test_transport_times_out_naming_the_missing_peer():
    port, = free_ports(1)
    t = Transport(0, ("127.0.0.1", port), timeout=1)
    with pytest.raises(TransportError, match="rank 3 did not connect"):
        t.connect([], [(3, 0)])
    t.close()
