"""Background traffic (--background): parsing, schedules, max-min shares, the flow model, theory, fidelity and the
host-side sender and receiver."""

import json
import os
import socket
import statistics
import subprocess
import sys
import time

import pytest

from emulation.core.background import (BULK, ONOFF, RATE, BackgroundFlow, job_share, parse_background, parse_flow,
                                       schedule)
from emulation.core.topology import TopologyError, parse
from workloads.traffic_endpoint import CHUNK
from helpers import ROOT, cli_json, run_dmlbed


def test_flows_parse_with_their_kinds():
    assert parse_flow("h0-h1") == BackgroundFlow("h0", "h1", BULK)
    assert parse_flow("h2 - h3:rate:20") == BackgroundFlow("h2", "h3", RATE, rate_mbps=20.0)
    assert parse_flow("h0-h3:rate:1Gbit").rate_mbps == 1000.0
    f = parse_flow("h1-h0:onoff:0.5,1.5,30")
    assert (f.kind, f.on_s, f.off_s, f.rate_mbps, f.on_fraction) == (ONOFF, 0.5, 1.5, 30.0, 0.25)
    assert f.shown() == "h1-h0:onoff:0.5,1.5,30" and parse_flow(f.shown()) == f


@pytest.mark.parametrize("items,match", [
    (["h0>h1"], r"is not SRC-DST\[:KIND\]"),
    (["h0-h0"], r"two different hosts"),
    (["h0-h9"], r"h9 is not a host of star:4 \(valid: h0..h3\)"),
    (["h0-h1:fast"], r"kind 'fast' is unknown: valid are bulk, rate, onoff"),
    (["h0-h1:rate"], r"rate needs MBPS"),
    (["h0-h1:rate:0.5"], r"rate '0.5' is not in \[2, 1000\] Mbit/s"),
    (["h0-h1:onoff:1"], r"onoff takes ON,OFF"),
    (["h0-h1:onoff:-1,1"], r"mean on time '-1' is not a number in \(0, 3600\]"),
    (["h0-h1:onoff:1,nan"], r"mean off time 'nan'"),
    (["h0-h1:onoff:1,inf"], r"mean off time 'inf'"),
    (["h0-h1:bulk:3"], r"bulk takes no arguments"),
    (["h0-h1", "h0-h1:rate:5"], r"names h0-h1 twice"),
])
def test_bad_flows_get_one_line_naming_what_is_valid(items, match):
    with pytest.raises(TopologyError, match=match):
        parse_background(items, parse("star:4"))


def test_bad_flows_exit_2_before_anything_starts():
    r = run_dmlbed("simulate", "--topo", "star:4", "--algo", "ring", "--background", "h0-h7")
    assert r.returncode == 2 and "h7 is not a host of star:4" in r.stderr and r.stderr.count("\n") == 1
    r = run_dmlbed("run", "--topo", "star:4", "--algo", "ring", "--local", "--background", "h0-h1")
    assert r.returncode == 2 and "needs an emulated network" in r.stderr
    r = run_dmlbed("simulate", "--topo", "star:4", "--algo", "ring", "--background", "h0-h1", "--share-hosts",
                   "--overlap")
    assert r.returncode == 2 and "without --overlap" in r.stderr


def test_on_off_schedules_are_seeded_and_hold_their_means():
    f = parse_flow("h0-h1:onoff:0.2,0.6")
    a, b = schedule(f, 0, 7, 2000.0), schedule(f, 0, 7, 2000.0)
    assert a == b and a != schedule(f, 1, 7, 2000.0) and a != schedule(f, 0, 8, 2000.0)
    assert a[0][0] == 0.0 and all(x < y for x, y in a) and all(y <= x for (_, y), (x, _) in zip(a, a[1:]))
    on = statistics.mean(y - x for x, y in a[:-1])
    gaps = statistics.mean(x - y for (_, y), (x, _) in zip(a, a[1:]))
    assert on == pytest.approx(0.2, rel=0.1) and gaps == pytest.approx(0.6, rel=0.1)
    assert schedule(parse_flow("h0-h1"), 0, 7, 5.0) == [(0.0, 5.0)]


@pytest.mark.parametrize("capacity,job,bulk,caps,expected", [
    (100, 1, 1, [], 50), (100, 1, 0, [20], 80), (100, 1, 0, [80], 50), (100, 1, 0.5, [], 100 / 1.5),
    (100, 1, 0, [10, 20, 90], 35), (100, 2, 1, [], 100 / 3), (100, 1, 0, [], 100),
])
def test_a_job_flow_gets_its_max_min_share(capacity, job, bulk, caps, expected):
    assert job_share(capacity, job, bulk, caps) == pytest.approx(expected)


