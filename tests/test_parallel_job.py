"""A transformer job under tensor, pipeline and data parallelism: its layout's rank order and groups, the schedules'
orders and timeline (bubble (p-1)/(m+p-1)), the closed form beside the timeline, and the split model's training
equal to the unsplit model's in real processes."""

import pytest

from emulation.simulation.parallel_theory import ParallelJob, allreduce_s, kind_rates_Bps, parallel_theory, ring_share
from emulation.core.topology import parse
from emulation.simulation.pipeline_timeline import pipeline_timeline
from emulation.simulation.routes import Router
from workloads.parallel_layout import LayoutError, parse_layout
from workloads.pipeline_schedule import ScheduleError, check_schedule, in_flight, stage_ops
from workloads.transformer import PRESETS, Transformer, TransformerError, parse_transformer


def test_megatron_rank_order_puts_tensor_ranks_next_to_each_other_then_data_then_pipeline():
    layout = parse_layout("tp=2,pp=2,dp=4")
    assert layout.ranks == 16
    assert layout.groups("tp")[:2] == [[0, 1], [2, 3]]
    assert [0, 2, 4, 6] in layout.groups("dp") and [9, 11, 13, 15] in layout.groups("dp")
    assert [0, 8] in layout.groups("pp") and [7, 15] in layout.groups("pp")
    for kind, size, count in (("tp", 2, 8), ("dp", 4, 4), ("pp", 2, 8)):
        groups = layout.groups(kind)
        assert len(groups) == count and all(len(g) == size for g in groups)
        assert sorted(r for g in groups for r in g) == list(range(16))  # every rank in exactly one group
    assert all(layout.rank_of(layout.coords(r)) == r for r in range(16))


def test_a_users_order_numbers_ranks_otherwise_and_expert_groups_split_data_groups():
    layout = parse_layout("tp=2,pp=2,dp=4,ep=2,order=pp-tp-dp")
    assert layout.coords(1) == {"pp": 1, "tp": 0, "dp": 0}
    assert layout.groups("pp")[0] == [0, 1]
    ep = layout.groups("ep")
    assert len(ep) == 8 and all(len(g) == 2 for g in ep)
    assert all(any(set(g) <= set(d) for d in layout.groups("dp")) for g in ep)
    assert parse_layout(layout.label) == layout


@pytest.mark.parametrize("text, said", [
    ("tp=2,pp=2", None), ("tp=0,dp=2", "'tp=0' is not a degree"), ("tp=2,tp=2", "tp is given twice"),
    ("xp=2", "'xp=2' is not a degree"), ("", "give at least one"), ("dp=4,ep=3", "ep=3 must divide dp=4"),
    ("tp=2,order=tp-dp", "order must name tp, pp and dp"),
])
def test_bad_layouts_say_what_is_wrong_and_what_is_valid(text, said):
    if said is None:
        assert parse_layout(text).ranks == 4
        return
    with pytest.raises(LayoutError) as err:
        parse_layout(text)
    assert said in str(err.value) and "\n" not in str(err.value)


def test_a_layout_must_fit_the_job_and_the_model():
    layout = parse_layout("tp=2,pp=2,dp=2")
    model = parse_transformer("gpt:6,48,6,32")
    assert layout.check(8, model.layers, model.heads) is layout
    for ranks, layers, heads, said in ((16, 4, 4, "tp x pp x dp = 8, but the job has 16 ranks"),
                                       (8, 5, 4, "5 layers do not split into pp=2"),
                                       (8, 4, 5, "5 attention heads do not split over tp=2")):
        with pytest.raises(LayoutError, match=said):
            layout.check(ranks, layers, heads)


