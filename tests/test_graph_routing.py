"""Routing for any graph of switches (torus, Jellyfish, such a file): shortest paths, ECMP by the connection's
ports, loop-free, rerouted around a link down; the flow model takes the paths the rules give."""

import random

import pytest

from controllers.flow_rules import compute_rules, shortest_next_hops
from controllers.paths import follow_packet
from emulation.core.addressing import all_host_configs
from emulation.core.topology import TopologyError, parse
from emulation.core.topology_file import read_topology, write_topology
from emulation.simulation.routes import Router, connection_ports
from helpers import cli_json

GRAPHS = ["torus:4,4", "torus:3,5,2", "jellyfish:8,3,2", "jellyfish:12,4,1,7", "jellyfish:10,3,1,3"]


def switch_hops(path):
    return len(path) - 3  # host, switches..., host: the switch-to-switch hops


@pytest.mark.parametrize("spec", GRAPHS)
def test_every_host_pair_takes_one_shortest_loop_free_path_per_connection(spec):
    topo = parse(spec)
    rules, configs = compute_rules(topo), all_host_configs(topo)
    hops = shortest_next_hops(topo)
    edge = {l.lower: l.upper for l in topo.links if topo.is_host(l.lower)}
    for a in topo.hosts:
        for b in topo.hosts:
            if a.name == b.name:
                continue
            result = follow_packet(topo, rules, configs, a.name, b.ip, (40000 + 2 * a.index, 7000))
            assert result.ok and len(result.paths) == 1, (a.name, b.name, result.problems)
            path = result.paths[0]
            assert len(path) == len(set(path)) and path[0] == a.name and path[-1] == b.name
            assert switch_hops(path) == hops[edge[b.name]][edge[a.name]][0]  # shortest


def test_connections_spread_over_every_equal_cost_path_of_a_torus():
    """Switches (0,0) and (2,2) of a 4x4 torus are 4 hops apart: either way round in each dimension (2 x 2), the
    dimensions in any order (6), 24 shortest paths: random ports use them all."""
    topo = parse("torus:4,4")
    rules, configs = compute_rules(topo), all_host_configs(topo)
    rng = random.Random(3)
    seen = {tuple(follow_packet(topo, rules, configs, "h0", topo.hosts[10].ip,
                                (rng.randrange(32768, 61000), 7000)).paths[0]) for _ in range(600)}
    assert len(seen) == 24 and all(switch_hops(p) == 4 for p in seen)


@pytest.mark.parametrize("spec", GRAPHS)
def test_the_flow_model_takes_the_path_the_rules_give_each_connections_ports(spec):
    topo = parse(spec)
    router, rules, configs = Router(topo, "spread"), compute_rules(topo), all_host_configs(topo)
    assert router.ecmp == "hash"  # equal-cost paths through a graph do not fall into layers to spread over
    for src in range(len(topo.hosts)):
        for dst in range(len(topo.hosts)):
            if src != dst:
                traced = follow_packet(topo, rules, configs, topo.hosts[src].name, topo.hosts[dst].ip,
                                       connection_ports(src, dst, 0)).paths
                assert [router.path(src, dst, 0, key=0)] == [tuple(zip(p, p[1:])) for p in traced]


def test_a_link_down_is_routed_around_by_the_rules_and_the_flow_model():
    topo = parse("torus:4,4")
    down = [("r0c0", "r0c1")]
    rules, configs = compute_rules(topo, failed=down), all_host_configs(topo)
    router = Router(topo, "hash", link_factors={down[0]: 0.0})
    for b in topo.hosts[1:]:
        traced = follow_packet(topo, rules, configs, "h0", b.ip, connection_ports(0, b.index, 0), failed=down)
        assert traced.ok, traced.problems
        path = tuple(zip(traced.paths[0], traced.paths[0][1:]))
        assert ("r0c0", "r0c1") not in path and router.path(0, b.index, 0, key=0) == path


def test_generators_refuse_what_they_cannot_build_in_one_line():
    for spec, needle in [("torus:2,4", "rows and columns must be >= 3"), ("jellyfish:5,3,1", "even"),
                         ("jellyfish:4,4,1", "degree 2..switches-1"), ("torus:4", "needs 2 or 3 parameter")]:
        with pytest.raises(TopologyError, match=needle):
            parse(spec)


def test_a_jellyfish_is_a_connected_regular_graph_drawn_by_its_seed():
    a, b, c = parse("jellyfish:16,4,1,1"), parse("jellyfish:16,4,1,1"), parse("jellyfish:16,4,1,2")
    assert a.links == b.links and a.links != c.links
    degree = {}
    for l in a.links:
        if not a.is_host(l.lower):
            degree[l.lower] = degree.get(l.lower, 0) + 1
            degree[l.upper] = degree.get(l.upper, 0) + 1
    assert set(degree.values()) == {4} and len(degree) == 16


@pytest.mark.parametrize("spec", ["torus:4,4", "jellyfish:8,3,2"])
def test_a_graph_exports_and_reads_back_as_the_same_network(spec, tmp_path):
    topo = parse(spec)
    back = read_topology(write_topology(topo, str(tmp_path / "g.yaml")))
    assert back.graph and back.links == topo.links


