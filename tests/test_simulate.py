"""The flow-level simulator: routes as the controller installs them, max-min fair sharing, the engine's rules,
exact closed forms on an ideal network, the CLI and compare's mode: simulate (no root, seconds)."""

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from controllers.flow_rules import compute_rules
from controllers.paths import follow_packet
from emulation.simulation.fairshare import max_min_rates
from emulation.core.tcp import goodput
from emulation.simulation.flows import simulate_plan
from emulation.simulation.routes import Router
from emulation.core.addressing import all_host_configs
from emulation.core.topology import parse, parse_bandwidth
from helpers import ROOT
from workloads.algorithms import get
from workloads.models import tensor_sizes
from workloads.plan import COPY, REDUCE, Plan, PieceLayout, Transfer, piece_sizes

DMLBED = [sys.executable, "-m", "emulation.commands.cli"]


def traced_paths(topo, src, dst, level):
    tr = follow_packet(topo, compute_rules(topo), all_host_configs(topo), topo.hosts[src].name,
               topo.hosts[dst].interface(level).ip)
    assert tr.ok, tr.problems
    return [tuple(zip(p, p[1:])) for p in tr.paths]


@pytest.mark.parametrize("spec", ["bcube:3,2", "bcube:2,3", "fattree:4", "tree:3,2,2", "star:4", "leafspine:4,4,2",
                                  "leafspine:3,2,3"])
def test_hashed_routes_are_paths_the_rules_allow(spec):
    topo = parse(spec)
    router = Router(topo, "hash")
    for src in range(len(topo.hosts)):
        for dst in range(len(topo.hosts)):
            for level in range(len(topo.hosts[dst].interfaces)) if src != dst else ():
                assert router.path(src, dst, level, key=(src, dst)) in traced_paths(topo, src, dst, level)


