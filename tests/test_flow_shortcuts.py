"""The flow model's shortcuts (by steps, where messages of different steps never meet on a link and those of one step
that share a link start together; by the recurrence over the plan's graph, where no link is ever shared) give what
the event model gives, to a relative 1e-9, on every shape of plan they take; elsewhere they decline and the events
answer."""

import math

import numpy as np
import pytest

from emulation.backends.flow_model import check_size
from emulation.core.topology import parse
from emulation.run.options import OptionError
from emulation.simulation.flows import simulate_plan
from emulation.simulation.flow_graph import cut
from emulation.simulation.routes import Router
from emulation.simulation.step_state import Declined, as_slice
from emulation.simulation.stepwise import Pins
from workloads.algorithms import get
from workloads.models import tensor_sizes
from workloads.plan import COPY, REDUCE, Plan, Transfer
from workloads.plan_table import GeneratedTable, table_plan


def both(plan, pieces, topo, chunk=256 << 10, latency=0.0, ecmp="spread", factors=None, delays=None, rates=None):
    """The plan simulated by events and as the model chooses."""
    router = Router(parse(topo) if isinstance(topo, str) else topo, ecmp, None, factors)
    rates = rates or {l: 125e6 for l in range(router.topo.levels + 1)}
    return [simulate_plan(plan, [p * 4 for p in pieces], router, rates, latency_s=latency, chunk_bytes=chunk,
                          step_delays=delays, method=m) for m in ("events", "auto")]


def same(a, b) -> None:
    """Every figure the summary reports, to a relative 1e-9."""
    close = lambda x, y: math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)  # noqa: E731
    assert close(a.gst_s, b.gst_s), (a.gst_s, b.gst_s)
    assert all(close(x, y) for x, y in zip(a.rank_done_s, b.rank_done_s))
    assert a.messages == b.messages and set(a.link_bytes) == set(b.link_bytes)
    assert all(close(a.link_bytes[k], b.link_bytes[k]) and close(a.link_busy_s[k], b.link_busy_s[k])
               for k in a.link_bytes)
    assert a.host_tx_bytes.keys() == b.host_tx_bytes.keys()


def ring_plan(topo: str, model: str = "lenet5"):
    plan = get("ring").plan(parse(topo), 0)
    return plan, plan.piece_sizes(tensor_sizes(model))


SHORTCUTS = ("stepwise", "recurrence")


@pytest.mark.parametrize("topo,model,methods", [
    ("star:8", "lenet5", ("recurrence",)), ("fattree:4", "lenet5", ("recurrence",)), ("fattree:8", "lenet5", ("stepwise",)),
    ("fattree:4", "mlp:2MB", ("stepwise",)), ("leafspine:4,4,2", "lenet5", SHORTCUTS), ("rail:8,2,1", "lenet5", SHORTCUTS),
    ("jellyfish:8,3,2", "lenet5", SHORTCUTS + ("events",)), ("torus:4,4", "lenet5", ("events",)),
    ("tree:3,2,2", "lenet5", SHORTCUTS)])
def test_a_ring_is_answered_as_the_events_answer_it(topo, model, methods):
    plan, pieces = ring_plan(topo, model)
    events, auto = both(plan, pieces, topo)
    same(events, auto)
    assert events.method == "events" and auto.method in methods


def test_a_ring_under_hashed_ecmp_latency_delays_and_a_slow_link():
    plan, pieces = ring_plan("fattree:4", "mlp:2MB")
    delays = {(0, 3): 0.01, (0, 10): 0.002}
    events, auto = both(plan, pieces, "fattree:4", latency=50e-6, ecmp="hash", factors={("h5", "e1_0"): 0.5},
                        delays=delays)
    same(events, auto)
    assert auto.method == "stepwise"


def test_messages_larger_than_a_chunk_go_to_the_recurrence_over_the_graph():
    plan, pieces = ring_plan("star:8", "resnet50")  # 12.8 MB pieces: 49 chunks a message
    events, auto = both(plan, pieces, "star:8", chunk=256 << 10, latency=20e-6)
    same(events, auto)
    assert auto.method == "recurrence"


