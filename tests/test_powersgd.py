"""PowerSGD by its own properties, in memory: every rank applies the same update, the projection of the workers' mean
gradient onto the orthogonalized summed factor; the memory is exactly what a rank's approximation left out; a
gradient of rank at most r comes through whole; with error feedback it converges on a least-squares problem where
the rank-1 approximation without memory stalls; its sizes are what it sends; flow model and closed form agree."""

import numpy as np
import pytest

from emulation.core.topology import parse
from workloads.algorithms import get
from workloads.codecs import COMPRESSORS, SUMMING
from workloads.codecs.powersgd import PowerOptions, PowerSGD, compressed, orthogonalize, phase_sizes
from workloads.models import shapes_for, tensor_shapes, tensor_sizes

SHAPES = [(12, 3, 2, 2), (12,), (20, 12), (20,), (5, 20)]


def ranks_of(shapes, n, rank=2):
    """n compressors of these tensors (every rank's)."""
    sizes = [int(np.prod(s)) for s in shapes]
    return [PowerSGD(sizes, seed=r, options=PowerOptions(powersgd_rank=rank), shapes=shapes) for r in range(n)]


def synchronize(comps, grads):
    """One PowerSGD synchronization, the all-reduces as plain sums: every rank's update."""
    first = sum(c.first(g) for c, g in zip(comps, grads))
    second = sum(c.second(first) for c in comps)
    return [c.finish(second, len(comps)) for c in comps]


def test_registered_as_a_summing_low_rank_codec():
    assert "powersgd" in COMPRESSORS and "powersgd" in SUMMING and COMPRESSORS["powersgd"].lowrank


def test_every_rank_applies_the_projection_of_the_mean_gradient():
    rng = np.random.default_rng(1)
    comps = ranks_of(SHAPES, 4)
    grads = [rng.standard_normal(comps[0].bounds[-1]).astype(np.float32) for _ in comps]
    updates = synchronize(comps, grads)
    for u in updates[1:]:
        assert np.array_equal(u, updates[0])
    mean = np.mean(grads, axis=0)
    c = comps[0]
    for i in c.matrices:
        p = c.p[i]
        assert np.allclose(p.T @ p, np.eye(p.shape[1]), atol=1e-5)
        expected = p @ p.T @ c._matrix(mean, i)  # P P^T mean(M): what P Q_sum^T / n is
        assert np.allclose(c._matrix(updates[0], i), expected, atol=1e-5)
    for i in c.plain:  # biases and tensors a rank-2 pair would not shrink travel whole
        lo, hi = c.bounds[i], c.bounds[i + 1]
        assert np.allclose(updates[0][lo:hi], mean[lo:hi], atol=1e-6)


def test_memory_is_what_the_approximation_left_out():
    rng = np.random.default_rng(2)
    comps = ranks_of(SHAPES, 3)
    grads = [rng.standard_normal(comps[0].bounds[-1]).astype(np.float32) for _ in comps]
    synchronize(comps, grads)
    for c, g in zip(comps, grads):
        for i in c.matrices:
            mine = c.p[i] @ (c.m[i].T @ c.p[i]).T  # this rank's own approximation P P^T M
            assert np.allclose(c._matrix(c.memory, i) + mine, c._matrix(g, i), atol=1e-5)
        for i in c.plain:
            assert not c.memory[c.bounds[i]:c.bounds[i + 1]].any()
        assert c.residual_norm == pytest.approx(float(np.linalg.norm(c.memory)))
    c, g, memory = comps[0], grads[0], comps[0].memory.copy()
    c.first(g)  # the memory is added to the next gradient
    for i in c.matrices:
        assert np.array_equal(c.m[i], c._matrix(g + memory, i))


def test_a_gradient_of_rank_at_most_r_comes_through_whole():
    rng = np.random.default_rng(3)
    shapes = [(30, 40)]
    comps = ranks_of(shapes, 4, rank=2)
    basis = rng.standard_normal((30, 2))
    grads = [(basis @ rng.standard_normal((2, 40))).astype(np.float32).ravel() for _ in comps]
    updates = synchronize(comps, grads)
    assert np.allclose(updates[0], np.mean(grads, axis=0), atol=1e-4)
    assert all(c.residual_norm < 1e-3 for c in comps)


