"""iBatch: batches cover every layer once, the pipeline split adds up, the greedy choice beats the baselines
on communication-bound profiles, the startup fit recovers T_s; the pull plans are well formed."""

import numpy as np
import pytest

from workloads.algorithms.ibatch import placement, ps_pull, ps_push
from workloads.algorithms.ibatch import (Profile, choose, default_batches, execution_time, fit_startup, greedy_backward,
                              greedy_forward, layer_batches, paper_objective, timeline)
from workloads.plan import PieceLayout, PlanError, simulate, validate

LENET_LIKE = Profile(compute=(0.18, 0.12, 0.04, 0.001), transfer=(0.0001, 0.007, 0.45, 0.0014), startup=0.02)


def random_profiles(n=40, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        L = int(rng.integers(2, 12))
        yield Profile(tuple(rng.uniform(0.001, 0.2, L)), tuple(rng.uniform(0.0, 0.3, L)), float(rng.uniform(0, 0.05)))


def covers(batches, L):
    return [i for a, b in batches for i in range(a, b + 1)] == list(range(L))


@pytest.mark.parametrize("profile", list(random_profiles()) + [LENET_LIKE])
def test_batches_cover_every_layer_once_and_ibatch_chooses_among_its_greedy_batchings(profile):
    for batches in (greedy_forward(profile), greedy_backward(profile)):
        assert covers(batches, profile.layers)
    picked = choose(profile)
    assert covers(picked["batches"], profile.layers)
    assert picked["chosen"] in ("greedy_forward", "greedy_backward")
    t = execution_time(picked["batches"], profile)
    assert t == min(execution_time(greedy_forward(profile), profile), execution_time(greedy_backward(profile), profile))
    assert picked["times"]["default"] == execution_time(default_batches(profile.layers), profile)
    assert picked["times"]["layer"] == execution_time(layer_batches(profile.layers), profile)


def test_the_baselines_are_reported_not_chosen():
    # computation dominates: one pull then compute is what the greedy misses; iBatch still runs its own batching
    p = Profile(compute=(1.0, 1.0, 1.0), transfer=(0.001, 0.001, 0.001), startup=0.5)
    picked = choose(p)
    assert picked["chosen"] in ("greedy_forward", "greedy_backward")
    assert picked["times"]["default"] <= picked["times"][picked["chosen"]]


def test_greedy_itself_beats_both_baselines_when_communication_dominates():
    picked = choose(LENET_LIKE)
    assert picked["chosen"] in ("greedy_forward", "greedy_backward")
    best = picked["times"][picked["best_greedy"]]
    assert best < picked["times"]["default"] and best < picked["times"]["layer"]


def test_timeline_split_adds_up():
    for batches in ([(0, 3)], [(0, 0), (1, 1), (2, 2), (3, 3)], [(0, 1), (2, 3)]):
        t = timeline(batches, LENET_LIKE)
        comm = sum(LENET_LIKE.startup + sum(LENET_LIKE.transfer[a:b + 1]) for a, b in batches)
        assert t["overlapped_s"] + t["comm_exposed_s"] == pytest.approx(comm)
        assert t["overlapped_s"] + t["compute_exposed_s"] == pytest.approx(sum(LENET_LIKE.compute))
        assert t["total_s"] >= max(comm, sum(LENET_LIKE.compute))
    default = timeline([(0, 3)], LENET_LIKE)
    assert default["overlapped_s"] == 0 and default["total_s"] == pytest.approx(
        LENET_LIKE.startup + sum(LENET_LIKE.transfer) + sum(LENET_LIKE.compute))


def test_paper_objective_matches_pipeline_when_constraint_holds():
    p = Profile(compute=(0.01, 0.01, 0.01), transfer=(0.1, 0.1, 0.1), startup=0.01)
    batches = [(0, 0), (1, 1), (2, 2)]
    assert paper_objective(batches, p) == pytest.approx(execution_time(batches, p))


def test_fit_startup_recovers_ts_and_rate():
    sizes = [3328, 205056, 12849152, 41000]
    ts, rate = fit_startup(sizes, [0.02 + s / 50e6 for s in sizes])
    assert ts == pytest.approx(0.02) and rate == pytest.approx(50e6)


def test_pull_plan_moves_server_parameters_to_every_worker():
    plan = ps_pull(4, 1, placement([5, 7, 3], 1), [(0, 1), (2, 2)])
    validate(plan)
    layout = PieceLayout.per_layer([5, 7, 3] + [1, 1, 1])
    server = np.arange(layout.total, dtype=np.float32)
    inputs = {0: server, **{r: np.zeros(layout.total, np.float32) for r in (1, 2, 3)}}
    out = simulate(plan, inputs, layout, zero_others=False)
    for w in (1, 2, 3):
        assert np.array_equal(out[w][:15], server[:15])
    assert len(plan.streams[0]) == 4  # request + reply per batch
    with pytest.raises(PlanError, match="cover layers"):
        ps_pull(4, 1, placement([5, 7, 3], 1), [(0, 0), (2, 2)])


def test_placement_splits_every_layer_evenly_over_the_servers():
    place = placement([10, 20, 1, 7], 3)
    assert place.sizes == (4, 3, 3, 7, 7, 6, 1, 3, 2, 2)
    assert place.owners == (0, 1, 2, 1, 2, 0, 2, 0, 1, 2)  # slice j of layer i on server (i + j) mod 3
    assert place.layers == ((0, 3), (3, 6), (6, 7), (7, 10))
    loads = [sum(n for n, o in zip(place.sizes, place.owners) if o == s) for s in range(3)]
    assert max(loads) - min(loads) <= 3  # near-equal shares, where whole layers would give 10/21/7
    assert placement([10, 20], 1).sizes == (10, 20)


def test_pull_plan_takes_each_piece_from_its_server():
    place = placement([6, 9], 2)
    plan = ps_pull(5, 2, place, [(0, 1)])
    validate(plan)
    layout = PieceLayout.per_layer(list(place.sizes) + [1, 1, 1])
    inputs = {r: np.zeros(layout.total, np.float32) for r in range(5)}
    for p, (a, b) in enumerate(layout.bounds[:len(place.sizes)]):  # each server holds only its own pieces
        inputs[place.owners[p]][a:b] = np.arange(a, b)
    out = simulate(plan, inputs, layout, zero_others=False)
    for w in (2, 3, 4):
        assert np.array_equal(out[w][:15], np.arange(15, dtype=np.float32))


def test_push_plan_sums_gradients_on_the_servers():
    place = placement([10, 20, 30, 5], 2)
    plan = ps_push(5, 2, place)
    layout = PieceLayout.per_layer(list(place.sizes))
    rng = np.random.default_rng(0)
    inputs = {r: rng.standard_normal(layout.total).astype(np.float32) for r in range(5)}
    out = simulate(plan, inputs, layout)
    expected = sum(inputs[r] for r in (2, 3, 4))
    for piece, (a, b) in enumerate(layout.bounds):
        server = place.owners[piece]
        assert np.allclose(out[server][a:b], expected[a:b], atol=1e-5)  # servers start from zero