@pytest.mark.parametrize("spec", ["fattree:4", "fattree:6", "leafspine:4,4,3"])
def test_hashed_routes_are_the_paths_the_rules_give_the_connections_ports(spec):
    """The simulator's ECMP is the controller's: the rules, traced with a connection's ports, give its path."""
    from emulation.simulation.routes import connection_ports
    topo = parse(spec)
    router, rules, configs = Router(topo, "hash"), compute_rules(topo), all_host_configs(topo)
    for src, dst in [(0, len(topo.hosts) - 1), (1, len(topo.hosts) // 2), (2, 3)]:
        for key in range(6):
            tr = follow_packet(topo, rules, configs, topo.hosts[src].name, topo.hosts[dst].ip, connection_ports(src, dst, key))
            assert [router.path(src, dst, 0, key=key)] == [tuple(zip(p, p[1:])) for p in tr.paths]


def test_with_a_link_down_the_flow_model_routes_as_the_controller_reroutes():
    """A switch link down (factor 0): every hashed path is the one the controller's recomputed rules give the
    connection's ports, and no spread path crosses the link."""
    from emulation.simulation.routes import connection_ports
    topo, configs = parse("fattree:4"), None
    configs = all_host_configs(topo)
    for link in [("a0_0", "c0"), ("e1_1", "a1_0"), ("a3_1", "c3")]:
        rules = compute_rules(topo, [link])
        hashed, spread = Router(topo, "hash", link_factors={link: 0.0}), Router(topo, "spread", link_factors={link: 0.0})
        for src in range(16):
            for dst in range(16):
                if src == dst:
                    continue
                tr = follow_packet(topo, rules, configs, topo.hosts[src].name, topo.hosts[dst].ip,
                                   connection_ports(src, dst, None), [link])
                assert [hashed.path(src, dst, 0)] == [tuple(zip(p, p[1:])) for p in tr.paths]
                for hop in spread.path(src, dst):
                    assert not {hop, hop[::-1]} & {link}, (link, spread.path(src, dst))


def test_bcube_paths_with_a_link_down_are_the_rerouted_hosts_paths():
    topo = parse("bcube:3,2")
    rules = compute_rules(topo)
    for link in [("h4", "s1_1"), ("h0", "s0_0"), ("h8", "s1_2")]:
        router, configs = Router(topo, link_factors={link: 0.0}), all_host_configs(topo, [link])
        for src in range(9):
            for dst in range(9):
                for level in (0, 1) if src != dst else ():
                    tr = follow_packet(topo, rules, configs, topo.hosts[src].name,
                                       topo.hosts[dst].interface(level).ip, failed=[link])
                    assert [router.path(src, dst, level)] == [tuple(zip(p, p[1:])) for p in tr.paths]


@pytest.mark.parametrize("spec", ["fattree:4", "tree:3,2,2", "leafspine:4,4,2"])
def test_spread_routes_group_every_equal_cost_path(spec):
    topo = parse(spec)
    router = Router(topo, "spread")
    for src in range(len(topo.hosts)):
        for dst in range(len(topo.hosts)):
            if src == dst:
                continue
            paths = traced_paths(topo, src, dst, 0)
            hops = router.path(src, dst)
            assert len(hops) == len(paths[0])
            for i, hop in enumerate(hops):
                physical = {p[i] for p in paths}
                if len(physical) == 1:
                    assert hop == next(iter(physical))
                else:
                    lower, upper = ({a for a, _ in physical}, {b for _, b in physical})
                    assert hop == ("{" + ",".join(sorted(lower)) + "}", "{" + ",".join(sorted(upper)) + "}")
                    assert router.width[hop] == len({(a, b) for a in lower for b in upper
                                                     if (a, b) in router.level_of})


def test_max_min_rates_known_case_and_properties():
    # f0 crosses L0 and L1, f1 only L0, f2 only L1: L1 (4) is shared by f0 and f2, L0 (10) gives f1 the rest
    rates = max_min_rates(np.array([0, 0, 1, 2]), np.array([0, 1, 0, 1]), np.array([10.0, 4.0]), 3)
    assert rates.tolist() == pytest.approx([2.0, 8.0, 2.0])
    rng = np.random.default_rng(1)
    for _ in range(20):
        flows, links = 30, 8
        pairs = {(f, l) for f in range(flows) for l in rng.choice(links, size=rng.integers(1, 4), replace=False)}
        flow_of = np.array([f for f, _ in sorted(pairs)])
        link_of = np.array([l for _, l in sorted(pairs)])
        cap = rng.uniform(1, 10, links)
        r = max_min_rates(flow_of, link_of, cap, flows)
        load = np.bincount(link_of, weights=r[flow_of], minlength=links)
        assert (load <= cap * (1 + 1e-9)).all()
        for f in range(flows):  # every flow has a full link on which no flow gets more than it
            mine = link_of[flow_of == f]
            assert any(load[l] >= cap[l] * (1 - 1e-9) and r[flow_of[link_of == l]].max() <= r[f] * (1 + 1e-9)
                       for l in mine)


def simulated(spec, bw, algo, servers=0, latency_s=0.0, model="lenet5", ecmp="spread"):
    topo = parse(spec)
    b = parse_bandwidth(bw, topo)
    a = get(algo)
    plan = a.build_plan(topo, servers)
    pieces = [n * 4 for n in piece_sizes(tensor_sizes(model), plan.pieces)]
    result = simulate_plan(plan, pieces, Router(topo, ecmp), {l: v * 1e6 / 8 for l, v in enumerate(b)}, latency_s)
    return result, a.gst_theory(topo, sum(pieces), b, servers), plan


@pytest.mark.parametrize("spec,bw,algo,servers", [
    ("star:9", "100", "ps", 0), ("star:9", "100", "ps", 2), ("star:9", "100", "ring", 0),
    ("star:8", "100", "hd", 0), ("bcube:3,2", "100", "bml", 0), ("bcube:2,3", "100", "bml", 0),
    ("bcube:3,2", "100", "blueconnect", 0), ("bcube:2,3", "100", "ring", 0), ("fattree:4", "100", "hier", 0),
    ("fattree:4", "100", "ps", 0), ("fattree:4", "100", "blueconnect", 0), ("fattree:4", "100", "twolevel", 0),
    ("tree:3,2,2", "200,100,25", "blueconnect", 0), ("tree:3,2,2", "200,100,25", "ring", 0),
    ("tree:3,2,2", "200,100,25", "twolevel", 0), ("tree:2,2", "100,50", "hier", 0),
    # dedicated servers: more servers than workers, and a subtree's uplink as the busiest cut
    ("star:9", "100", "ps", 5), ("tree:3,2", "100,50", "ps", 1), ("fattree:4", "100", "ps", 2),
    ("tree:3,2,2", "200,100,25", "ps", 2)])
def test_ideal_network_gives_the_closed_form(spec, bw, algo, servers):
    result, theory, _ = simulated(spec, bw, algo, servers)
    # pieces split every layer, so they differ by a few bytes: the slowest piece sets the time
    assert result.gst_s == pytest.approx(theory.gst_s, rel=1e-4)


@pytest.mark.parametrize("bw,algo,servers,ecmp", [
    ("100,50", "blueconnect", 0, "spread"), ("100,200", "blueconnect", 0, "spread"), ("100,50", "ps", 1, "spread"),
    ("100,50", "twolevel", 0, "hash"), ("100,50", "ring", 0, "hash"), ("100,200", "ring", 0, "hash"),
    ("100,25", "ring", 0, "hash")])
def test_leaf_spine_closed_forms_hold_each_stream_to_one_spine_link(bw, algo, servers, ecmp):
    """The closed forms put each connection on one spine link (as ECMP does) and balance a leaf's connections over
    its spine links: the flow model agrees where one connection leaves each leaf (hashed, no collision) and where
    many do (spread, the balanced limit); a spread single connection would take every spine link at once."""
    result, theory, _ = simulated("leafspine:4,4,2", bw, algo, servers, ecmp=ecmp)
    assert result.gst_s == pytest.approx(theory.gst_s, rel=1e-4)


def test_a_leaf_spine_ring_is_flat_to_oversubscription_2_and_proportional_beyond():
    """4 hosts a leaf, 2 spines: oversubscription 1, 2, 4, 8 at --bw 100,R with R = 200, 100, 50, 25."""
    gst = [simulated("leafspine:4,4,2", f"100,{r}", "ring", ecmp="hash")[0].gst_s for r in (200, 100, 50, 25)]
    assert gst[1] == pytest.approx(gst[0], rel=1e-4)
    assert gst[2] == pytest.approx(2 * gst[0], rel=1e-4) and gst[3] == pytest.approx(4 * gst[0], rel=1e-4)


@pytest.mark.parametrize("spec,algo", [("star:9", "ps"), ("star:9", "ring"), ("bcube:3,2", "bml"),
                                       ("star:8", "hd")])
def test_terngrad_moves_each_transfer_in_its_packed_width(spec, algo):
    """With TernGrad every transfer carries a partial sum of c gradients in ceil(log2(2c+1)) bits: the
    simulation moves those bytes, and on an ideal network the busiest sender sets the GST as in theory."""
    from workloads.codecs.terngrad import TernGradCompressor
    from workloads.compression import terngrad_wire_fraction
    topo = parse(spec)
    b = parse_bandwidth("100", topo)
    plan = get(algo).build_plan(topo, 0)
    pieces = [n * 4 for n in piece_sizes(tensor_sizes("lenet5"), plan.pieces)]
    rates = {l: v * 1e6 / 8 for l, v in enumerate(b)}
    fp32 = simulate_plan(plan, pieces, Router(topo, "spread"), rates)
    packed = simulate_plan(plan, pieces, Router(topo, "spread"), rates, wire_bits=TernGradCompressor.wire_bits(plan))
    fraction = terngrad_wire_fraction(plan, [p // 4 for p in pieces])
    assert 0.06 < fraction < 0.2
    assert packed.gst_s == pytest.approx(fp32.gst_s * fraction, rel=0.02)
    assert sum(packed.host_tx_bytes.values()) < 0.2 * sum(fp32.host_tx_bytes.values())


def test_parameter_flow_is_its_push_then_its_broadcast():
    """Parameter Flow is two plans in sequence: with a direct broadcast it takes the dedicated-server formula on an
    ideal network; its tree broadcast relieves the server's link, so it is faster, but no worker receives sooner
    than its own link allows."""
    from emulation.simulation.flows import in_sequence
    from workloads.algorithms.pflow import PFlowOptions
    topo = parse("star:9")
    b = parse_bandwidth("100", topo)
    rates = {l: v * 1e6 / 8 for l, v in enumerate(b)}
    sizes = tensor_sizes("mlp:1M")
    algo = get("pflow")

    def gst(tree):
        phases = algo.simulation_phases(topo, sizes, 1, PFlowOptions(pf_dvf="none", pf_tree=tree))
        assert [p.name for p, _ in phases] == ["pflow-push", "pflow-broadcast"]
        return in_sequence([simulate_plan(p, [n * 4 for n in pieces], Router(topo, "spread"), rates)
                            for p, pieces in phases])

    direct, tree = gst("none"), gst("5,3")
    theory = algo.gst_theory(topo, 4 * sum(sizes), b, 1, options={"pf_tree": "none"})
    assert direct.gst_s == pytest.approx(theory.gst_s, rel=1e-3)
    push = theory.gst_s / 2
    assert push + 4 * sum(sizes) / rates[0] <= tree.gst_s < 0.8 * direct.gst_s
    # the tree's theory: the push, then its busiest sender's copies, streamed in blocks (a little pipeline fill)
    tree_theory = algo.gst_theory(topo, 4 * sum(sizes), b, 1, options={"pf_tree": "5,3"}).gst_s
    assert tree_theory <= tree.gst_s < 1.1 * tree_theory
    assert sum(direct.host_tx_bytes.values()) == pytest.approx(2 * 8 * 4 * sum(sizes), rel=1e-6)
    for options in (PFlowOptions(), PFlowOptions(pf_dvf="none", staleness=2)):  # data-dependent, or not BSP
        with pytest.raises(ValueError):
            algo.simulation_phases(topo, sizes, 1, options)


@pytest.mark.parametrize("spec,servers", [("star:9", 1), ("star:9", 3), ("fattree:4", 2)])
def test_ibatch_gst_is_its_push_of_every_layer(spec, servers):
    """iBatch's GST is the push of every layer, split evenly over the servers: on an ideal network its busiest cut,
    as in theory."""
    topo = parse(spec)
    b = parse_bandwidth("100", topo)
    sizes = tensor_sizes("lenet5")
    algo = get("ibatch")
    [(plan, pieces)] = algo.simulation_phases(topo, sizes, servers)
    assert plan.name == "ibatch-push" and sum(pieces) == sum(sizes) and len(pieces) >= len(sizes)
    result = simulate_plan(plan, [n * 4 for n in pieces], Router(topo, "spread"), {l: v * 1e6 / 8 for l, v in enumerate(b)})
    theory = algo.gst_theory(topo, 4 * sum(sizes), b, servers)
    assert result.gst_s == pytest.approx(theory.gst_s, rel=0.01)


def test_cli_simulates_a_codec(tmp_path):
    proc = subprocess.run(DMLBED + ["simulate", "--topo", "star:9", "--algo", "ps", "--codec", "terngrad", "--json",
                                    "--out", str(tmp_path / "t")], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert s["wire_ratio"] == pytest.approx((2 + 5) / 2 / 32, rel=0.01)  # pushes ternary, pulls sums of 8 in 5 bits
    assert s["gst_ratio"] == pytest.approx(1 / goodput(), rel=0.02)


def test_where_the_closed_form_ignores_the_topology_the_simulation_says_so():
    # PS on BCube relays over both NICs (faster than the one-NIC formula); on an oversubscribed tree it is slower
    result, theory, _ = simulated("bcube:3,2", "100", "ps")
    assert result.gst_s == pytest.approx(0.75 * theory.gst_s, rel=1e-4)
    result, theory, _ = simulated("tree:3,2,2", "200,100,25", "ps")
    assert result.gst_s > 3 * theory.gst_s


def test_latency_adds_once_per_dependent_step():
    base, _, plan = simulated("star:4", "100", "ring")
    delayed, _, _ = simulated("star:4", "100", "ring", latency_s=0.01)
    steps = len(plan.streams[0])  # 2(N-1) dependent steps, one message latency each
    assert delayed.gst_s - base.gst_s == pytest.approx(steps * 0.01, rel=1e-6)


def test_hashed_ecmp_collisions_slow_a_fat_tree_and_spread_does_not():
    spread, theory, _ = simulated("fattree:4", "100", "ps", ecmp="spread")
    hashed, _, _ = simulated("fattree:4", "100", "ps", ecmp="hash")
    assert spread.gst_s == pytest.approx(theory.gst_s, rel=1e-4)
    assert hashed.gst_s > spread.gst_s


def test_bytes_and_link_accounting():
    result, _, plan = simulated("bcube:3,2", "100", "bml")
    sent = sum(result.host_tx_bytes.values())
    pieces = [n * 4 for n in piece_sizes(tensor_sizes("lenet5"), plan.pieces)]
    assert sent == pytest.approx(sum(pieces[t.piece] for t in plan.transfers()))
    for hop, b in result.link_bytes.items():  # no link carried more than its rate allows in the time it was busy
        assert b <= 100e6 / 8 * result.link_busy_s[hop] * (1 + 1e-6)


def test_engine_rules_a_later_step_waits_for_the_earlier_one_on_its_link():
    # rank 0 sends piece 0 to 1 (step 0) and piece 1 to 2 (step 1, another stream but the same link):
    # the link order makes them sequential, so the sync takes both transfer times, not the larger
    plan = Plan("t", 3, 2, (((Transfer(0, 1, 0, REDUCE),),), ((), (Transfer(0, 2, 1, COPY),))), (0, 1, 2))
    result = simulate_plan(plan, [1000, 1000], Router(parse("star:3")), {0: 1000.0})
    assert result.gst_s == pytest.approx(2.0)


def test_piece_sizes_match_the_layout_workers_use():
    sizes = tensor_sizes("lenet5")
    for pieces in (1, 7, 18, 64):
        assert piece_sizes(sizes, pieces) == PieceLayout(sizes, pieces).piece_sizes()


def test_cli_simulate_writes_a_run_summary(tmp_path):
    out = tmp_path / "sim"
    proc = subprocess.run(DMLBED + ["simulate", "--topo", "bcube:3,2", "--algo", "bml", "--bw", "100", "--iters",
                                    "5", "--compute-time", "0.2", "--out", str(out), "--json"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout)
    assert s == json.load(open(out / "summary.json"))
    assert s["mode"] == "simulate" and s["completed"] and s["iterations"] == 5
    assert s["gst_ratio"] == pytest.approx(1 / goodput(), rel=1e-3)  # headers are the only gap on this network
    assert s["jct_s"] == pytest.approx(5 * (0.2 + s["gst_median_s"]))
    assert set(s["bytes_by_level"]) == {"L0", "L1"}
    assert all(0.9 < v["mean"] <= 1.0 for v in s["link_utilization"].values())
    rows = list(csv.DictReader(open(out / "links.csv")))
    assert len(rows) == 4 * 9  # 9 hosts x 2 levels, both directions
    again = subprocess.run(DMLBED + ["simulate", "--topo", "star:4", "--algo", "ring", "--out", str(out)],
                           capture_output=True, text=True, cwd=ROOT)
    assert again.returncode == 2 and "--force" in again.stderr


@pytest.mark.parametrize("args,needle", [
    (["--topo", "star:4", "--algo", "gloo"], "plan algorithms"),
    (["--topo", "star:4", "--algo", "ring", "--latency", "-1"], "--latency"),
    (["--topo", "star:4", "--algo", "ring", "--goodput", "0"], "--goodput"),
    (["--topo", "star:4", "--algo", "ring", "--ecmp", "random"], "--ecmp"),
    (["--topo", "star:4", "--algo", "ring", "--ecmp-ports", "/nonexistent"], "--ecmp-ports"),
    (["--topo", "star:4", "--algo", "ring", "--ecmp-ports", "emulated"], "for compare configs"),
    (["--topo", "bcube:3,2", "--algo", "hier"], "valid combinations"),
    (["--topo", "star:9", "--algo", "pflow"], "--pf-dvf none"),
    (["--topo", "star:9", "--algo", "pflow", "--pf-dvf", "none", "--staleness", "1"], "BSP"),
])
def test_cli_simulate_refuses_bad_input_in_one_line(args, needle, tmp_path):
    proc = subprocess.run(DMLBED + ["simulate"] + args + ["--out", str(tmp_path / "x")], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not os.path.exists(tmp_path / "x")


def fake_emulated_run(folder, topology: str, ports) -> None:
    """A run folder as an emulated run leaves it: summary.json and the workers' traces with their TCP ports."""
    os.makedirs(folder / "workers")
    (folder / "summary.json").write_text(json.dumps({"topology": topology}))
    for (rank, peer, stream), pair in ports.items():
        with open(folder / "workers" / f"rank-{rank}.trace.jsonl", "a") as f:
            f.write(json.dumps({"rank": rank, "peer": peer, "stream": stream, "dir": "send", "ports": pair}) + "\n")


def test_ecmp_ports_of_an_emulated_run_give_the_simulation_its_paths(tmp_path):
    """Replaying a run's ports puts every simulated connection on the path the emulated one took."""
    from controllers.flow_rules import ecmp_choice
    from emulation.backends.flow_model import check_emulated_run, emulated_ports
    topo = parse("fattree:4")
    def port_to(choices):
        return next(p for p in range(33000, 34000, 2) if (ecmp_choice(0, 2, p, 7000), ecmp_choice(1, 2, p, 7000)) == choices)
    core0, core3 = port_to((0, 0)), port_to((1, 1))
    fake_emulated_run(tmp_path / "run", "fattree:4", {(0, 15, 0): [core0, 7000], (1, 14, 0): [core3, 7000]})
    ports = emulated_ports(str(tmp_path / "run"), 16)
    router = Router(topo, "hash", ports)
    assert router.path(0, 15, 0, key=0)[2] == ("a0_0", "c0") and router.path(1, 14, 0, key=0)[2] == ("a0_1", "c3")
    with pytest.raises(ValueError, match="emulated fattree:4, this simulation is of star:4"):
        check_emulated_run(str(tmp_path / "run"), "star:4")
    with pytest.raises(ValueError, match="no summary.json"):
        check_emulated_run(str(tmp_path / "nothing"), "fattree:4")


def test_compare_simulates_with_the_ports_of_the_emulated_row_of_its_label(tmp_path):
    from emulation.backends.matrix import ConfigError, expand
    data = {"sweep": {"mode": ["emulate", "simulate"]},
            "runs": [{"label": "x", "topo": "fattree:4", "algo": "ps", "ecmp": "hash", "ecmp_ports": "emulated"}]}
    entries = expand(data, str(tmp_path))
    assert entries[1]["config"].ecmp_ports == entries[0]["config"].out
    assert entries[1]["job"].cfg.ecmp_ports == entries[0]["job"].cfg.out  # what the checked job will run
    with pytest.raises(ConfigError, match="needs an emulated run with the label 'x'"):
        expand({"runs": [{"label": "x", "topo": "fattree:4", "algo": "ps", "mode": "simulate",
                          "ecmp_ports": "emulated"}]}, str(tmp_path))


def test_compare_mixes_simulated_rows_without_root(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("name: s\ndefaults: {mode: simulate, bw: 100, iters: 3}\nruns:\n"
                   "  - {label: ps, topo: 'bcube:3,2', algo: ps}\n  - {label: bml, topo: 'bcube:3,2', algo: bml}\n")
    proc = subprocess.run(DMLBED + ["compare", str(cfg), "--out", str(tmp_path / "out"), "--json"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader(open(tmp_path / "out" / "comparison.csv")))
    assert [r["mode"] for r in rows] == ["simulate", "simulate"]
    bml, ps = (float(r["gst_median_s"]) for r in sorted(rows, key=lambda r: r["label"]))
    assert bml / ps == pytest.approx(0.5 / 0.75, rel=1e-3)  # BML 1/k of the one-NIC bound; PS relays over 2 NICs


def test_hierarchical_plan_builds_fast_at_scale():
    import time
    t = time.time()
    plan = get("bml").build_plan(parse("bcube:16,2"))
    assert time.time() - t < 10
    # per thread, 256 ranks x 15 peers per step: 16 pieces, then 1 (aggregation); 1, then 16 (broadcast)
    assert len(plan.transfers()) == 2 * 256 * 15 * (16 + 1 + 1 + 16)


def test_chunks_go_on_before_their_whole_message_arrives():
    # rank 0 sends a 2-chunk piece to 1, which forwards it to 2 on its own link: whole messages take two
    # transfer times; chunks pipeline (chunk 0 is forwarded while chunk 1 arrives): 1.5 transfer times
    plan = Plan("t", 3, 1, (((Transfer(0, 1, 0, COPY),), (Transfer(1, 2, 0, COPY),)),), (0, 1, 2))
    router, rate = Router(parse("star:3")), {0: 1000.0}
    assert simulate_plan(plan, [2000], router, rate).gst_s == pytest.approx(4.0)
    assert simulate_plan(plan, [2000], router, rate, chunk_bytes=1000).gst_s == pytest.approx(3.0)
    # small pieces are joined into one unit up to a chunk: 4 pieces of 250 bytes move as one 1000-byte unit
    plan4 = Plan("t", 3, 4, (tuple(tuple(Transfer(a, b, p, COPY) for p in range(4)) for a, b in ((0, 1), (1, 2))),),
                 (0, 1, 2))
    joined = simulate_plan(plan4, [250] * 4, router, rate, chunk_bytes=1000)
    assert joined.messages == 2 and joined.gst_s == pytest.approx(2.0)


def test_chunk_granularity_finds_blueconnects_overlap_of_levels_on_bcube():
    # BlueConnect's stages on BCube use different NICs: the engine forwards each chunk to the next stage as
    # soon as it is reduced, so the levels overlap and the sync beats the sequential closed form (eq. 9)
    from workloads.engine import CHUNK_BYTES
    topo = parse("bcube:3,2")
    plan = get("blueconnect").build_plan(topo, 0)
    pieces = [n * 4 for n in piece_sizes(tensor_sizes("lenet5"), plan.pieces)]
    rates = {0: 100e6 / 8, 1: 100e6 / 8}
    whole = simulate_plan(plan, pieces, Router(topo), rates)
    chunked = simulate_plan(plan, pieces, Router(topo), rates, chunk_bytes=CHUNK_BYTES)
    assert chunked.gst_s < 0.9 * whole.gst_s
    assert sum(chunked.host_tx_bytes.values()) == pytest.approx(sum(whole.host_tx_bytes.values()))


@pytest.mark.parametrize("spec,servers,model", [("star:9", 0, "lenet5"), ("star:9", 3, "lenet5"),
                                                ("star:5", 0, "resnet50"), ("star:9", 2, "vgg19")])
def test_whole_tensor_parameter_server_in_whole_messages_is_its_closed_form(spec, servers, model):
    """The busiest host link of whole tensors placed round-robin, a push then a pull, is what the flow model finds
    when messages move whole; in 256 KiB chunks a server's pull overlaps its push, at most twice as fast."""
    topo, options, layers = parse(spec), {"ps_placement": "tensor"}, tensor_sizes(model)
    a, b = get("ps"), parse_bandwidth("100", topo)
    plan = a.build_plan(topo, servers, options=options, layer_sizes=layers)
    pieces = [n * 4 for n in plan.piece_sizes(layers)]
    rates = {l: v * 1e6 / 8 for l, v in enumerate(b)}
    theory = a.gst_theory(topo, sum(pieces), b, servers, options=options, layer_sizes=layers)
    assert simulate_plan(plan, pieces, Router(topo, "spread"), rates, 0.0).gst_s == pytest.approx(theory.gst_s, rel=1e-4)
    from workloads.engine import CHUNK_BYTES
    chunked = simulate_plan(plan, pieces, Router(topo, "spread"), rates, 0.0, chunk_bytes=CHUNK_BYTES).gst_s
    assert 0.5 * theory.gst_s <= chunked <= theory.gst_s * 1.0001
    assert theory.gst_s > a.gst_theory(topo, sum(pieces), b, servers).gst_s  # one server holds more than its share


@pytest.mark.parametrize("spec,servers,placement,model", [("star:5", 1, "even", "mlp:2MB"),
                                                          ("star:9", 3, "even", "mlp:2MB"),
                                                          ("star:9", 2, "tensor", "vgg19"),
                                                          ("tree:3,2,2", 2, "even", "mlp:2MB")])
def test_a_parameter_server_behind_its_barrier_takes_its_push_then_pull_closed_form(spec, servers, placement, model):
    """In 256 KiB chunks a streaming server's pulls overlap later pushes (faster than push-then-pull where a
    server's link is the cut); behind the server barrier the flow model gives the closed form, a push then a pull."""
    from workloads.engine import CHUNK_BYTES
    topo, layers, a = parse(spec), tensor_sizes(model), get("ps")
    b = parse_bandwidth("100", topo)
    rates = {l: v * 1e6 / 8 for l, v in enumerate(b)}
    times = {}
    for barrier in ("none", "server"):
        options = {"ps_placement": placement, "ps_barrier": barrier}
        plan = a.build_plan(topo, servers, options=options, layer_sizes=layers)
        pieces = [n * 4 for n in plan.piece_sizes(layers)]
        times[barrier] = simulate_plan(plan, pieces, Router(topo, "spread"), rates, 0.0,
                                       chunk_bytes=CHUNK_BYTES).gst_s
    theory = a.gst_theory(topo, sum(pieces), b, servers, options=options, layer_sizes=layers).gst_s
    assert times["server"] == pytest.approx(theory, rel=0.03)
    assert times["none"] < 0.8 * times["server"]


@pytest.mark.parametrize("spec,ecmp", [("bcube:3,2", "spread"), ("bcube:4,3", "spread"), ("bcube:2,3", "hash"),
                                       ("fattree:4", "spread"), ("fattree:4", "hash"), ("tree:3,2,2", "spread"),
                                       ("leafspine:4,4,2", "spread"), ("star:5", "spread"), ("torus:3,3", "hash"),
                                       ("rail:4,2,1", "hash")])
def test_many_paths_at_once_are_each_transfers_path(spec, ecmp):
    """Router.paths (what the flow model uses) gives every transfer the path Router.path gives it alone: every pair,
    every destination level, two stream keys."""
    topo = parse(spec)
    router = Router(topo, ecmp)
    rows = [(a, b, level, key) for a in range(len(topo.hosts)) for b in range(len(topo.hosts)) if a != b
            for level in range(len(topo.hosts[b].interfaces) if topo.kind == "bcube" else 1) for key in (0, 1)]
    src, dst, level, key = (np.array(c, dtype=np.int64) for c in zip(*rows))
    lengths, flat, hops = router.paths(src, dst, level, key)
    starts = np.cumsum(lengths) - lengths
    got = [tuple(hops[x] for x in flat[s:s + n]) for s, n in zip(starts, lengths)]
    assert got == [router.path(a, b, level, key=k) for a, b, level, k in rows]
    assert sorted(set(flat.tolist())) == list(range(len(hops)))  # every link listed is crossed
