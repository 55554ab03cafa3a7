"""A job on some of the network's hosts (--hosts): the job's view of the topology, routing, theory, the flow model
and emulation; the hosts it leaves free carry background traffic."""

import csv

import pytest

from emulation.core.formulas import cuts
from emulation.core.topology import TopologyError, job_view, parse, parse_hosts
from helpers import cli_json, run_dmlbed


def test_hosts_parse_as_lists_and_ranges():
    topo = parse("star:8")
    assert parse_hosts("h0..h3", topo) == ("h0", "h1", "h2", "h3")
    assert parse_hosts("h6, h1..h2,h4", topo) == ("h6", "h1", "h2", "h4")
    assert parse_hosts("", topo) is None


@pytest.mark.parametrize("spec,text,match", [
    ("star:8", "h0..h9", r"h8 is not a host of star:8 \(valid: h0..h7\)"),
    ("star:8", "h3..h1", r"runs backwards"),
    ("star:8", "h1,h1", r"names h1 twice"),
    ("star:8", "h1", r"at least 2 hosts"),
    ("star:8", "s0,h1", r"is not a host \(h3\) or a range"),
    ("bcube:3,2", "h0..h3", r"BCube routes by its hosts' coordinates"),
])
def test_bad_hosts_get_one_line(spec, text, match):
    with pytest.raises((TopologyError, ValueError), match=match):
        parse_hosts(text, parse(spec))


def test_the_job_view_keeps_the_network_and_renumbers_the_ranks():
    topo = parse("tree:2,2")
    view = job_view(topo, ["h3", "h0"])
    assert [h.name for h in view.hosts] == ["h3", "h0"] and [h.index for h in view.hosts] == [0, 1]
    assert view.hosts[0].ip == topo.node("h3").ip and [h.name for h in view.bystanders] == ["h1", "h2"]
    assert view.is_host("h1") and view.node("h1").name == "h1" and view.links == topo.links
    # the cuts a closed form takes count the job's hosts only: h3 and h0 each sit under their own edge switch
    groups = dict(cuts(view, (100.0, 100.0)))
    assert frozenset({0}) in groups and frozenset({1}) in groups and len(groups) == 2


def test_algorithms_that_plan_by_structure_take_every_host():
    r = run_dmlbed("simulate", "--topo", "tree:2,2", "--algo", "bml", "--hosts", "h0,h1")
    assert r.returncode == 2 and "runs on every host" in r.stderr and "ring" in r.stderr


def test_a_ring_on_half_the_hosts_is_the_ring_of_that_many(tmp_path):
    half = cli_json("simulate", "--topo", "star:8", "--algo", "ring", "--model", "mlp:2MB", "--hosts", "h4..h7",
                    "--out", str(tmp_path / "half"))
    four = cli_json("simulate", "--topo", "star:4", "--algo", "ring", "--model", "mlp:2MB", "--out",
                    str(tmp_path / "four"))
    assert half["ranks"] == 4 and half["gst_median_s"] == pytest.approx(four["gst_median_s"])
    assert half["gst_theory_s"] == pytest.approx(four["gst_theory_s"])


def test_free_hosts_carry_background_that_crosses_the_job_or_not(tmp_path):
    common = ["--topo", "star:8", "--algo", "ring", "--model", "mlp:2MB", "--hosts", "h0..h3"]
    alone = cli_json("simulate", *common, "--out", str(tmp_path / "a"))
    beside = cli_json("simulate", *common, "--background", "h4-h5", "--out", str(tmp_path / "b"))
    into = cli_json("simulate", *common, "--background", "h4-h1", "--share-hosts", "--out", str(tmp_path / "c"))
    assert beside["gst_median_s"] == pytest.approx(alone["gst_median_s"])  # its links are not the job's
    assert into["gst_median_s"] / alone["gst_median_s"] == pytest.approx(2.0, rel=0.02)  # h1's downlink, halved
    theory = cli_json("theory", *common, "--background", "h4-h1", "--share-hosts")
    assert theory["gst_theory_s"] / cli_json("theory", *common)["gst_theory_s"] == pytest.approx(2.0)
    assert into["background"][0]["path"] == ["h4>s0", "s0>h1"]


def test_ps_servers_on_a_subset_count_only_the_jobs_hosts():
    sub = cli_json("theory", "--topo", "tree:2,2", "--algo", "ps", "--servers", "1", "--model", "mlp:2MB",
                   "--hosts", "h0,h2")
    whole = cli_json("theory", "--topo", "tree:2,2", "--algo", "ps", "--servers", "1", "--model", "mlp:2MB")
    assert sub["ranks"] == 2 and sub["gst_theory_s"] < whole["gst_theory_s"]


@pytest.mark.emulation
def test_an_emulated_job_on_half_the_hosts_with_background_on_the_others(tmp_path):
    from test_emulation import leftovers
    s = cli_json("run", "--topo", "star:6", "--algo", "ring", "--model", "mlp:1MB", "--iters", "6", "--batch", "4",
                 "--hosts", "h1,h3,h5", "--background", "h0-h2", "--out", str(tmp_path / "run"), timeout=600)
    assert s["correct"] is True and s["ranks"] == 3
    rows = list(csv.DictReader(open(tmp_path / "run" / "workers.csv")))
    assert {(r["rank"], r["host"]) for r in rows} == {("0", "h1"), ("1", "h3"), ("2", "h5")}
    assert all(int(r["tx_bytes"]) > 0 for r in rows)  # each rank's own interface counted
    assert s["background"][0]["bytes"] > 0
    assert "no flow shared the job's links" in s["fidelity"]["scenario_note"]
    assert s["fidelity"]["verdict"] != "not faithful"
    assert leftovers("star:6") == []
