"""Every synchronization plan gives every worker the exact sum, in memory, for many topologies and shapes."""

import math

import numpy as np
import pytest

from emulation.core.topology import parse
from workloads.algorithms import ALGORITHMS, build_plan
from workloads.algorithms.hierarchical import hierarchical
from workloads.algorithms.ps import dedicated_ps
from workloads.plan import COPY, REDUCE, PieceLayout, Plan, PlanError, Transfer, check_sum, simulate, validate

SPECS = ["bcube:2,1", "bcube:2,2", "bcube:3,2", "bcube:2,3", "bcube:4,2", "bcube:3,3", "star:2", "star:9",
         "fattree:4", "tree:3,2,2", "tree:2,2,2", "tree:4,3", "tree:1,4"]
SHAPES = [[1], [7], [1000], [5, 3, 1], [800, 32, 25, 1, 1], [4096, 10], [3136 * 4, 1024, 10]]


def random_inputs(plan, layout, seed):
    rng = np.random.default_rng(seed)
    return {r: rng.standard_normal(layout.total).astype(np.float32) * rng.uniform(0.1, 100)
            for r in range(plan.ranks)}


@pytest.mark.parametrize("spec", SPECS)
@pytest.mark.parametrize("algo", [name for name, a in ALGORITHMS.items() if a.plan])
def test_plan_sums_exactly(spec, algo):
    topo = parse(spec)
    if topo.kind not in ALGORITHMS[algo].topologies:
        with pytest.raises(PlanError, match="valid combinations"):
            build_plan(algo, topo)
        return
    plan = build_plan(algo, topo)
    validate(plan)
    for i, shape in enumerate(SHAPES):
        layout = PieceLayout(shape, plan.pieces)
        check_sum(plan, random_inputs(plan, layout, i), layout)


@pytest.mark.parametrize("hosts,servers", [(4, 1), (9, 3), (9, 8), (16, 2)])
def test_dedicated_servers_give_workers_the_sum(hosts, servers):
    plan = dedicated_ps(hosts, servers)
    assert plan.contributors == tuple(range(servers, hosts))
    for i, shape in enumerate(SHAPES):
        layout = PieceLayout(shape, plan.pieces)
        check_sum(plan, random_inputs(plan, layout, i), layout)


@pytest.mark.parametrize("servers", [0, 9, 12])
def test_bad_server_count(servers):
    if servers == 0:
        return
    with pytest.raises(PlanError, match="--servers"):
        dedicated_ps(9, servers)


@pytest.mark.parametrize("radices,threads", [([3, 2], 2), ([2, 3, 4], 3), ([5], 1), ([2, 2, 2, 2], 4),
                                             ([3, 3], 1)])
def test_hierarchical_any_radix(radices, threads):
    plan = hierarchical("h", radices, threads, pin_levels=True)
    for i, shape in enumerate(SHAPES[:4]):
        layout = PieceLayout(shape, plan.pieces)
        check_sum(plan, random_inputs(plan, layout, i), layout)


def hierarchical_by_transfers(name, radices, threads, pin_levels):
    """The hierarchical plan as it was written before it was built as a table: transfer by transfer."""
    from emulation.core.radix import group_members, to_digits
    from workloads.plan import COPY, REDUCE, Plan, Transfer

    def matching(digits, fixed):
        base, scale, offsets = 0, 1, [0]
        for level, r in enumerate(radices):
            if level in fixed:
                base += digits[level] * scale
            else:
                offsets = [o + d * scale for d in range(r) for o in offsets]
            scale *= r
        return sorted(base + o for o in offsets)
    m, ranks = len(radices), math.prod(radices)
    digits = [to_digits(q, radices) for q in range(ranks)]
    neighbours = [[[r for r in group_members(a, level, radices) if r != a] for level in range(m)]
                  for a in range(ranks)]
    streams = []
    for t in range(threads):
        order, base, steps = [(t + w) % m for w in range(m)], t * ranks, []
        for w, level in enumerate(order):
            step = []
            for a in range(ranks):
                for s in neighbours[a][level]:
                    key = list(digits[a])
                    key[level] = digits[s][level]
                    step += [Transfer(a, s, base + q, REDUCE, level if pin_levels else None)
                             for q in matching(key, order[:w] + [level])]
            steps.append(tuple(step))
        for w in range(m):
            level, step = order[m - 1 - w], []
            for a in range(ranks):
                pieces = [base + q for q in matching(digits[a], order[:m - w])]
                for s in neighbours[a][level]:
                    step += [Transfer(a, s, q, COPY, level if pin_levels else None) for q in pieces]
            steps.append(tuple(step))
        streams.append(tuple(steps))
    return Plan(name, ranks, threads * ranks, tuple(streams), tuple(range(ranks)))