@pytest.mark.parametrize("spec", ["rail:8,2,1", "rail:6,3", "rail:4,4,2"])
def test_every_nic_of_a_rail_topology_is_reached_over_its_own_rail(spec):
    """Rail-optimized: NIC r of every host on rail switch r; a packet to a host's level-r address leaves by the
    sender's NIC r and crosses rail r alone (one switch hop), the spines carry nothing; the flow model agrees."""
    topo = parse(spec)
    hosts, rails, spines = topo.params
    assert len(topo.hosts) == hosts and all(len(h.interfaces) == rails for h in topo.hosts)
    assert len(topo.switches) == rails + spines and len(topo.links) == hosts * rails + rails * spines
    rules, configs = compute_rules(topo), all_host_configs(topo)
    router = Router(topo)
    for a in topo.hosts:
        for b in topo.hosts:
            if a.name == b.name:
                continue
            for intf in b.interfaces:
                result = follow_packet(topo, rules, configs, a.name, intf.ip, (40000 + 2 * a.index, 7000))
                assert result.ok and result.paths == [[a.name, f"rail{intf.level}", b.name]], result.problems
            assert router.path(a.index, b.index, 0, key=0) == ((a.name, "rail0"), ("rail0", b.name))


def test_a_rail_topology_refuses_what_it_cannot_build_in_one_line():
    for spec, needle in [("rail:1,2", "hosts >= 2"), ("rail:4,0", r"rails \(NICs per host\) >= 1"),
                         ("rail:4,9", "at most 8 NICs"), ("rail:4", "needs 2 or 3 parameter")]:
        with pytest.raises(TopologyError, match=needle):
            parse(spec)


def test_theory_and_simulation_of_a_ring_on_a_torus():
    """A ring snaking through a 4x4 torus (row 0 left to right, row 1 right to left, ...) has one switch hop per
    connection, each on its own links: the flow model gives the closed form. Row by row, a row's last host reaches
    the next row's first over two hops, and ECMP can put two such connections on one link: the closed form is then
    a bound the flow model does not beat."""
    common = ["--topo", "torus:4,4", "--algo", "ring", "--model", "mlp:2MB", "--bw", "100", "--iters", "3"]
    snake = ["--hosts", "h0..h3,h7,h6,h5,h4,h8..h11,h15,h14,h13,h12"]
    theory, sim = cli_json("theory", *common, *snake), cli_json("simulate", *common, *snake)
    assert sim["gst_median_s"] == pytest.approx(theory["gst_theory_s"], rel=0.03)
    rows = cli_json("simulate", *common)
    assert rows["gst_median_s"] >= 0.99 * theory["gst_theory_s"]


@pytest.mark.emulation
@pytest.mark.parametrize("spec", [  # the torus (42 s) and Jellyfish (24 s) run in make benchmark, beside configs/bench/shapes.yaml
    pytest.param("torus:3,3", marks=pytest.mark.benchmark), pytest.param("jellyfish:6,3,1,2", marks=pytest.mark.benchmark),
    "rail:4,2,1"])
def test_a_graph_comes_up_every_pair_reachable_and_a_ring_on_it_is_correct(spec, tmp_path):
    from test_emulation import leftovers
    net = cli_json("net", spec, "--bw", "20", "--check", "--duration", "2", "--out", str(tmp_path / "n"), timeout=600)
    hosts = len(parse(spec).hosts)
    assert net["pairs_reachable"] == net["pairs_tested"] == hosts * (hosts - 1) and net["packet_in"] == 0
    s = cli_json("run", "--topo", spec, "--algo", "ring", "--model", "mlp:1MB", "--bw", "20", "--iters", "4",
                 "--batch", "4", "--out", str(tmp_path / "r"), timeout=600)
    assert s["correct"] is True and s["iterations"] == 4
    assert leftovers(spec) == []


@pytest.mark.parametrize("spec", ["torus:4,4", "jellyfish:8,3,2", "fattree:4"])
def test_the_checks_flows_are_traced_from_their_own_ports_and_expect_the_share_they_meet(spec):
    """net --check: each flow sends from a port of its own, its path is the one the rules give that connection
    (where equal-cost paths exist, which one it takes), and it expects the fair share of the busiest link on it."""
    from emulation.net.checks import IPERF_BASE_PORT, fidelity_flows
    topo = parse(spec)
    flows = fidelity_flows(topo, (20.0,) * (max(l.level for l in topo.links) + 1))
    rules, configs = compute_rules(topo), all_host_configs(topo)
    assert len({f.client_port for f in flows}) == len(flows)
    load = {}
    for i, f in enumerate(flows):
        traced = follow_packet(topo, rules, configs, f.src, f.dst_ip, (f.client_port, IPERF_BASE_PORT + i)).paths
        assert [tuple(p) for p in traced] == [f.path]
        for hop in zip(f.path, f.path[1:]):
            load[hop] = load.get(hop, 0) + 1
    for f in flows:
        assert f.shaped_mbps == pytest.approx(min(20.0 / load[hop] for hop in zip(f.path, f.path[1:])), abs=1e-3)