def test_warm_start_carries_the_averaged_q():
    rng = np.random.default_rng(4)
    comps = ranks_of([(8, 6)], 2, rank=1)
    grads = [rng.standard_normal(48).astype(np.float32) for _ in comps]
    first = sum(c.first(g) for c, g in zip(comps, grads))
    second = sum(c.second(first) for c in comps)
    for c in comps:
        c.finish(second, 2)
        assert np.allclose(c.q[0].ravel(), second / 2)


def least_squares(feedback: bool, iterations=300, seed=5):
    """Distance to the optimum of min |X W - Y|^2 over W (20 x 15), 4 workers each with a quarter of the rows,
    rank-1 PowerSGD with or without its memory."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((200, 20))
    w_true = rng.standard_normal((20, 15))
    y = x @ w_true
    comps = ranks_of([(20, 15)], 4, rank=1)
    w = np.zeros((20, 15))
    for _ in range(iterations):
        grads = [(2 * x[k::4].T @ (x[k::4] @ w - y[k::4]) / 50).astype(np.float32).ravel() for k in range(4)]
        if not feedback:
            for c in comps:
                c.memory[:] = 0
        update = synchronize(comps, grads)[0]
        w -= 0.05 * update.reshape(20, 15)
    return float(np.linalg.norm(w - w_true) / np.linalg.norm(w_true))


def test_error_feedback_converges_on_least_squares():
    assert least_squares(feedback=True) < 0.02
    assert least_squares(feedback=True) < least_squares(feedback=False)


def test_sizes_are_what_it_sends():
    comps = ranks_of(SHAPES, 2, rank=2)
    first, second = phase_sizes(SHAPES, 2)
    g = np.ones(comps[0].bounds[-1], np.float32)
    assert len(comps[0].first(g)) == sum(first)
    assert len(comps[0].second(np.zeros(sum(first), np.float32))) == sum(second)
    assert PowerSGD.words(SHAPES, PowerOptions(powersgd_rank=2)) == sum(first) + sum(second)
    assert not compressed((12,), 2) and not compressed((5, 3), 2) and compressed((20, 12), 2)


def test_orthogonalize_keeps_a_zero_column_zero():
    p = np.array([[1.0, 0.0], [1.0, 0.0]], np.float32)
    out = orthogonalize(p.copy())
    assert np.allclose(np.linalg.norm(out[:, 0]), 1.0) and not out[:, 1].any()


def test_shapes_of_models_and_buckets():
    shapes = tensor_shapes("lenet5")
    assert [int(np.prod(s)) for s in shapes] == tensor_sizes("lenet5")
    assert tensor_shapes("mlp:1MB")[0][0] * tensor_shapes("mlp:1MB")[0][1] == tensor_sizes("mlp:1MB")[0]
    sizes = tensor_sizes("lenet5")
    assert shapes_for("lenet5", sizes[2:5][::-1]) == shapes[2:5][::-1]  # a DDP bucket, last layers first


@pytest.mark.parametrize("topo,algo", [("star:8", "ring"), ("star:8", "hd"), ("bcube:2,2", "bml"), ("star:4", "ps")])
def test_flow_model_and_closed_form_agree(topo, algo):
    from emulation.simulation.flows import simulate_plan
    from emulation.simulation.routes import Router
    t = parse(topo)
    a = get(algo)
    shapes = tensor_shapes("mlp:4MB")
    sizes = tensor_sizes("mlp:4MB")
    options = {"powersgd_rank": 2}
    phases = a.codec_phases(t, sizes, 1 if algo == "ps" else 0, None, [100.0] * t.levels, "powersgd", options,
                            shapes)
    first, second = phase_sizes(shapes, 2)
    assert [sum(p) for _, p in phases] == [sum(first), sum(second)]
    router = Router(t)
    rates = {l: 100e6 / 8 for l in range(t.levels)}
    gst = sum(simulate_plan(plan, [n * 4 for n in pieces], router, rates).gst_s for plan, pieces in phases)
    theory = a.gst_theory(t, 4 * sum(sizes), [100.0] * t.levels, 1 if algo == "ps" else 0, "powersgd",
                          layer_sizes=sizes, codec_options=options, layer_shapes=shapes).gst_s
    assert gst == pytest.approx(theory, rel=0.1)
