"""BlueConnect and the two-level baseline: decomposition, per-stage traffic, eq. 3/5/7/9."""

import numpy as np
import pytest

from emulation.core.formulas import blueconnect_time, one_level_time, two_level_time
from emulation.core.topology import parse
from workloads.algorithms import build_plan, theory
from workloads.algorithms.blueconnect import blueconnect, two_level
from workloads.plan import PieceLayout, check_sum


def test_decomposition_follows_topology_levels():
    assert parse("tree:3,2,2").radices() == [3, 2, 2]
    assert parse("fattree:4").radices() == [2, 2, 4]
    assert parse("bcube:3,2").radices() == [3, 3]


def test_stage_traffic_shrinks_up_the_hierarchy():
    """Learner A0 of the paper's Fig. 4: stage i moves (p_i - 1)/p_i of N / prod_{j<i} p_j."""
    plan = blueconnect([3, 2, 2])
    layout = PieceLayout([12 * 1000], plan.pieces)
    piece = 1000
    steps = plan.streams[0]
    assert len(steps) == 2 * (2 + 1 + 1)  # ring of 3: 2 steps; groups of 2: 1 step each; mirrored
    sent = [sum(layout.piece_sizes()[t.piece] for t in step if t.src == 0) for step in steps]
    assert sent[:4] == [4 * piece, 4 * piece, 2 * piece, piece]  # ring of 3: N/3 per step; then N/6; N/12
    assert sent[4:] == sent[:4][::-1]


def test_recursive_halving_for_power_of_two_groups():
    ring = blueconnect([8], recursive=False)
    halving = blueconnect([8], recursive=True)
    assert len(ring.streams[0]) == 14 and len(halving.streams[0]) == 6  # 2(p-1) vs 2 lg p
    for plan in (ring, halving):
        layout = PieceLayout([800, 3], plan.pieces)
        rng = np.random.default_rng(0)
        check_sum(plan, {r: rng.standard_normal(layout.total).astype(np.float32) for r in range(8)}, layout)


@pytest.mark.parametrize("radices", [[3, 2, 2], [2, 4], [4, 4], [5, 3], [2, 2, 2, 2]])
def test_two_level_sums(radices):
    plan = two_level(radices)
    layout = PieceLayout([999, 17], plan.pieces)
    rng = np.random.default_rng(1)
    check_sum(plan, {r: rng.standard_normal(layout.total).astype(np.float32) for r in range(plan.ranks)}, layout)


def test_bcube_blueconnect_pins_stage_to_level():
    plan = build_plan("blueconnect", parse("bcube:3,2"))
    levels = [{t.level for t in step} for step in plan.streams[0]]
    assert levels == [{0}, {0}, {1}, {1}, {1}, {1}, {0}, {0}]


def test_equations_on_the_blueconnect_tree():
    topo = parse("tree:3,2,2")
    n = 8e6  # bytes
    w = [100e6 / 8, 20e6 / 8, 40e6 / 8]
    bw = (100.0, 20.0, 40.0)
    eq9 = 2 * (2 / 3 * n / w[0]) + 2 * (1 / 2 * (n / 3) / (w[1] / 3)) + 2 * (1 / 2 * (n / 6) / min(w[1] / 3, w[2] / 6))
    assert blueconnect_time(topo, n, bw) == pytest.approx(eq9)
    assert one_level_time(topo, n, bw) == pytest.approx(2 * 11 / 12 * n / w[1])
    # two-level: reduce + broadcast in the node (2 T_c + 2 T_r over p0=3), ring of 4 masters at min W
    assert two_level_time(topo, n, bw) == pytest.approx(2 * (2 / 3 * n / w[0]) * 2 + 2 * 3 / 4 * n / w[1])
    assert theory("blueconnect", topo, n, bw).gst_s < theory("ring", topo, n, bw).gst_s < \
        theory("twolevel", topo, n, bw).gst_s


def test_decompositions_join_consecutive_levels_in_every_stage_order():
    from emulation.core.formulas import best_decomposition, decomposition_time, decompositions, parse_decomposition
    topo = parse("tree:3,2,2")
    assert len(decompositions(topo)) == 6 + 2 + 2 + 1  # 3,2,2 in 3! orders; 6,2 and 3,4 in 2; 12
    assert parse_decomposition("topology", topo) is None and parse_decomposition("auto", topo) == "auto"
    assert parse_decomposition("3,4@1,0", topo) == (((0, 0), (1, 2)), (1, 0))
    for bad, needle in (("2,6", "valid: 12; 3,2,2; 3,4; 6,2"), ("3,4@0,0", "permutation"), ("x", "is invalid")):
        with pytest.raises(ValueError, match=needle):
            parse_decomposition(bad, topo)
    # one factor per level, in order, is eq. 9 as before
    assert decomposition_time(topo, 1e6, (100, 20, 40), ((0, 0), (1, 1), (2, 2)), (0, 1, 2)) == pytest.approx(
        blueconnect_time(topo, 1e6, (100, 20, 40)))
    # the search finds the least eq. 9 time (ties: fewer stages): here 3 x 4 equals one factor per level
    spans, order = best_decomposition(topo, 1e6, (1000, 100, 50))
    assert spans == ((0, 0), (1, 2)) and order == (0, 1)
    times = [decomposition_time(topo, 1e6, (1000, 100, 50), *d) for d in decompositions(topo)]
    assert decomposition_time(topo, 1e6, (1000, 100, 50), spans, order) == pytest.approx(min(times))
    assert min(times) < max(times)
    # going up first costs more: the slow levels then carry the whole gradient
    assert decomposition_time(topo, 1e6, (1000, 100, 50), spans, (1, 0)) > decomposition_time(
        topo, 1e6, (1000, 100, 50), spans, (0, 1))