def random_unshared_plan(rng, ranks: int, steps: int, streams: int) -> Plan:
    """Streams of steps in which every rank sends to its next rank on the ring (so no link is shared), each step
    carrying random pieces of the stream's own (some steps empty for some ranks)."""
    per = 3
    out = []
    for s in range(streams):
        own = [s * ranks * per + i for i in range(ranks * per)]
        stream = []
        for _ in range(steps):
            step = []
            for r in range(ranks):
                if rng.random() < 0.8:
                    # a rank sends a piece it does not receive in this step (pieces keyed by the receiver's slot)
                    piece = own[((r + 1) % ranks) * per + int(rng.integers(per))]
                    step.append(Transfer(r, (r + 1) % ranks, piece, REDUCE if rng.random() < 0.5 else COPY))
            stream.append(tuple(step))
        out.append(tuple(stream))
    return Plan("random", ranks, streams * ranks * per, tuple(out), tuple(range(ranks)))


@pytest.mark.parametrize("seed", range(12))
def test_random_unshared_plans_are_answered_as_the_events_answer_them(seed):
    rng = np.random.default_rng(seed)
    streams = int(rng.integers(1, 3))
    plan = random_unshared_plan(rng, int(rng.integers(3, 9)), int(rng.integers(2, 7)), streams)
    pieces = [int(x) for x in rng.integers(0, 200_000, plan.pieces)]
    events, auto = both(plan, pieces, "star:8", chunk=int(rng.choice([64 << 10, 256 << 10])),
                        latency=float(rng.choice([0.0, 1e-4])),
                        delays={(0, 1): float(rng.random() * 0.01)} if rng.random() < 0.5 else None)
    same(events, auto)
    if streams > 1:  # two streams' sends on one uplink in one step: a link shared
        assert auto.method == "events"
    else:
        assert auto.method in ("stepwise", "recurrence")


def random_permutation_plan(rng, ranks: int, steps: int) -> Plan:
    """One stream of steps in which random ranks send a piece to random others (each rank sends at most one message
    and receives at most one a step), so messages of a step share uplinks and steps meet on links."""
    stream, pieces = [], ranks * steps
    for n in range(steps):
        senders = rng.permutation(ranks)[:int(rng.integers(1, ranks + 1))]
        targets = rng.permutation(ranks)
        step = [Transfer(int(a), int(b), n * ranks + int(a), REDUCE if rng.random() < 0.5 else COPY)
                for a, b in zip(senders, targets[:len(senders)]) if a != b]
        stream.append(tuple(step))
    return Plan("permutations", ranks, pieces, (tuple(stream),), tuple(range(ranks)))


def test_random_plans_sharing_links_are_answered_as_the_events_answer_them_by_steps_where_they_can():
    methods = []
    for seed in range(16):
        rng = np.random.default_rng(seed)
        topo = ["tree:2,2,2", "fattree:4", "leafspine:2,2,2"][seed % 3]
        plan = random_permutation_plan(rng, len(parse(topo).hosts), int(rng.integers(2, 6)))
        equal = rng.random() < 0.5  # equal pieces: sharing messages of a step start and end together
        pieces = [50_000 if equal else int(x) for x in rng.integers(1, 200_000, plan.pieces)]
        events, auto = both(plan, pieces, topo, chunk=None, latency=float(rng.choice([0.0, 1e-4])))
        same(events, auto)
        methods.append(auto.method)
    assert "stepwise" in methods and "events" in methods, methods


def test_plans_whose_messages_share_links_within_steps_are_answered_by_steps():
    for algo, topo, ecmp in (("hier", "fattree:4", "spread"), ("hier", "tree:3,2,2", "spread"),
                             ("hd", "fattree:4", "spread"), ("hier", "leafspine:4,4,2", "spread"),
                             ("bml", "bcube:4,2", "spread"), ("ps", "star:8", "spread"), ("hd", "tree:2,2,2", "hash")):
        plan = get(algo).plan(parse(topo), 0)
        events, auto = both(plan, plan.piece_sizes(tensor_sizes("lenet5")), topo, chunk=None, ecmp=ecmp,
                            latency=20e-6)
        same(events, auto)
        assert auto.method == "stepwise", (algo, topo, auto.method)
        shared = auto.answered()["shared_steps"]
        assert 0 < shared <= auto.events, (algo, topo, shared)  # said: how many steps moved by fair shares


