"""Expert-parallel mixture of experts: the model's tensors as the table says, expert parallelism computing exactly
what one rank holding every expert computes (outputs, and each expert's gradient as the sum over the ranks), its
all-to-all checked exactly, its theory the flow model's on a non-blocking network, bad input refused."""

import json
import threading

import numpy as np
import pytest
import torch

from emulation.core.topology import parse
from emulation.simulation.flows import simulate_plan
from emulation.simulation.routes import Router
from helpers import run_dmlbed
from workloads.algorithms import get
from workloads.algorithms.expert import EXCHANGES, ExpertOptions, check_model, keep_own_experts, phases
from workloads.engine import CHUNK_BYTES
from workloads.models import ModelError, build_model, moe_shape_of_sizes, tensor_sizes
from workloads.strategies.base import ComputeClock
from workloads.verify import check_one


@pytest.mark.parametrize("name", ["moe:4x16", "moe:8x64"])
def test_the_models_tensors_are_the_tables(name):
    model, shape = build_model(name)
    assert [p.numel() for p in model.parameters()] == tensor_sizes(name)
    assert model(torch.randn(5, *shape)).shape == (5, 10)
    assert moe_shape_of_sizes(tensor_sizes(name)) == tuple(int(v) for v in name[4:].split("x"))


@pytest.mark.parametrize("name", ["moe:1x64", "moe:8", "moe:8x2"])
def test_a_malformed_moe_model_is_refused(name):
    with pytest.raises(ModelError, match="moe:EXPERTSxWIDTH"):
        tensor_sizes(name)


def test_expert_parallelism_needs_experts_that_spread_evenly():
    check_model("moe:8x64", 4, ExpertOptions())
    with pytest.raises(ModelError, match="mixture-of-experts"):
        check_model("lenet5", 4, ExpertOptions())
    with pytest.raises(ModelError, match="multiple of 4"):
        check_model("moe:6x64", 4, ExpertOptions())


class ThreadExchange:
    """An all-to-all among threads in one process (each rank a thread), as the engine does among hosts."""

    def __init__(self, ranks):
        self.ranks, self.barrier, self.slots = ranks, threading.Barrier(ranks), {}

    def __call__(self, rank):
        def exchange(blocks, phase):
            return Swap.apply(blocks, self, rank, phase)
        return exchange

    def swap(self, rank, blocks):
        self.slots[rank] = blocks.detach().clone()
        self.barrier.wait()
        out = torch.stack([self.slots[j][rank] for j in range(self.ranks)])
        self.barrier.wait()
        return out


class Swap(torch.autograd.Function):
    @staticmethod
    def forward(ctx, blocks, exchange, rank, phase):
        ctx.exchange, ctx.rank = exchange, rank
        return exchange.swap(rank, blocks)

    @staticmethod
    def backward(ctx, grad):
        return ctx.exchange.swap(ctx.rank, grad.contiguous()), None, None, None


def test_expert_parallelism_computes_what_one_rank_with_every_expert_computes():
    ranks, name, capacity = 4, "moe:8x16", 24
    torch.manual_seed(0)
    inputs = [torch.randn(6, 256) for _ in range(ranks)]
    full = []
    for r in range(ranks):  # every expert local: the reference, per rank
        model, _ = build_model(name)
        model.moe.slots = capacity
        model(inputs[r]).square().sum().backward()
        full.append(model)
    exchange, parallel, errors = ThreadExchange(ranks), [None] * ranks, []
    built = [build_model(name)[0] for _ in range(ranks)]  # before the threads: seeding is global

    def rank_thread(r):
        try:
            model = built[r]
            keep_own_experts(model, r, ranks, ExpertOptions(moe_capacity=capacity))
            model.moe.exchange = exchange(r)
            out = model(inputs[r])
            out.square().sum().backward()
            parallel[r] = (model, out.detach())
        except Exception as exc:  # noqa: BLE001 (reported by the test)
            errors.append(exc)
            exchange.barrier.abort()
    threads = [threading.Thread(target=rank_thread, args=(r,)) for r in range(ranks)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for r in range(ranks):
        model, out = parallel[r]
        assert torch.allclose(out, full[r](inputs[r]).detach(), atol=1e-5)
        assert len(model.moe.experts) == 2 and model.moe.first == 2 * r
        for k, expert in enumerate(model.moe.experts):  # the sum over every rank's tokens routed to it
            for key, p in expert.named_parameters():
                summed = sum(dict(f.moe.experts[2 * r + k].named_parameters())[key].grad for f in full)
                assert torch.allclose(p.grad, summed, atol=1e-4)
        assert torch.allclose(model.moe.gate.weight.grad, full[r].moe.gate.weight.grad, atol=1e-5)


def test_an_all_to_all_check_holds_only_for_the_transposed_blocks():
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((3, 5)).astype(np.float32) for _ in range(3)]
    outputs = [np.stack([inputs[j][r] for j in range(3)]) for r in range(3)]
    assert check_one("alltoall", inputs, outputs)
    outputs[1] = outputs[1][::-1].copy()
    assert not check_one("alltoall", inputs, outputs)