def test_the_flow_model_shares_links_with_background_flows():
    from emulation.simulation.flows import Persistent, simulate_plan
    from emulation.simulation.routes import Router
    from workloads.algorithms.ring import ring
    topo, plan = parse("star:4"), ring(4)
    router, rates, pieces = Router(topo), {0: 100e6 / 8}, [1_000_000] * 4
    alone = simulate_plan(plan, pieces, router, rates)
    bulk = simulate_plan(plan, pieces, router, rates, background=[Persistent(router.path(0, 1))])
    capped = simulate_plan(plan, pieces, router, rates, background=[Persistent(router.path(0, 1), cap=20e6 / 8)])
    half = simulate_plan(plan, pieces, router, rates,
                         background=[Persistent(router.path(0, 1), intervals=((0.0, alone.gst_s),))])
    late = simulate_plan(plan, pieces, router, rates, start_s=10.0,
                         background=[Persistent(router.path(0, 1), intervals=((0.0, 5.0),))])
    assert bulk.gst_s / alone.gst_s == pytest.approx(2.0)
    assert capped.gst_s / alone.gst_s == pytest.approx(1.25)  # 80 of 100 Mbit/s left
    assert half.gst_s / alone.gst_s == pytest.approx(1.5)  # half the ring at half rate, then the rest at full
    assert late.gst_s == pytest.approx(alone.gst_s)  # its on period ended before this synchronization
    assert bulk.background_bytes[0] == pytest.approx(bulk.gst_s * 50e6 / 8)
    assert set(bulk.link_bytes) == set(alone.link_bytes)  # the plan's links only


def test_simulate_and_theory_agree_on_the_share_a_ring_keeps(tmp_path):
    common = ["--topo", "star:4", "--algo", "ring", "--model", "mlp:4MB", "--share-hosts"]
    alone = cli_json("theory", *common)
    for flow, factor in (("h0-h1", 2.0), ("h2-h3:rate:20", 1.25)):
        theory = cli_json("theory", *common, "--background", flow)
        sim = cli_json("simulate", *common, "--background", flow, "--out", str(tmp_path / flow), "--force")
        assert theory["gst_theory_s"] / alone["gst_theory_s"] == pytest.approx(factor)
        assert sim["gst_median_s"] / theory["gst_theory_s"] == pytest.approx(1.0, abs=0.05)
        assert "fair share beside the background flows" in theory["gst_formula"]
        assert sim["background"][0]["flow"] == flow.split(":")[0]


def test_on_off_flows_are_the_mean_over_their_states(tmp_path):
    common = ["--topo", "star:4", "--algo", "ring", "--model", "mlp:2MB", "--share-hosts", "--background", "h0-h1:onoff:5,5",
              "--compute-time", "0.2", "--iters", "300"]
    theory = cli_json("theory", *common)
    sim = cli_json("simulate", *common, "--out", str(tmp_path / "s"))
    alone = cli_json("theory", *common[:6])["gst_theory_s"]
    g_on, g_off, c = 2 * alone, alone, 0.2
    w_on, w_off = 0.5 / (c + g_on), 0.5 / (c + g_off)
    assert theory["gst_theory_s"] == pytest.approx((w_on * g_on + w_off * g_off) / (w_on + w_off))
    assert sim["iteration_mean_s"] == pytest.approx(theory["iteration_mean_s"], rel=0.06)
    again = cli_json("simulate", *common, "--out", str(tmp_path / "s2"))
    assert again["iteration_mean_s"] == sim["iteration_mean_s"]  # seeded: the same on/off periods