def test_steps_whose_messages_would_meet_on_a_link_are_left_to_the_events():
    plan = get("hd").plan(parse("fattree:4"), 0)  # hashed: a later step's message on a link still carrying one
    events, auto = both(plan, plan.piece_sizes(tensor_sizes("lenet5")), "fattree:4", chunk=None, ecmp="hash",
                        latency=20e-6)
    same(events, auto)
    assert auto.method == "events"


def test_a_step_of_all_to_all_is_left_to_the_events():
    plan = get("ps").plan(parse("star:70"), 0)  # each rank to 69 others at once: more than 64 messages a rank
    events, auto = both(plan, plan.piece_sizes(tensor_sizes("lenet5")), "star:70", chunk=None)
    same(events, auto)
    assert auto.method == "events"


def test_a_generated_table_gives_the_steps_a_table_gives():
    plan = get("ring").plan(parse("star:5"), 0)
    rows = [(t.src, t.dst, t.piece, t.op) for step in plan.streams[0] for t in step]
    assert len(rows) == 2 * 4 * 5 and plan.table.src.tolist() == [t.src for t in plan.transfers()]
    assert rows[:5] == [(i, (i + 1) % 5, i, REDUCE) for i in range(5)]  # step 0: rank i sends its own piece i
    assert rows[4 * 5:4 * 5 + 5] == [(i, (i + 1) % 5, (i + 1) % 5, COPY) for i in range(5)]  # then the gathered one
    made = GeneratedTable(((3, 6),), lambda k: tuple(np.array(c) for c in ([0, 1, 2], [1, 2, 0], [k, k, k],
                                                                            [False] * 3, [-1] * 3)))
    twice = table_plan("x", 3, 2, made, range(3))
    assert [[(t.src, t.dst, t.piece) for t in step] for step in twice.streams[0]] == \
        [[(0, 1, 0), (1, 2, 0), (2, 0, 0)], [(0, 1, 1), (1, 2, 1), (2, 0, 1)]]


class Checked:
    """The parts of a checked configuration check_size reads."""

    def __init__(self, topo: str, algo: str):
        self.topo, self.algorithm, self.servers = parse(topo), get(algo), 0
        self.cfg = type("Cfg", (), {"algo": algo})()


def test_a_plan_too_large_for_the_machine_is_refused_with_its_estimate_before_anything_is_built():
    check_size(Checked("fattree:74", "ring"), available=1 << 30)  # answered by steps: no rows, per piece its holder
    with pytest.raises(OptionError, match=r"hier over 101306 ranks is .* transfers"):
        check_size(Checked("fattree:74", "hier"), available=16 << 30)
    with pytest.raises(OptionError, match=r"1\.93e\+08 transfers, 80\.9 GiB .* over the 16\.0 GiB"):
        check_size(Checked("fattree:34", "ps"), available=16 << 30)
    check_size(Checked("fattree:16", "ps"), available=16 << 30)  # 2.1e6 transfers: 0.9 GiB


@pytest.mark.parametrize("ranks", [2, 3, 8, 33])
def test_the_rings_declaration_that_its_pieces_move_as_tokens_holds(ranks):
    """The ring's generated table says its pieces move as tokens (each step moves a piece once, from its holder), so
    the stepwise model trusts it unchecked; checked step by step, it gives the same results."""
    from emulation.simulation.stepwise import simulate_stepwise
    topo = parse(f"star:{ranks}")
    plan = get("ring").plan(topo, 0)
    assert plan.table.tokens
    router = Router(topo)
    sizes = [4 * p for p in plan.piece_sizes(tensor_sizes("mlp:1MB"))]
    latency = lambda hops, lengths, flat: np.full(len(lengths), 1e-5)  # noqa: E731
    runs = [simulate_stepwise(plan, sizes, router, {0: 125e6}, latency, None, {}, False, 0, check_tokens=check)
            for check in (True, False)]
    assert runs[0].tokens and runs[1].tokens  # checked, no step broke the discipline
    assert runs[0].gst_s == runs[1].gst_s and runs[0].rank_done.tolist() == runs[1].rank_done.tolist()