@pytest.mark.parametrize("radices,threads,pin", [([3, 2], 2, True), ([2, 3, 4], 3, False), ([5], 1, True),
                                                 ([2, 2, 2, 2], 4, True), ([3, 3], 1, False), ([4, 2, 3], 2, True)])
def test_the_hierarchical_table_is_the_plan_transfer_by_transfer(radices, threads, pin):
    plan = hierarchical("h", radices, threads, pin_levels=pin)
    expected = hierarchical_by_transfers("h", radices, threads, pin)
    assert plan.table is not None and [[tuple(step) for step in s] for s in plan.streams] == \
        [[tuple(step) for step in s] for s in expected.streams]
    assert plan == expected  # a table's steps compare equal to tuples of the same transfers


@pytest.mark.parametrize("hosts,servers", [(5, 0), (2, 0), (7, 2), (4, 1), (9, 3)])
def test_the_ps_tables_are_the_plans_transfer_by_transfer(hosts, servers):
    from workloads.algorithms.ps import p2p_ps
    plan = dedicated_ps(hosts, servers) if servers else p2p_ps(hosts)
    if servers:
        workers = range(servers, hosts)
        push = [Transfer(w, s, s, REDUCE) for w in workers for s in range(servers)]
        pull = [Transfer(s, w, s, COPY) for s in range(servers) for w in workers]
    else:
        push = [Transfer(i, j, j, REDUCE) for i in range(hosts) for j in range(hosts) if i != j]
        pull = [Transfer(j, i, j, COPY) for j in range(hosts) for i in range(hosts) if i != j]
    assert plan.table is not None and [list(step) for step in plan.streams[0]] == [push, pull]
    assert plan.contributors == tuple(range(servers, hosts))


@pytest.mark.parametrize("workers", [2, 3, 5, 8])
def test_the_ring_table_is_ring_steps_over_every_rank(workers):
    from workloads.algorithms.ring import ring, ring_steps
    plan = ring(workers)
    assert plan.table is not None and plan.contributors == tuple(range(workers))
    assert [list(step) for step in plan.streams[0]] == [list(step) for step in ring_steps(range(workers),
                                                                                           range(workers))]


def test_bml_matches_paper_example():
    """BCube(3,2): 18 pieces; thread 0 step 0 on level 0 sends 3 pieces to each of 2 neighbours (6 TC);
    step 1 on level 1 sends 1 piece to each; the whole sync moves 2(N-1) = 16 piece-times per link pair."""
    plan = build_plan("bml", parse("bcube:3,2"))
    assert plan.pieces == 18 and len(plan.streams) == 2
    t0 = plan.streams[0]
    step0 = [t for t in t0[0] if t.src == 0]
    assert len(step0) == 6 and {t.level for t in step0} == {0}
    assert sorted({t.dst for t in step0}) == [1, 2]
    step1 = [t for t in t0[1] if t.src == 0]
    assert len(step1) == 2 and {t.level for t in step1} == {1}
    # thread 1 starts on level 1: the two threads never share a link level in a step
    for w in range(4):
        assert {t.level for t in plan.streams[0][w]}.isdisjoint({t.level for t in plan.streams[1][w]})
    # per rank and per thread: (N-1) pieces in aggregation, (N-1) in broadcast
    per_rank = [t for s in plan.streams for step in s for t in step if t.src == 0]
    assert len(per_rank) == 2 * 2 * 8


def test_ring_sends_one_piece_per_step():
    plan = build_plan("ring", parse("star:9"))
    assert len(plan.streams[0]) == 16
    for step in plan.streams[0]:
        assert sorted(t.src for t in step) == list(range(9))


def test_validate_rejects_races_and_shared_pieces():
    race = Plan("x", 2, 2, (((Transfer(0, 1, 0), Transfer(1, 0, 0)),),), (0, 1))
    with pytest.raises(PlanError, match="both sends and receives"):
        validate(race)
    shared = Plan("x", 2, 1, (((Transfer(0, 1, 0),),), ((Transfer(1, 0, 0),),)), (0, 1))
    with pytest.raises(PlanError, match="used by streams"):
        validate(shared)
    with pytest.raises(PlanError, match="bad transfer"):
        validate(Plan("x", 2, 1, (((Transfer(0, 0, 0),),),), (0, 1)))