def test_transformer_sizes_are_megatrons():
    gpt3 = PRESETS["gpt3-175b"]
    assert abs(gpt3.parameters / 175e9 - 1) < 0.01  # 12 l h^2 (1 + 13/12h + (V + s)/12 l h) with an untied head
    small = parse_transformer("gpt:2,8,2,4,10")
    assert small.layer_parameters == 12 * 64 + 13 * 8
    assert small.parameters == 2 * small.layer_parameters + (10 + 4) * 8 + 2 * 8 + 8 * 10
    # a tensor-parallel rank holds its share of the split matrices, the rest whole
    assert small.tp_split_parameters(1) == small.layer_parameters
    assert small.tp_split_parameters(2) * 2 - small.layer_parameters == 6 * 8
    assert small.layer_flops(3) == 24 * 3 * 4 * 64 + 4 * 3 * 16 * 8
    for name, said in (("gpt:2,8,3,4", "not a multiple of heads 3"), ("gpt:2,8", "gpt:LAYERS,HIDDEN"),
                       ("gpt:0,8,2,4", "layers must be >= 1")):
        with pytest.raises(TransformerError, match=said):
            parse_transformer(name)


@pytest.mark.parametrize("p", [1, 2, 4, 5])
@pytest.mark.parametrize("m", [1, 3, 8])
def test_every_stage_runs_each_pass_once_and_1f1b_holds_at_most_p_minus_stage_micro_batches(p, m):
    for schedule in ("gpipe", "1f1b"):
        for s in range(p):
            ops = stage_ops(schedule, s, p, m)
            assert sorted(ops) == sorted([("F", i) for i in range(m)] + [("B", i) for i in range(m)])
            assert all(ops.index(("F", i)) < ops.index(("B", i)) for i in range(m))
            assert in_flight(ops) == (m if schedule == "gpipe" else min(p - s, m))
    with pytest.raises(ScheduleError, match="give one of gpipe, 1f1b"):
        check_schedule("zb", 4)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("p, m", [(4, 4), (4, 8), (4, 16), (2, 3), (8, 32)])
def test_timeline_bubble_is_p_minus_1_over_m_plus_p_minus_1(schedule, p, m):
    t = pipeline_timeline(schedule, m, [1.0] * p, [2.0] * p)
    assert t.iteration == pytest.approx((m + p - 1) * 3.0)
    assert t.bubbles() == pytest.approx([(p - 1) / (m + p - 1)] * p)


def test_timeline_waits_for_each_input_and_adds_the_gradient_sum():
    t = pipeline_timeline("gpipe", 2, [1.0, 1.0], [2.0, 2.0], [0.5], [0.25, 4.0])
    first = {(s.stage, s.kind, s.micro_batch): s for s in t.spans}
    assert first[(1, "F", 0)].start == pytest.approx(1.5)  # stage 0's forward, then the send
    assert first[(0, "B", 0)].start == pytest.approx(first[(1, "B", 0)].end + 0.5)
    assert t.iteration == pytest.approx(first[(1, "dp", -1)].end)  # the last stage's long sum ends last


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("pp,m", [(2, 4), (4, 8), (4, 3), (8, 16)])
def test_closed_form_equals_the_timeline_with_and_without_sends(schedule, pp, m):
    """GPipe's formula is its timeline's span exactly; 1F1B's alternating passes wait for the sends' round trip
    (longer than the formula where sends are slow), so its closed form evaluates the schedule with the same
    times, and equals the formula when sends are free."""
    job = ParallelJob(parse_transformer("gpt-mini"), parse_layout(f"tp=2,pp={pp},dp=2"), m, 2, schedule)
    for rates in ({"tp": 1e9, "pp": float("inf"), "dp": 1e8}, {"tp": 1e9, "pp": 1e8, "dp": 1e8},
                  {"tp": 1e9, "pp": 1e6, "dp": 1e8}):
        th = parallel_theory(job, [0.3], rates)
        t = pipeline_timeline(schedule, m, th.forward_s, th.backward_s, [th.send_s] * (pp - 1), th.dp_s)
        assert max(t.finished) == pytest.approx(th.pipeline_s)
        assert t.iteration == pytest.approx(th.iteration_s)
        assert t.bubbles() == pytest.approx(th.bubbles)
        formula = sum(f + b for f, b in zip(th.forward_s, th.backward_s)) + \
            (m - 1) * max(f + b for f, b in zip(th.forward_s, th.backward_s)) + 2 * (pp - 1) * th.send_s
        if schedule == "gpipe" or th.send_s == 0:
            assert th.pipeline_s == pytest.approx(formula)
        else:
            assert th.pipeline_s >= formula - 1e-12