def test_indices_that_step_evenly_are_read_as_slices_and_others_as_themselves():
    for index in (np.arange(5), np.arange(3, 40, 4), np.array([2, 5, 8])):
        at = as_slice(index)
        assert isinstance(at, slice) and np.array_equal(np.arange(100)[at], index)
    for index in (np.array([1, 2, 4]), np.array([3, 2, 1]), np.array([4, 4]), np.roll(np.arange(6), 1),
                  np.array([7])):
        assert as_slice(index) is index


@pytest.mark.parametrize("seed", range(20))
def test_messages_larger_than_a_chunk_are_cut_into_greedy_runs_of_whole_chunks(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 3000, 30) * rng.integers(1, 4)
    counts = rng.integers(1, 6, 25)
    ptr = np.concatenate([[0], np.cumsum(counts)])
    pieces = rng.integers(0, len(sizes), ptr[-1])
    total = np.add.reduceat(sizes[pieces], ptr[:-1])
    chunk = int(rng.integers(200, 4000))
    rows, regions, region_ptr = cut(pieces, ptr, total, sizes.tolist(), chunk)
    for m in range(len(total)):
        mine = np.flatnonzero(rows[:, 0] == m)
        assert rows[mine, 1].sum() == total[m]
        if total[m] <= chunk:
            assert len(mine) == 1 and region_ptr[mine[0] + 1] - region_ptr[mine[0]] == ptr[m + 1] - ptr[m]
            continue
        own = pieces[ptr[m]:ptr[m + 1]]
        chunk_sizes = [min(chunk, sizes[p] - j * chunk) if sizes[p] else 0 for p in own
                       for j in range(max(1, -(-sizes[p] // chunk)))]
        held = np.diff(region_ptr)[mine]
        assert held.sum() == len(chunk_sizes)  # the units take every chunk of the message, in order, once
        ends = np.cumsum(held)
        for u, (bytes_, n) in enumerate(zip(rows[mine, 1], held)):
            first = ends[u] - n
            assert bytes_ == sum(chunk_sizes[first:ends[u]])
            assert n == 1 or bytes_ <= chunk  # a unit is one chunk, or whole chunks that fit together
            if ends[u] < len(chunk_sizes):  # greedy: the next chunk would not have fitted
                assert bytes_ + chunk_sizes[ends[u]] > chunk


def pinned_one_by_one(steps):
    """The pinning rule message by message: a pair's first tagged message pins its level; a pair that sent
    untagged before it is pinned declines."""
    known, untagged, out = {}, set(), []
    for stream, src, dst, tag in steps:
        levels = []
        for a, b, t in zip(src.tolist(), dst.tolist(), tag.tolist()):
            pair = (stream, min(a, b), max(a, b))
            if t >= 0 and pair not in known:
                if pair in untagged:
                    return out, True
                known[pair] = t
            levels.append(known.get(pair, 0))
            if pair not in known:
                untagged.add(pair)
        out.append(levels)
    return out, False


@pytest.mark.parametrize("seed", range(40))
def test_levels_are_pinned_per_pair_by_its_first_tagged_message(seed):
    rng = np.random.default_rng(seed)
    ranks, steps = int(rng.integers(2, 7)), []
    for _ in range(int(rng.integers(1, 6))):
        count = int(rng.integers(1, 12))
        src = rng.integers(0, ranks, count)
        dst = (src + rng.integers(1, ranks, count)) % ranks
        tag = np.where(rng.random(count) < 0.8, rng.integers(0, 3, count), -1)
        steps.append((int(rng.integers(0, 2)), src, dst, tag))
    steps.insert(0, (0, np.array([0]), np.array([1]), np.array([int(rng.integers(0, 3))])))  # pinned from the start
    expected, declines = pinned_one_by_one(steps)
    pins, got = Pins(ranks), []
    try:
        for stream, src, dst, tag in steps:
            got.append(pins.levels(stream, src, dst, tag).tolist())
        declined = False
    except Declined:
        declined = True
    assert (got, declined) == (expected, declines)
