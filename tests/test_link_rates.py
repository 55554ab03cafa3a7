"""Per-link rate overrides (--link-rate): naming, checks, shaping, the flow model, theory and fidelity."""

import pytest

from emulation.core.link_rates import (check_format, described, find_link, parse_link_rates, rate_of,
                                       slowest_per_level)
from emulation.core.topology import TopologyError, parse
from emulation.run.options import RunConfig
from emulation.run.validation import validate
from helpers import cli_json, run_dmlbed


def test_links_are_named_as_topo_prints_them():
    star, bcube, tree = parse("star:4"), parse("bcube:3,2"), parse("tree:2,2")
    assert (find_link(star, "h3").lower, find_link(star, "h3").upper) == ("h3", "s0")
    assert find_link(star, "h3-s0") == find_link(star, "s0-h3") == find_link(star, "h3")
    assert find_link(bcube, "h4:1").level == 1 and find_link(bcube, "h4:0").level == 0
    up = find_link(tree, "t1_0-t0_1")
    assert (up.lower, up.upper, up.level) == ("t0_1", "t1_0", 1)


@pytest.mark.parametrize("spec,text,match", [
    ("star:4", "h9=50", r"h9 names no link of star:4: give a host \(h0\)"),
    ("star:4", "h1-h2=50", r"h1-h2 names no link"),
    ("bcube:3,2", "h4=50", r"h4 has 2 NICs, name one as h4:LEVEL \(levels 0, 1\)"),
    ("bcube:3,2", "h4:2=50", r"h4 has NICs on levels 0, 1"),
    ("star:4", "h1=0.5", r"rate .0.5. is not in \[2, 1000\] Mbit/s"),
    ("star:4", "h1=5000", r"is not in \[2, 1000\] Mbit/s"),
    ("star:4", "h1=50,s0-h1=20", r"names h1-s0 twice"),
    ("star:4", "h1=fast", r"not a number with a unit"),
    ("star:4", "h1", r"is not LINK=RATE"),
])
def test_bad_overrides_get_one_line_naming_what_is_valid(spec, text, match):
    with pytest.raises((TopologyError, ValueError), match=match):
        parse_link_rates(text, parse(spec))


def test_rates_resolve_per_link_and_per_level():
    tree = parse("tree:2,2")
    over = parse_link_rates("h0=30, t0_0-t1_0=1Gbit", tree)
    assert over == {("h0", "t0_0"): 30.0, ("t0_0", "t1_0"): 1000.0}
    assert rate_of("t0_0", "h0", 0, (100, 200), over) == 30.0 and rate_of("h1", "t0_0", 0, (100, 200), over) == 100
    assert slowest_per_level(tree, (100, 200), over) == (30.0, 200)  # a faster link leaves its level's slowest
    assert described(over) == {"h0-t0_0": 30.0, "t0_0-t1_0": 1000.0}
    assert parse_link_rates("", tree) == {} and check_format("") == ""


def test_an_overridden_link_is_shaped_at_its_own_rate_and_boxed_on_the_userspace_datapath():
    from emulation.net.topos import SpecTopo
    spec = parse("star:4")
    topo = SpecTopo(spec=spec, bw=(100.0,), link_rates={("h2", "s0"): 40.0}, shaper_boxes=True,
                    boxed_links=(("h2", "s0"),))
    rates = {(a, b): info["bw"] for a, b, info in topo.links(withInfo=True)}
    assert rates[("h2", "x2")] == rates[("x2", "s0")] == 40.0  # both halves of the box: switch->host too
    assert rates[("h0", "s0")] == 100.0 and "x0" not in topo.nodes()


def test_bad_link_rate_exits_2_before_anything_starts():
    r = run_dmlbed("simulate", "--topo", "star:4", "--algo", "ring", "--link-rate", "h7=50")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "h7 names no link of star:4" in r.stderr


def test_a_slow_host_link_paces_a_ring_in_theory_and_in_the_flow_model(tmp_path):
    base = ["--topo", "star:8", "--algo", "ring", "--model", "mlp:2MB", "--bw", "100"]
    uniform = cli_json("simulate", *base, "--out", str(tmp_path / "u"))
    slow = cli_json("simulate", *base, "--link-rate", "h3=50", "--out", str(tmp_path / "s"))
    assert slow["gst_median_s"] / uniform["gst_median_s"] == pytest.approx(2.0, rel=0.05)
    assert slow["gst_theory_s"] / uniform["gst_theory_s"] == pytest.approx(2.0, rel=1e-6)
    assert "exact" in slow["gst_formula"] and slow["link_rates_mbps"] == {"h3-s0": 50.0}
    faster = cli_json("simulate", *base, "--link-rate", "h3=200", "--out", str(tmp_path / "f"))
    assert faster["gst_median_s"] == pytest.approx(uniform["gst_median_s"], rel=0.01)  # the others still pace it


