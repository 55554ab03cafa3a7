"""Every collective's every algorithm leaves every rank what the op defines, in memory, for many rank counts,
roots and shapes; the flow model of each plan equals its closed form on a non-blocking network."""

import numpy as np
import pytest

from emulation.core.topology import parse
from emulation.simulation.flows import simulate_plan
from emulation.simulation.routes import Router
from workloads.collectives import COLLECTIVES, OPS, get
from workloads.engine import CHUNK_BYTES
from workloads.plan import PieceLayout, Plan, PlanError, validate

CASES = [(op, algo) for op in COLLECTIVES for algo in COLLECTIVES[op].algorithms]  # all-reduce: test_plans.py
RANKS = [2, 3, 4, 5, 7, 8, 16]
SHAPES = [[1], [37], [5, 3, 1000]]


def inputs_for(ranks, layout, seed):
    rng = np.random.default_rng(seed)
    return {r: (rng.standard_normal(layout.total) * rng.uniform(0.1, 100)).astype(np.float32) for r in range(ranks)}


@pytest.mark.parametrize("op,algo", CASES)
def test_every_algorithm_leaves_every_rank_what_its_op_defines(op, algo):
    collective = COLLECTIVES[op]
    for ranks in RANKS:
        if collective.way(algo).powers_of_two and ranks & (ranks - 1):
            with pytest.raises(PlanError, match="power of two"):
                collective.plan(algo, ranks)
            continue
        for root in sorted({0, 1, ranks - 1}) if collective.rooted else [0]:
            plan = collective.plan(algo, ranks, root)
            validate(plan)
            assert plan.pieces == collective.pieces(ranks)
            for n, shape in enumerate(SHAPES):
                layout = PieceLayout([s * plan.pieces for s in shape], plan.pieces)
                collective.check_plan(plan, inputs_for(ranks, layout, n), layout, root)


@pytest.mark.parametrize("op,algo", CASES)
def test_a_plan_missing_its_last_step_is_caught(op, algo):
    """The check is the op's definition, not the plan's own behaviour: a plan cut short fails it."""
    collective = COLLECTIVES[op]
    plan = collective.plan(algo, 8, 3 if collective.rooted else 0)
    steps = plan.streams[0]
    cut = Plan(plan.name, plan.ranks, plan.pieces, (steps[:-1] if len(steps) > 1 else (steps[0][:-1],),),
               plan.contributors)
    layout = PieceLayout([plan.pieces * 4], plan.pieces)
    with pytest.raises(AssertionError, match="expected"):
        collective.check_plan(cut, inputs_for(8, layout, 0), layout, 3 if collective.rooted else 0)