def test_bytes_per_kind_count_rings_and_sends():
    model = Transformer(4, 16, 2, 8, 32)
    job = ParallelJob(model, parse_layout("tp=2,pp=2,dp=2"), micro_batches=3, micro_batch_size=1)
    act = 8 * 16 * 4
    got = job.bytes_per_kind()
    assert got["tp"] == 8 * 2 * 3 * 4 * 1.0 * act  # 8 ranks, 2 layers each, 3 micro-batches, 4 all-reduces
    assert got["pp"] == 2 * 3 * 1 * 2 * 2 * act
    assert got["dp"] == sum(4 * 1.0 * job.gradient_bytes(s) for s in range(2))
    assert ring_share(1) == 0 and ring_share(4) == 1.5
    assert allreduce_s(100, 4, 10.0, 0.5) == pytest.approx(15 + 3)


def test_placement_decides_each_kinds_rate_with_every_group_sending_at_once():
    topo = parse("leafspine:2,4,1")  # 4 hosts per leaf, one spine
    hosts = [h.name for h in topo.hosts]
    router = Router(topo, "spread")
    rates = {0: 100.0, 1: 25.0}  # host links 100 B/s, leaf to spine 25
    inside = kind_rates_Bps(router, parse_layout("tp=4,dp=2"), hosts, rates)  # tensor groups inside a leaf
    across = kind_rates_Bps(router, parse_layout("tp=4,dp=2,order=dp-tp-pp"), hosts, rates)  # across the spine
    assert inside["tp"] == 100 and across["dp"] == 100
    assert inside["dp"] == 25 / 4  # four data-parallel rings, each with a flow up the one uplink each way
    assert across["tp"] == 25 / 2  # two rings h0,h2,h4,h6 and h1,h3,h5,h7: each crosses once each way
    pipeline = kind_rates_Bps(router, parse_layout("pp=2,dp=4"), hosts, rates)
    assert pipeline["pp"] == 25 / 4 and pipeline["tp"] == float("inf")


@pytest.mark.parametrize("layout", ["tp=2,pp=1,dp=2", "tp=1,pp=2,dp=2", "tp=2,pp=2,dp=2", "tp=2,pp=2,dp=4"])
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_split_model_trains_exactly_as_the_unsplit_one(layout, schedule):
    from workloads.parallel_check import compare
    got = compare({"layout": layout, "schedule": schedule, "model": "gpt-tiny", "micro_batches": 4,
                   "micro_batch_size": 2, "iterations": 3, "lr": 0.5, "seed": 3})
    assert got["max_weight_change"] > 1e-3  # training moved the weights...
    assert got["max_weight_difference"] < 1e-12  # ...and the split job moved them exactly as the unsplit one
    assert got["losses_split"] == pytest.approx(got["losses_unsplit"], abs=1e-12)


def test_the_exactness_check_sees_a_missing_tensor_parallel_gradient_sum(monkeypatch):
    from workloads import parallel_gpt
    from workloads.parallel_check import compare
    monkeypatch.setattr(parallel_gpt._CopyToGroup, "backward", staticmethod(lambda ctx, grad: (grad, None)))
    got = compare({"layout": "tp=2,pp=1,dp=1", "schedule": "gpipe", "model": "gpt-tiny", "micro_batches": 2,
                   "micro_batch_size": 2, "iterations": 2, "lr": 0.5, "seed": 3})
    assert got["max_weight_difference"] > 1e-6