@pytest.mark.parametrize("collective", ["direct", "pairwise"])
@pytest.mark.parametrize("spec", ["star:4", "star:8"])
def test_its_theory_is_the_flow_model_of_its_phases_on_a_non_blocking_network(spec, collective):
    topo, name = parse(spec), "moe:8x256"
    options = ExpertOptions(moe_collective=collective)
    sizes = tensor_sizes(name)
    plans = phases(topo, 0, options, sizes)
    assert len(plans) == len(EXCHANGES) + 1
    rate = 100e6 / 8
    simulated = sum(simulate_plan(plan, [4 * n for n in pieces], Router(topo), {0: rate},
                                  chunk_bytes=CHUNK_BYTES).gst_s for plan, pieces in plans)
    theory = get("moe").gst_theory(topo, 4 * sum(sizes), [100.0], options=options, layer_sizes=sizes)
    assert simulated == pytest.approx(theory.gst_s, rel=2e-3)  # the ring's pieces: N-way splits of each tensor


def test_the_compute_clock_leaves_a_pause_out():
    import time
    clock = ComputeClock()
    with clock.segment():
        time.sleep(0.02)
        with clock.pause():
            time.sleep(0.2)
        time.sleep(0.02)
    assert 0.03 < clock.real < 0.15
    assert len(clock.intervals) == 2 and clock.intervals[0][1] < clock.intervals[1][0]


def test_sync_marks_count_in_the_gst():
    from emulation.results.iterations import per_iteration
    rows = {r: [{"rank": r, "iteration": 0, "role": "worker", "start": 0.0, "end": 10.0, "compute_s": 1.0,
                 "sync_start": 8.0 + r * 0.1, "sync_end": 9.0, "tx_bytes": {}, "loss": 1.0,
                 "marks": {"sync:dispatch": [1.0 + r * 0.1, 2.0 + r * 0.2]}}] for r in range(2)}
    it = per_iteration(rows, [0, 1], None)[0]
    assert it["gst_s"] == pytest.approx((9.0 - 8.1) + (2.2 - 1.1))
    assert it["windows"] == [(1.1, 2.2), (8.1, 9.0)]


@pytest.mark.parametrize("args,message", [
    (("--model", "lenet5"), "mixture-of-experts"),
    (("--model", "moe:6x32"), "multiple of 4"),
    (("--model", "moe:4x32", "--moe-capacity", "0"), "moe-capacity"),
    (("--model", "moe:4x32", "--moe-collective", "ring"), "moe-collective"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    r = run_dmlbed("theory", "--topo", "star:4", "--algo", "moe", *args, timeout=120)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_local_run_is_exact_with_replicated_dense_layers(tmp_path):
    r = run_dmlbed("run", "--topo", "star:4", "--algo", "moe", "--model", "moe:4x32", "--moe-capacity", "32",
                   "--iters", "3", "--local", "--json", "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout)
    assert summary["correct"] and summary["replicas_identical"]
    assert summary["checks"] == {"allreduce": True, "alltoall": True}
    split = summary["split_median_s"]
    assert set(f"sync:{e}_s" for e in EXCHANGES) <= set(split) and 0 <= split["dropped_tokens"] < 1
    assert split["capacity_factor"] == pytest.approx(4 * 32 / (32 * 16))
    assert set(summary["wire_by_phase"]) == set(EXCHANGES) | {"allreduce"}
