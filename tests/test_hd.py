"""Recursive halving-doubling: the plan sums for any N (non-power-of-two fold), its step count and traffic, its
theory, and a real emulated run on star:9."""

import json

import numpy as np
import pytest

from emulation.core.formulas import full_gradient_time
from emulation.core.topology import parse
from helpers import run_dmlbed
from workloads.algorithms import build_plan, theory
from workloads.algorithms.hd import active_ranks, halving_doubling
from workloads.plan import PieceLayout, check_sum


@pytest.mark.parametrize("n", list(range(2, 34)) + [100])
def test_sums_for_any_rank_count(n):
    plan = halving_doubling(n)
    for shape in ([1], [13], [1000, 7]):
        layout = PieceLayout(shape, plan.pieces)
        rng = np.random.default_rng(n)
        check_sum(plan, {r: rng.standard_normal(layout.total).astype(np.float32) for r in range(n)}, layout)


@pytest.mark.parametrize("n,steps", [(8, 6), (16, 8), (9, 8), (12, 8), (2, 2), (3, 4)])
def test_log_steps_plus_fold(n, steps):
    assert len(halving_doubling(n).streams[0]) == steps  # 2 lg p, plus fold and unfold when n != p


def test_power_of_two_sends_the_bandwidth_optimal_share():
    plan = halving_doubling(8)
    layout = PieceLayout([8000], plan.pieces)
    sent = plan.bytes_sent([4 * s for s in layout.piece_sizes()])
    assert set(sent.values()) == {2 * 7 / 8 * 8000 * 4}  # 2(N-1)/N of the gradient per rank


def test_fold_pairs_and_active_ranks():
    assert active_ranks(9) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert active_ranks(12) == [1, 3, 5, 7, 8, 9, 10, 11]
    fold = halving_doubling(12).streams[0][0]
    assert {(t.src, t.dst) for t in fold} == {(0, 1), (2, 3), (4, 5), (6, 7)}


def test_theory():
    g = 4e6
    tf = full_gradient_time(g, 100)
    assert theory("hd", parse("star:8"), g, (100.0,)).gst_s == pytest.approx(2 * 7 / 8 * tf)
    assert theory("hd", parse("star:9"), g, (100.0,)).gst_s == pytest.approx((2 + 2 * 7 / 8) * tf)
    assert build_plan("hd", parse("fattree:4")).ranks == 16


@pytest.mark.emulation
def test_emulated_run_on_star_9(tmp_path):
    r = run_dmlbed("run", "--topo", "star:9", "--algo", "hd", "--model", "mlp:300K", "--iters", "4", "--batch", "8",
                   "--bw", "50", "--json", "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert s["correct"] and s["sum_verified"] is True and s["checks"]["allreduce"] is True
    assert s["packet_in"] == 0 and s["bytes_by_level"]["L0"] > 0