def test_the_closed_form_of_an_uneven_algorithm_is_called_an_upper_bound(tmp_path):
    s = cli_json("theory", "--topo", "star:8", "--algo", "ps", "--servers", "1", "--model", "mlp:2MB",
                 "--link-rate", "h5=25")
    assert "upper bound" in s["gst_formula"]
    sim = cli_json("simulate", "--topo", "star:8", "--algo", "ps", "--servers", "1", "--model", "mlp:2MB",
                   "--link-rate", "h5=25", "--out", str(tmp_path / "s"))
    assert sim["gst_median_s"] <= s["gst_theory_s"] * 1.05


def test_a_slow_uplink_slows_only_the_flows_that_cross_it_in_the_flow_model():
    from emulation.simulation.routes import Router
    topo = parse("fattree:4")
    router = Router(topo, "spread", link_factors={("e0_0", "a0_0"): 0.5})
    rates = {level: 1.0 for level in range(topo.levels)}
    # h0 -> h2: up from e0_0 over both of its uplinks at once, held to the slow one's pace
    first_up = router.path(0, 2)[1]
    assert router.width[first_up] == 2 and router.capacity(first_up, rates) == pytest.approx(2 * 0.5)
    other_pod = router.path(4, 6)[1]  # e1_0's uplinks: untouched
    assert router.capacity(other_pod, rates) == pytest.approx(2.0)
    hashed = Router(topo, "hash", link_factors={("e0_0", "a0_0"): 0.5})
    assert hashed.capacity(("a0_0", "e0_0"), rates) == 0.5 and hashed.capacity(("a0_1", "e0_0"), rates) == 1.0


def test_the_override_reaches_validation_and_the_summary_head():
    checked = validate(RunConfig(topology="star:4", algo="ring", link_rate="h1=25", dilation=2.0), emulated=False,
                       workers=False)
    assert checked.network.link_rates == {("h1", "s0"): 25.0}
    assert checked.network.shaped_link_rates == {("h1", "s0"): 12.5}
    assert checked.network.theory_bw == (25.0,)


def test_fidelity_judges_a_slow_link_against_its_own_rate():
    from emulation.results.links import iteration_links
    topo = parse("star:2")
    mb = 1_000_000
    traces = [{"iteration": 0, "dir": "send", "rank": 0, "peer": 1, "level": 0, "stream": 0, "step": 0,
               "start": 0.0, "end": 0.4, "wire_bytes": mb, "ports": None},
              {"iteration": 0, "dir": "recv", "rank": 1, "peer": 0, "level": 0, "stream": 0, "step": 0,
               "start": 0.0, "end": 0.4, "wire_bytes": mb, "ports": None}]
    rows = {0: [{"tx_bytes": {"h0-eth0": mb}}], 1: [{}]}
    from emulation.results.links import Paths
    links = {l["link"]: l for l in iteration_links(topo, rows, traces, 0, (100.0,),
                                                   Paths(topo, {("h0", "s0"): 20.0}))}
    assert links["h0>s0"]["need_s"] == pytest.approx(mb * 8 / 20e6)  # 0.4 s at 20 Mbit/s: its own rate
    assert links["s0>h1"]["need_s"] == pytest.approx(mb * 8 / 20e6)  # the path's share: held by the slow hop


@pytest.mark.emulation
def test_an_emulated_slow_host_link_paces_the_ring_at_its_own_rate(tmp_path):
    from test_emulation import leftovers
    s = cli_json("run", "--topo", "star:4", "--algo", "ring", "--model", "mlp:2MB", "--iters", "6", "--batch", "4",
                 "--link-rate", "h2=40", "--out", str(tmp_path / "run"), timeout=600)
    assert s["correct"] is True and s["link_rates_mbps"] == {"h2-s0": 40.0}
    assert "exact" in s["gst_formula"]
    assert 0.85 < s["gst_ratio"] < 1.4  # the closed form at 40 Mbit/s: the slow link shaped both ways, no faster
    assert leftovers("star:4") == []