def test_simulator_detects_a_wrong_plan():
    """The reference must fail a plan that forgets a broadcast, so the sum checks can fail."""
    good = build_plan("ring", parse("star:4"))
    broken = Plan("broken", good.ranks, good.pieces, (good.streams[0][:-1],), good.contributors)
    layout = PieceLayout([100], broken.pieces)
    with pytest.raises(AssertionError):
        check_sum(broken, random_inputs(broken, layout, 0), layout)


def test_piece_layout_round_trip_and_balance():
    layout = PieceLayout([10, 3, 7], 4)
    flat = np.arange(20, dtype=np.float32)
    assert np.array_equal(layout.from_piece_major(layout.to_piece_major(flat)), flat)
    sizes = layout.piece_sizes()
    assert sum(sizes) == 20 and max(sizes) - min(sizes) <= 3


def test_copy_and_reduce_semantics():
    plan = Plan("x", 3, 1, (((Transfer(0, 1, 0, REDUCE), Transfer(0, 2, 0, COPY)),),), (0, 1, 2))
    layout = PieceLayout([2], 1)
    out = simulate(plan, {r: np.full(2, r + 1.0, np.float32) for r in range(3)}, layout)
    assert out[1].tolist() == [3.0, 3.0] and out[2].tolist() == [1.0, 1.0]


@pytest.mark.parametrize("spec,servers", [("star:9", 0), ("star:9", 3), ("star:2", 0), ("fattree:4", 0),
                                          ("bcube:3,2", 0), ("tree:3,2,2", 2)])
def test_whole_tensor_parameter_server_sums_exactly(spec, servers):
    """TensorFlow's placement: every tensor whole on one server (round-robin), each worker gets the exact sum."""
    topo = parse(spec)
    for i, shape in enumerate(SHAPES):
        plan = ALGORITHMS["ps"].build_plan(topo, servers, options={"ps_placement": "tensor"}, layer_sizes=shape)
        validate(plan)
        assert plan.pieces == len(shape) and plan.contributors == tuple(range(servers, len(topo.hosts)))
        assert list(plan.meta["owners"]) == [t % (servers or len(topo.hosts)) for t in range(len(shape))]
        check_sum(plan, random_inputs(plan, plan.piece_layout(shape), i), plan.piece_layout(shape))


@pytest.mark.parametrize("spec,servers,placement", [("star:9", 0, "even"), ("star:9", 3, "even"),
                                                   ("tree:3,2,2", 2, "tensor"), ("bcube:3,2", 0, "tensor")])
def test_a_parameter_server_behind_its_barrier_sums_exactly_and_pulls_after_its_pushes(spec, servers, placement):
    """--ps-barrier server: the same transfers, a rank's pull step held until its push step is done."""
    topo = parse(spec)
    for i, shape in enumerate(SHAPES):
        options = {"ps_placement": placement, "ps_barrier": "server"}
        plan = ALGORITHMS["ps"].build_plan(topo, servers, options=options, layer_sizes=shape)
        streaming = ALGORITHMS["ps"].build_plan(topo, servers, options=dict(options, ps_barrier="none"),
                                                layer_sizes=shape)
        assert plan.meta["barriers"] is True and not streaming.meta.get("barriers")
        assert [list(s) for s in plan.streams[0]] == [list(s) for s in streaming.streams[0]]
        validate(plan)
        layout = plan.piece_layout(shape)
        check_sum(plan, random_inputs(plan, layout, i), layout)


def test_whole_tensor_plan_refuses_to_run_without_the_models_tensors():
    with pytest.raises(PlanError, match="tensor sizes"):
        ALGORITHMS["ps"].build_plan(parse("star:4"), 0, options={"ps_placement": "tensor"})


def test_whole_tensor_theory_refuses_to_answer_without_the_models_tensors():
    """Not the evenly split formula in its place: a theory for another placement would mislead."""
    a, topo = ALGORITHMS["ps"], parse("star:4")
    with pytest.raises(PlanError, match="tensor sizes"):
        a.gst_theory(topo, 4e6, [100.0], 0, options={"ps_placement": "tensor"})