@pytest.mark.parametrize("spec,decomposition", [("tree:3,2,2", "3,4"), ("tree:3,2,2", "3,4@1,0"),
                                                 ("tree:3,2,2", "6,2@1,0"), ("tree:3,2,2", "12"),
                                                 ("tree:2,2,2", "2,2,2@2,0,1"), ("bcube:3,2", "3,3@1,0"),
                                                 ("fattree:4", "2,8@1,0")])
def test_every_decomposition_and_order_gives_the_exact_sum(spec, decomposition):
    from workloads.algorithms.blueconnect import blueconnect_plan
    topo = parse(spec)
    plan = blueconnect_plan(topo, 0, decomposition)
    for shape in ([37], [5, 100, 3]):
        layout = PieceLayout(shape, plan.pieces)
        rng = np.random.default_rng(1)
        check_sum(plan, {r: rng.standard_normal(layout.total).astype(np.float32) for r in range(plan.ranks)}, layout)


def test_decomposition_reaches_theory_and_the_workers(tmp_path):
    import json
    from helpers import run_dmlbed
    r = run_dmlbed("theory", "--topo", "tree:3,2,2", "--algo", "blueconnect", "--bw", "1000,100,50",
                   "--decomposition", "auto", "--json")
    assert r.returncode == 0 and "factors 3,4 in stage order 3,4" in json.loads(r.stdout)["formula"], r.stderr
    r = run_dmlbed("theory", "--topo", "tree:3,2,2", "--algo", "ring", "--decomposition", "3,4")
    assert r.returncode == 2 and "applies to blueconnect only" in r.stderr
    r = run_dmlbed("run", "--topo", "tree:3,2,2", "--algo", "blueconnect", "--decomposition", "3,4@1,0", "--local",
                   "--model", "mlp:2K", "--iters", "2", "--bw", "1000,100,50", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["correct"] is True and "stage order 4,3" in summary["gst_formula"]


RESNET50_BYTES = 25_557_032 * 4


def test_fig5_ordering_blueconnect_ahead_of_a_flat_ring_at_10_to_1():
    # Fig. 5: two systems of 4 GPUs, the network 10x slower than inside a system; BLC about 1.6x over NCCL's ring
    from workloads.algorithms import get
    t = get("blueconnect").gst_theory(parse("tree:4,2"), RESNET50_BYTES, (100.0, 10.0), options={"alpha": 5e-3})
    ring = dict(t.baselines)["one-level ring (eq. 5)"]
    assert ring / t.gst_s == pytest.approx(1.52, abs=0.01)
    assert ring == pytest.approx(one_level_time(parse("tree:4,2"), RESNET50_BYTES, (100.0, 10.0), 5e-3))


def test_with_latency_auto_leaves_the_flat_ring_on_192_learners():
    # Fig. 6's layout (48 systems of 4 GPUs), rates and alpha scaled 1000x down: without latency eq. 9 finds
    # nothing better than the flat ring (factor 192); with alpha, the ring's 382 steps cost more than the stage
    # inside a system, and auto picks 4,48, which beats the ring
    from workloads.algorithms import get
    topo, bw = parse("tree:4,48"), (1000.0, 100.0)
    flat = get("blueconnect").gst_theory(topo, RESNET50_BYTES, bw, options={"decomposition": "auto"})
    assert "factors 192" in flat.formula and flat.gst_s == pytest.approx(dict(flat.baselines)["one-level ring (eq. 5)"])
    auto = get("blueconnect").gst_theory(topo, RESNET50_BYTES, bw, options={"decomposition": "auto", "alpha": 5e-3})
    assert "factors 4,48" in auto.formula and "alpha 0.005" in auto.formula
    assert auto.gst_s < dict(auto.baselines)["one-level ring (eq. 5)"]
    plan = get("blueconnect").build_plan(topo, 0, {"decomposition": "auto", "alpha": 5e-3}, bw, RESNET50_BYTES)
    assert plan.meta["radices"] == [4, 48]


def test_theory_prints_the_baselines_at_the_same_alpha():
    import json
    from helpers import run_dmlbed
    r = run_dmlbed("theory", "--topo", "tree:4,2", "--bw", "100,10", "--algo", "blueconnect", "--model", "resnet50",
                   "--alpha", "0.005", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out["baselines_s"]) == {"one-level ring (eq. 5)", "two-level (eq. 7)"}
    assert out["baselines_s"]["one-level ring (eq. 5)"] > out["gst_theory_s"]
    r = run_dmlbed("theory", "--topo", "tree:4,2", "--algo", "ring", "--alpha", "0.005")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "alpha" in r.stderr, r.stderr