def test_fidelity_judges_a_shared_link_by_the_job_and_the_flows_together():
    from emulation.results.links import iteration_links, merged, moved
    assert moved([(0.0, 0), (1.0, 100), (2.0, 300)], 0.5, 1.5) == pytest.approx(150)
    assert merged([(0, 1), (0.5, 2), (3, 4)]) == [(0, 2), (3, 4)]
    topo, mb = parse("star:2"), 1_000_000
    traces = [{"iteration": 0, "dir": "send", "rank": 0, "peer": 1, "level": 0, "stream": 0, "step": 0,
               "start": 0.0, "end": 0.16, "wire_bytes": mb, "ports": None},
              {"iteration": 0, "dir": "recv", "rank": 1, "peer": 0, "level": 0, "stream": 0, "step": 0,
               "start": 0.0, "end": 0.16, "wire_bytes": mb, "ports": None}]
    rows = {0: [{"tx_bytes": {"h0-eth0": mb}}], 1: [{}]}
    alone = {l["link"]: l for l in iteration_links(topo, rows, traces, 0, (100.0,))}
    assert alone["h0>s0"]["need_s"] / alone["h0>s0"]["busy_s"] == pytest.approx(0.5)  # half the rate: slow
    flow = (frozenset({("h0", "s0"), ("s0", "h1")}), [(0.0, 0), (0.16, mb)])  # a flow took the other half
    shared = {l["link"]: l for l in iteration_links(topo, rows, traces, 0, (100.0,), foreign=[flow])}
    assert shared["h0>s0"]["need_s"] / shared["h0>s0"]["busy_s"] == pytest.approx(1.0)
    assert shared["h0>s0"]["foreign_bytes"] == pytest.approx(mb)


def test_a_shared_nic_is_one_class_per_kind_of_traffic_sharing_its_rate():
    from emulation.core.shaping import shared_nic_commands, shared_nic_rate_commands
    cmds = shared_nic_commands("h0-eth0", 100, 1000, [5301, 5302])
    classes = [c for c in cmds if " class add " in c]
    assert classes[0].endswith("classid 5:100 htb rate 100Mbit burst 15k")
    assert [c.split("classid ")[1].split()[0] for c in classes[1:]] == ["5:1", "5:2", "5:3"]
    assert all("rate 33.3333Mbit ceil 100Mbit" in c for c in classes[1:])  # an equal share each, borrowing the rest
    assert sum("match ip dport 5301 0xffff flowid 5:2" in c for c in cmds) == 1
    assert "htb default 1" in cmds[1] and len([c for c in cmds if "pfifo limit 1000" in c]) == 3
    assert all("rate 25Mbit ceil 50Mbit" in c for c in shared_nic_rate_commands("h0-eth0", 50, 2)[1:])


def test_the_host_side_sender_paces_and_the_receiver_counts(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=ROOT)
    recv = subprocess.Popen([sys.executable, "-m", "workloads.traffic_endpoint", "recv", "--port", str(port), "--log",
                             str(tmp_path / "r.jsonl")], env=env)
    send = subprocess.Popen([sys.executable, "-m", "workloads.traffic_endpoint", "send", "--dst", "127.0.0.1", "--port",
                             str(port), "--log", str(tmp_path / "s.jsonl"), "--rate-mbps", "40"], env=env)
    time.sleep(2.5)
    send.terminate()
    send.wait(10)
    recv.wait(10)
    sent = [json.loads(l) for l in open(tmp_path / "s.jsonl")]
    got = [json.loads(l) for l in open(tmp_path / "r.jsonl")]
    assert sent[0]["port"] and sent[-1]["end"]
    # the receiver counts what arrived: the sender's count give or take one chunk when SIGTERM stops it mid-stream
    # (seen in CI both ways: one chunk less on 2026-11-28, one more on 2026-12-08, the chunk the kernel had taken
    # before the sender counted it)
    assert abs(got[-1]["bytes"] - sent[-1]["bytes"]) <= CHUNK, (sent[-1], got[-1])
    mbps = (sent[-1]["bytes"] - sent[1]["bytes"]) * 8 / (sent[-1]["t"] - sent[1]["t"]) / 1e6
    assert 30 < mbps < 45  # paced to 40 Mbit/s on loopback, which is far faster


@pytest.mark.emulation
def test_an_emulated_bulk_flow_takes_its_share_and_the_verdict_names_it(tmp_path):
    from test_emulation import leftovers
    s = cli_json("run", "--topo", "star:4", "--algo", "ring", "--model", "mlp:2MB", "--iters", "8", "--batch", "4",
                 "--background", "h0-h1", "--share-hosts", "--out", str(tmp_path / "run"), timeout=600)
    assert s["correct"] is True
    flow = s["background"][0]
    # measured, and h0's NIC split between the job and the flow: about half of it each (the benchmark's figure)
    assert flow["flow"] == "h0-h1" and flow["bytes"] > 0 and flow["nic_split_with_job"] is True
    assert 25 < flow["mbps_in_window"] <= 75, flow
    assert "traffic beside the job: h0-h1 shared the job's links" in s["fidelity"]["scenario_note"]
    assert os.path.getsize(tmp_path / "run" / "background.csv") > 0
    assert leftovers("star:4") == []