@pytest.mark.parametrize("spec", ["star:16", "fattree:4"])
@pytest.mark.parametrize("op,algo", CASES)
def test_the_flow_model_of_each_plan_is_its_closed_form_on_a_non_blocking_network(spec, op, algo):
    topo = parse(spec)
    ranks, rate, size = len(topo.hosts), 100e6 / 8, 16 << 20
    collective = COLLECTIVES[op]
    if collective.way(algo).powers_of_two and ranks & (ranks - 1):
        return
    plan = collective.plan(algo, ranks)
    buffer = collective.buffer_bytes(size, ranks)
    pieces = [4 * n for n in collective.piece_elements(buffer // 4, ranks)]
    simulated = simulate_plan(plan, pieces, Router(topo), {level: rate for level in range(3)},
                              chunk_bytes=CHUNK_BYTES).gst_s
    closed_form = collective.theory_s(algo, ranks, size, rate, CHUNK_BYTES)
    if collective.way(algo).exact:
        assert simulated == pytest.approx(closed_form, rel=1e-6)
    else:  # a bound (uneven pieces: pairwise's steps each wait for their largest block)
        assert simulated >= closed_form * (1 - 1e-6)


def test_the_flow_model_keeps_a_plans_step_barriers_as_the_engine_does():
    # rank 0 receives from 1 in step 0 and sends to 2 in step 1 (other data, other directions of its link): without
    # a barrier both move at once; with one (pairwise all-to-all's, MPI's sendrecv) step 1 waits for step 0's receive
    from workloads.plan import COPY, Transfer
    steps = ((Transfer(1, 0, 0, COPY),), (Transfer(0, 2, 1, COPY),))
    free = Plan("free", 3, 2, (steps,), (0, 1, 2))
    fenced = Plan("fenced", 3, 2, (steps,), (0, 1, 2), meta={"barriers": True})
    times = [simulate_plan(plan, [1 << 20, 1 << 20], Router(parse("star:3")), {0: 100e6 / 8}).gst_s
             for plan in (free, fenced)]
    assert times[1] == pytest.approx(2 * times[0], rel=1e-6)
    assert get("alltoall").plan("pairwise", 4).meta.get("barriers") and not get("alltoall").plan("direct", 4).meta


@pytest.mark.parametrize("ranks", [2, 5, 8, 16])
def test_uneven_all_to_all_splits_each_ranks_size_unevenly_and_is_exact(ranks):
    collective = get("alltoallv")
    pieces = collective.piece_elements(ranks * ranks * 1000, ranks)
    blocks = np.asarray(pieces).reshape(ranks, ranks)
    assert np.all(blocks.sum(axis=1) == ranks * 1000) and np.all(blocks >= 0)  # every rank sends the op's size
    if ranks > 2:
        assert blocks.sum(axis=0).max() > 1.1 * blocks.sum(axis=0).min()  # the ranks receive unequal amounts
    layout = collective.layout(ranks * ranks * 1000, ranks)
    assert layout.piece_sizes() == pieces
    for algo in collective.algorithms:
        collective.check_plan(collective.plan(algo, ranks), inputs_for(ranks, layout, ranks), layout)


def test_uneven_all_to_all_on_even_pieces_is_the_all_to_all():
    even, uneven = get("alltoall"), get("alltoallv")
    pieces = even.piece_elements(64 * 1000, 8)
    assert uneven.way("direct").uneven(8, pieces) * 4 / 12.5e6 == pytest.approx(
        even.theory_s("direct", 8, 8 * 4000, 12.5e6, CHUNK_BYTES))


def test_bus_bandwidth_factors_are_nccl_tests():
    """doc/PERFORMANCE.md of nccl-tests: (n-1)/n for all-gather, reduce-scatter and all-to-all; 1 for broadcast
    and reduce."""
    n = 8
    assert get("allgather").busbw(n) == get("reducescatter").busbw(n) == get("alltoall").busbw(n) == 7 / 8
    assert get("broadcast").busbw(n) == get("reduce").busbw(n) == 1.0
    assert get("allreduce").busbw(n) == 2 * 7 / 8


def test_bad_names_say_what_is_valid():
    with pytest.raises(PlanError, match="valid are allreduce, allgather"):
        get("allgatherv")
    with pytest.raises(PlanError, match="valid are ring, direct, rd"):
        get("allgather").plan("tree", 4)
    with pytest.raises(PlanError, match="root 4 is not a rank: valid are 0..3"):
        get("broadcast").plan("chain", 4, 4)
    assert OPS[0] == "allreduce"


def test_all_to_all_buffers_hold_every_block():
    """All-to-all's plan buffer is N blocks of the op's size (each rank's row in, its column out)."""
    collective = get("alltoall")
    assert collective.buffer_bytes(1 << 20, 16) == 16 << 20
    assert collective.pieces(16) == 256


def test_the_bound_of_an_op_is_its_busbw_at_the_link_rate_or_its_busiest_link():
    assert get("allgather").bound_s(8, 8e6, 12.5e6) == pytest.approx(7 / 8 * 8e6 / 12.5e6)
    uneven = get("alltoallv")
    assert uneven.bound_s(8, 8e6, 12.5e6) == pytest.approx(uneven.theory_s("direct", 8, 8e6, 12.5e6, CHUNK_BYTES))
    assert uneven.bound_s(8, 8e6, 12.5e6) > get("alltoall").bound_s(8, 8e6, 12.5e6)
