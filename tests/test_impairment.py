"""Link delay and loss (netem): parsing, the tc commands at every shaped end, the flow model's link delay, the
refusal where the kernel lacks netem, and (where it has it) a real delayed network."""

import json
import shutil

import pytest

from emulation.net.nodes import QuietTCIntf
from emulation.net.kernel_probes import netem_available
from emulation.net.topos import SpecTopo
from emulation.run import validation as options
from emulation.run.options import OptionError, RunConfig
from emulation.run.validation import validate
from emulation.simulation.flows import simulate_plan
from emulation.simulation.routes import Router
from emulation.core.impairment import Impairment, parse_impairment
from emulation.core.shaping import ingress_netem_commands
from emulation.core.topology import TopologyError, parse
from helpers import run_dmlbed
from workloads.algorithms import get
from workloads.plan import piece_sizes


def test_delay_and_loss_parse_per_level_like_bandwidth():
    topo = parse("bcube:3,2")
    imp = parse_impairment("0.5,2", "0.1", topo)
    assert imp.delay_ms == (0.5, 2.0) and imp.loss_pct == (0.1, 0.1) and imp.active
    assert imp.netem(0) == "delay 0.5ms loss 0.1%" and imp.netem(1) == "delay 2ms loss 0.1%"
    assert imp.link_delay_s() == {0: 0.0005, 1: 0.002}
    none = parse_impairment("0", "0", topo)
    assert not none.active and none.netem(0) is None


@pytest.mark.parametrize("delay,loss,message", [
    ("x", "0", "--delay 'x' is not a number"), ("1,2,3", "0", "needs 1 or 2"), ("-1", "0", "out of range"),
    ("0", "101", "--loss 101 % is out of range")])
def test_bad_delay_or_loss_names_what_is_valid(delay, loss, message):
    with pytest.raises(TopologyError, match=message):
        parse_impairment(delay, loss, parse("bcube:3,2"))


def test_netem_replaces_the_fifo_leaf_under_htb_with_the_same_buffer():
    intf = QuietTCIntf.__new__(QuietTCIntf)
    intf.leaf_packets, intf.netem = 100, "delay 2ms loss 1%"
    cmds, parent = intf.bwCmds(bw=50)
    assert cmds[-1] == "%s qdisc add dev %s parent 5:1 handle 10: netem delay 2ms loss 1% limit 100"
    assert any("htb rate 50.000000Mbit" in c for c in cmds) and parent.strip() == "parent 10:"
    intf.netem = None
    assert QuietTCIntf.bwCmds(intf, bw=50)[0][-1].endswith("pfifo limit 100")


def test_switch_to_host_direction_gets_netem_at_the_host_ingress():
    alone = ingress_netem_commands("h0-eth0", "ifb0", 50, "delay 1ms")
    assert "tc qdisc add dev ifb0 root handle 10: netem delay 1ms limit 50" in alone
    assert any("mirred egress redirect dev ifb0" in c for c in alone)


def test_every_shaped_end_of_a_level_carries_its_own_netem():
    spec = parse("bcube:2,2")
    topo = SpecTopo(spec=spec, bw=(100, 100), shaper_boxes=False, host_queue=1000, switch_queue=100,
                    impairment=Impairment((1.0, 3.0), (0.0, 0.0)))
    seen = {}
    for _, _, info in topo.links(withInfo=True):
        for params in (info["params1"], info["params2"]):
            seen.setdefault(params.get("netem"), 0)
            seen[params.get("netem")] += 1
    assert set(seen) == {"delay 1ms", "delay 3ms"} and seen["delay 1ms"] == seen["delay 3ms"] == 8
    plain = SpecTopo(spec=spec, bw=(100, 100), impairment=Impairment((0.0, 0.0), (0.0, 0.0)))
    assert all("netem" not in info["params1"] for _, _, info in plain.links(withInfo=True))


def test_link_delay_adds_every_link_of_every_dependent_step():
    topo = parse("star:4")
    plan = get("ring").build_plan(topo, 0)
    pieces = [4 * n for n in piece_sizes([100000], plan.pieces)]
    rates = {0: 100e6 / 8}
    base = simulate_plan(plan, pieces, Router(topo), rates)
    delayed = simulate_plan(plan, pieces, Router(topo), rates, link_delay_s={0: 0.002})
    steps = len(plan.streams[0])  # each step's message crosses host->switch->host: two links
    assert delayed.gst_s - base.gst_s == pytest.approx(steps * 2 * 0.002, rel=1e-6)


def test_emulated_delay_is_refused_in_one_line_where_the_kernel_lacks_netem(monkeypatch):
    monkeypatch.setattr(options, "netem_available", lambda: False)
    monkeypatch.setattr(options.os, "geteuid", lambda: 0)
    cfg = RunConfig(topology="star:4", algo="ring", delay="2")
    with pytest.raises(OptionError, match=r"need the kernel's netem qdisc \(sch_netem\).*simulate --delay"):
        validate(cfg)
    monkeypatch.setattr(options, "netem_available", lambda: True)
    assert validate(cfg).impairment.delay_ms == (2.0,)
    with pytest.raises(OptionError, match="--local has none"):
        validate(RunConfig(topology="star:4", algo="ring", delay="2", local=True))
    assert validate(RunConfig(topology="star:4", algo="ring", delay="2"), emulated=False).impairment.active


def test_theory_and_simulate_add_the_delay_as_latency(tmp_path):
    r = run_dmlbed("theory", "--topo", "bcube:3,2", "--algo", "bml", "--model", "mlp:400KB", "--delay", "1",
                   "--json")
    out = json.loads(r.stdout)
    assert out["gst_theory_delay_s"] > out["gst_theory_s"] and out["delay_ms"] == [1.0, 1.0]
    r = run_dmlbed("simulate", "--topo", "bcube:3,2", "--algo", "bml", "--model", "mlp:400KB", "--delay", "1",
                   "--out", str(tmp_path), "--json")
    sim = json.loads(r.stdout)
    # BML: 4 dependent steps, each host->switch->host at one level: 8 ms on top of the undelayed model
    assert sim["gst_median_s"] == pytest.approx(out["gst_theory_delay_s"], rel=1e-6)
    assert sim["model_settings"]["link_delay_ms"] == [1.0, 1.0]


@pytest.mark.emulation
@pytest.mark.skipif(not shutil.which("tc") or not netem_available(),
                    reason="the kernel has no netem qdisc (sch_netem): --delay/--loss are refused here")
def test_a_delayed_network_shows_its_delay_on_real_packets():
    r = run_dmlbed("net", "star:2", "--bw", "50", "--delay", "5", "--check", "--json", check=False)
    report = json.loads(r.stdout)
    assert r.returncode == 0 and report["impairment"]["delay_ms"] == [5.0]
    assert report["pairs_reachable"] == report["pairs_tested"]


def test_delay_and_loss_take_units_as_mininet_users_write_them():
    imp = parse_impairment("5ms,200us", "1%", parse("bcube:3,2"))
    assert imp.delay_ms == (5.0, 0.2) and imp.loss_pct == (1.0, 1.0)
    assert parse_impairment("1s", "0", parse("star:4")).delay_ms == (1000.0,)
    with pytest.raises(TopologyError, match="us, usec, ms, msec, s, sec"):
        parse_impairment("5m", "0", parse("star:4"))
