"""Links that change during a run (--event LINK=RATE@WHEN): parsing and checks, the rates in force, and the same
schedule in theory, in the flow model and on the emulated network."""

import pytest

from emulation.core.events import LinkEvent, cut_off, failed_links, parse_events, rates_in_force
from emulation.core.topology import TopologyError, parse
from helpers import cli_json, run_dmlbed

RING = ["--topo", "star:4", "--algo", "ring", "--model", "mlp:2MB", "--compute-time", "0.1", "--iters", "8"]


def test_events_parse_on_the_topology_in_order():
    topo = parse("fattree:4")
    events = parse_events(["a0_0-c0=50@2.5s", "h3=25@5it", "e0_0-a0_0=1Gbit@2it"], topo, 10)
    assert [e.shown() for e in events] == ["e0_0-a0_0=1000@2it", "h3=25@5it", "a0_0-c0=50@2.5s"]
    assert events[1].link == ("h3", "e0_1") and events[1].mbps == 25.0
    assert events[2] == LinkEvent("a0_0-c0", ("a0_0", "c0"), 50.0, at_s=2.5)


@pytest.mark.parametrize("items,match", [
    (["h1=50"], r"is not LINK=RATE@WHEN"),
    (["h1=50@soon"], r"is not LINK=RATE@WHEN"),
    (["h1=up@3it"], r"h1-s0 is already up then"),
    (["h1=down@3it", "h1=down@5it"], r"h1-s0 is already down then"),
    (["h1=0.5@3it"], r"rate '0.5' is not in \[2, 1000\]"),
    (["h9=50@3it"], r"h9 names no link of star:4"),
    (["h1=50@0it"], r"iteration 0 is not one of the run's after its first \(1..9 of 10"),
    (["h1=50@10it"], r"iteration 10 is not one of the run's"),
    (["h1=50@2.5it"], r"iteration 2.5 is not"),
    (["h1=50@0s"], r"give a time after the first iteration began"),
    (["h1=50@3it", "h1=25@3it"], r"h1-s0 changes twice at one point"),
    (["h1=50@3it", "h1=25@2s"], r"all at iterations or all at times"),
])
def test_bad_events_get_one_line(items, match):
    with pytest.raises(TopologyError, match=match):
        parse_events(items, parse("star:4"), 10)


def test_a_link_down_is_at_zero_until_it_comes_up_at_the_rate_it_had():
    events = parse_events(["a0_0-c0=50@2it", "a0_0-c0=down@4it", "a0_0-c0=up@7it"], parse("fattree:4"), 10)
    assert [e.kind for e in events] == ["rate", "down", "up"] and events[1].shown() == "a0_0-c0=down@4it"
    link = ("a0_0", "c0")
    assert rates_in_force({}, events, 3, 0.0) == {link: 50.0}
    assert rates_in_force({}, events, 5, 0.0) == {link: 0.0} and failed_links({link: 0.0}) == (link,)
    assert rates_in_force({}, events, 8, 0.0) == {link: 50.0}


def test_a_link_left_down_that_cuts_a_host_off_is_named():
    fattree = parse("fattree:4")
    assert cut_off(fattree, parse_events(["h3=down@3it"], fattree, 10)) == ("h3",)
    assert cut_off(fattree, parse_events(["h3=down@3it", "h3=up@5it"], fattree, 10)) == ()
    assert cut_off(fattree, parse_events(["a0_0-c0=down@3it"], fattree, 10)) == ()
    bcube = parse("bcube:3,2")  # a host with one of its two links down still reaches every other
    assert cut_off(bcube, parse_events(["h4:1=down@3it"], bcube, 10)) == ()


def test_the_rates_in_force_follow_the_schedule():
    events = parse_events(["h1=50@3it", "h1=80@6it", "h2=25@1.5s"], parse("star:4"), 10)
    base = {("h0", "s0"): 10.0}
    assert rates_in_force(base, events, 2, 9.0) == {("h0", "s0"): 10.0, ("h2", "s0"): 25.0}
    assert rates_in_force(base, events, 4, 1.0) == {("h0", "s0"): 10.0, ("h1", "s0"): 50.0}
    assert rates_in_force(base, events, 7, 2.0)[("h1", "s0")] == 80.0


def test_theory_and_the_flow_model_follow_a_halved_link():
    theory = cli_json("theory", *RING, "--event", "h1=50@4it")["link_events"][0]
    assert theory["took_effect_iteration"] == 4 and theory["after_over_before"] == pytest.approx(2.0)
    sim = cli_json("simulate", *RING, "--event", "h1=50@4it")
    event = sim["link_events"][0]
    assert event["took_effect_iteration"] == 4 and event["after_over_before"] == pytest.approx(2.0, rel=0.02)
    assert event["gst_after_theory_s"] == pytest.approx(theory["gst_after_theory_s"])
    assert event["after_over_theory"] == pytest.approx(1.0, abs=0.05)  # the model's goodput below the shaped rate


def test_a_time_event_holds_from_the_first_synchronization_after_it():
    sim = cli_json("simulate", *RING, "--event", "h1=50@1.2s")
    event = sim["link_events"][0]
    iteration_s = 0.1 + event["gst_before_median_s"]  # compute, then the GST at the old rate
    assert event["took_effect_iteration"] == int((1.2 - 0.1) // iteration_s) + 1


def test_bad_event_input_is_refused_before_anything_starts(tmp_path):
    r = run_dmlbed("simulate", *RING, "--event", "h1=50@9it", "--out", str(tmp_path / "never"))
    assert r.returncode == 2 and "iteration 9 is not one of the run's" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "never").exists()
    r = run_dmlbed("run", *RING, "--local", "--event", "h1=50@4it")
    assert r.returncode == 2 and "runs on loopback, without links" in r.stderr
    r = run_dmlbed("simulate", *RING, "--overlap", "--event", "h1=50@4it")
    assert r.returncode == 2 and "without --overlap" in r.stderr


@pytest.mark.emulation
def test_an_emulated_link_halved_mid_run_halves_the_ring(tmp_path):
    from test_emulation import leftovers
    s = cli_json("run", *RING, "--batch", "4", "--event", "h1=50@4it", "--out", str(tmp_path / "r"), timeout=600)
    assert s["correct"] is True and s["iterations"] == 8
    event = s["link_events"][0]
    assert event["took_effect_iteration"] in (4, 5) and event["applied_s"] is not None
    assert 1.6 < event["after_over_before"] < 2.4, event
    assert 0.8 < event["after_over_theory"] < 1.25, event
    assert "link events: each iteration judged at the link rates in force" in s["fidelity"]["scenario_note"]
    assert s["fidelity"]["verdict"] != "not faithful"
    assert leftovers("star:4") == []
