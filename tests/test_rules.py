"""Pure controller tests: every host pair has a loop-free rule path; BCube traffic stays on its level;
the Ryu app builds correct OpenFlow 1.3 messages (fake datapath, real ofproto_parser)."""

import json
import os
import random
import subprocess
import sys

import pytest

from controllers.flow_rules import (IP_PROTO_TCP, IP_PROTO_UDP, OFPP_CONTROLLER, compute_rules, ecmp_choice,
                                    ecmp_width)
from controllers.paths import follow_packet
from emulation.core.addressing import all_host_configs, bcube_next_hop, bcube_path
from emulation.core.topology import parse
from helpers import ROOT

SPECS = ["bcube:2,1", "bcube:2,2", "bcube:3,2", "bcube:2,3", "bcube:4,2", "bcube:3,3", "fattree:4",
         "fattree:6", "star:2", "star:9", "tree:3,2,2", "tree:2,2,2,2", "tree:1,4", "tree:9", "leafspine:4,4,2",
         "leafspine:3,2,3", "leafspine:2,3,1", "leafspine:1,4,2"]


@pytest.mark.parametrize("spec", SPECS)
def test_every_host_pair_has_loop_free_paths(spec):
    topo = parse(spec)
    rules, configs = compute_rules(topo), all_host_configs(topo)
    for src in topo.hosts:
        for dst in topo.hosts:
            if dst.name == src.name:
                continue
            for intf in dst.interfaces:
                result = follow_packet(topo, rules, configs, src.name, intf.ip)
                assert result.ok, result.problems
                for path in result.paths:
                    assert path[0] == src.name and path[-1] == dst.name
                    assert len(path) == len(set(path))


def test_fat_tree_uses_every_core_between_pods():
    topo = parse("fattree:4")
    result = follow_packet(topo, compute_rules(topo), all_host_configs(topo), "h0", topo.hosts[-1].ip)
    cores = {p[3] for p in result.paths}
    assert cores == {"c0", "c1", "c2", "c3"}
    assert all(len(p) == 7 for p in result.paths)  # host-edge-agg-core-agg-edge-host


@pytest.mark.parametrize("spec", ["fattree:4", "fattree:6", "fattree:8"])
def test_fat_tree_tcp_ports_pick_one_path_and_spread_over_every_core(spec):
    """A TCP segment's ports decide every ECMP choice (one path), the choice is ecmp_choice's, and random ports
    use every core path about equally often."""
    topo = parse(spec)
    k = topo.params[0]
    rules, configs = compute_rules(topo), all_host_configs(topo)
    src, dst = topo.hosts[0], topo.hosts[-1]
    rng = random.Random(7)
    seen = {}
    draws = 40 * (k // 2) ** 2
    for _ in range(draws):
        ports = (rng.randrange(32768, 61000), rng.randrange(1024, 65536))
        paths = follow_packet(topo, rules, configs, src.name, dst.ip, ports).paths
        assert len(paths) == 1 and paths[0][0] == src.name and paths[0][-1] == dst.name
        agg, core = paths[0][2], paths[0][3]
        assert int(agg.split("_")[1]) == ecmp_choice(0, k // 2, *ports)
        assert int(core[1:]) % (k // 2) == ecmp_choice(1, k // 2, *ports)
        seen[core] = seen.get(core, 0) + 1
    assert len(seen) == (k // 2) ** 2  # every core
    mean = draws / len(seen)
    assert max(seen.values()) < 1.8 * mean and min(seen.values()) > 0.4 * mean


def test_ecmp_is_symmetric_in_the_ports_and_its_width_fits_the_ports():
    """A connection's ACKs (ports swapped) hash like its data; every up port is reachable."""
    assert [ecmp_width(n) for n in (2, 3, 4, 8, 16, 32)] == [1, 3, 2, 3, 4, 4]
    for n in (2, 3, 4, 8):
        assert {ecmp_choice(lvl, n, s, 40000) for s in range(32768, 33768) for lvl in (0, 1)} == set(range(n))
        assert all(ecmp_choice(1, n, s, d) == ecmp_choice(1, n, d, s) for s, d in [(33000, 5000), (40002, 41234)])


def test_non_tcp_and_portless_packets_still_spread_over_every_path():
    """ICMP (no ports) falls to the select group: every path is a possible branch."""
    topo = parse("fattree:4")
    result = follow_packet(topo, compute_rules(topo), all_host_configs(topo), "h0", topo.hosts[-1].ip)
    assert len(result.paths) == 4 and result.ok


def test_tree_path_is_unique_shortest():
    topo = parse("tree:3,2,2")
    result = follow_packet(topo, compute_rules(topo), all_host_configs(topo), "h0", "10.0.0.12")
    assert result.paths == [["h0", "t0_0", "t1_0", "t2_0", "t1_1", "t0_3", "h11"]]
    same_switch = follow_packet(topo, compute_rules(topo), all_host_configs(topo), "h0", "10.0.0.2")
    assert same_switch.paths == [["h0", "t0_0", "h1"]]


@pytest.mark.parametrize("spec", ["bcube:3,2", "bcube:2,3", "bcube:4,3"])
def test_bcube_switch_rules_only_carry_their_level(spec):
    topo = parse(spec)
    rules = compute_rules(topo)
    for sw in topo.switches:
        flows, groups = rules.for_dpid(sw.dpid)
        assert not groups
        attached = {topo.node(l.lower).interface(sw.level).mac: l.upper_port for l in topo.links_of(sw.name)}
        data = [f for f in flows if f.out_port != OFPP_CONTROLLER]
        assert {f.fields()["eth_dst"]: f.out_port for f in data} == attached
        assert [f for f in flows if f.out_port == OFPP_CONTROLLER][0].priority == 0


@pytest.mark.parametrize("spec", ["bcube:3,2", "bcube:2,3", "bcube:3,3"])
def test_bcube_neighbour_traffic_leaves_by_that_level(spec):
    topo = parse(spec)
    rules, configs = compute_rules(topo), all_host_configs(topo)
    for src in topo.hosts:
        for dst in topo.hosts:
            differing = [l for l in range(topo.levels) if src.coords[l] != dst.coords[l]]
            if len(differing) != 1:
                continue
            level = differing[0]
            for intf in dst.interfaces:
                (path,) = follow_packet(topo, rules, configs, src.name, intf.ip).paths
                assert len(path) == 3
                assert topo.node(path[1]).level == level


def test_bcube_relay_path_is_digit_correcting():
    topo = parse("bcube:3,2")
    h0, h8 = topo.hosts[0], topo.hosts[8]
    hops = bcube_path(topo, h0, h8, 0)
    assert [(level, h.name) for level, h in hops] == [(1, "h6"), (0, "h8")]
    for level, _ in hops:
        assert level in (0, 1)


@pytest.mark.parametrize("spec", ["bcube:2,1", "bcube:3,2", "bcube:4,3", "bcube:2,4", "bcube:5,2"])
def test_bcube_whole_path_is_the_next_hop_walk(spec):
    topo = parse(spec)
    for src in topo.hosts:
        for dst in topo.hosts:
            for level in range(topo.params[1]):
                walk, here = [], src
                while here.name != dst.name:
                    hop, here = bcube_next_hop(topo, here, dst, level)
                    walk.append((hop, here))
                assert bcube_path(topo, src, dst, level) == walk


def switch_links(topo):
    return [(l.lower, l.upper) for l in topo.links if not topo.is_host(l.lower)]


@pytest.mark.parametrize("link", switch_links(parse("fattree:4")), ids="-".join)
def test_every_host_pair_survives_any_one_switch_link_down(link):
    """fattree:4 with any switch-to-switch link down: every host pair is delivered, with TCP and UDP ports of
    each ECMP choice and without ports, through the backup (fast-failover) rules before the controller knows, and
    through the rules it recomputes after, which no longer send anything to the link."""
    topo = parse("fattree:4")
    configs = all_host_configs(topo)
    backup, rerouted = compute_rules(topo, failover=True), compute_rules(topo, [link], failover=True)
    for rules in (backup, rerouted):
        for src in topo.hosts:
            for dst in topo.hosts:
                if src is dst:
                    continue
                for ports in [None, (40000, 7000), (40002, 7002), (40032, 7000)]:
                    for proto in (IP_PROTO_TCP, IP_PROTO_UDP):
                        got = follow_packet(topo, rules, configs, src.name, dst.ip, ports, [link], proto)
                        assert got.ok, got.problems[:2]
                        if rules is rerouted:
                            assert all(link not in zip(p, p[1:]) and link[::-1] not in zip(p, p[1:])
                                       for p in got.paths)


@pytest.mark.parametrize("spec", ["bcube:3,2", "bcube:2,3"])
def test_bcube_hosts_route_every_pair_around_any_one_link_down(spec):
    """BCube with any link down: every host reaches every address of every other host (an address on the host's
    dead NIC through one of its others) through the relays' rerouted routes; the old routes lose some."""
    topo = parse(spec)
    rules, plain = compute_rules(topo), all_host_configs(topo)
    lost_before = 0
    for link in [(l.lower, l.upper) for l in topo.links]:
        configs = all_host_configs(topo, [link])
        for src in topo.hosts:
            for dst in topo.hosts:
                for intf in dst.interfaces if src is not dst else ():
                    got = follow_packet(topo, rules, configs, src.name, intf.ip, failed=[link])
                    assert got.ok, (link, got.problems[:1])
                    lost_before += not follow_packet(topo, rules, plain, src.name, intf.ip, failed=[link]).ok
    assert lost_before > 0


def test_without_backup_rules_a_link_down_loses_the_paths_across_it():
    """The tracer is not lenient: the plain rules with a link down lose every connection hashed across it."""
    topo = parse("fattree:4")
    rules, configs = compute_rules(topo), all_host_configs(topo)
    lost = [s.name for s in topo.hosts for d in topo.hosts if s is not d and
            not follow_packet(topo, rules, configs, s.name, d.ip, (40000, 7000), [("a0_0", "c0")]).ok]
    assert lost and all(s in {h.name for h in topo.hosts} for s in lost)


def test_a_tree_has_no_backup_paths():
    topo = parse("tree:2,2,2")
    assert compute_rules(topo, failover=True) == compute_rules(topo)


# --- Ryu message building, as Ryu's own tests do: a fake datapath with the real parser ---

ryu = pytest.importorskip("ryu.ofproto.ofproto_v1_3_parser")


class FakeDatapath:
    """Collects sent messages; has Ryu's real OpenFlow 1.3 protocol modules."""

    def __init__(self, dpid):
        from ryu.ofproto import ofproto_v1_3, ofproto_v1_3_parser
        self.id = dpid
        self.ofproto = ofproto_v1_3
        self.ofproto_parser = ofproto_v1_3_parser
        self.sent = []

    def send_msg(self, msg):
        msg.serialize()  # fails loudly on a malformed message
        self.sent.append(msg)


def load_app_module():
    import eventlet.wsgi
    if not hasattr(eventlet.wsgi, "ALREADY_HANDLED"):
        eventlet.wsgi.ALREADY_HANDLED = object()
    from controllers import app
    return app


def test_install_sends_groups_flows_and_barrier_for_fat_tree_edge():
    app = load_app_module()
    topo = parse("fattree:4")
    rules = compute_rules(topo)
    edge = topo.node("e0_0")
    dp = FakeDatapath(edge.dpid)
    count = app.install(dp, rules)
    kinds = [type(m).__name__ for m in dp.sent]
    assert kinds[0] == "OFPFlowMod" and dp.sent[0].command == dp.ofproto.OFPFC_DELETE
    assert kinds[1] == "OFPGroupMod" and dp.sent[1].command == dp.ofproto.OFPGC_DELETE
    assert kinds[-1] == "OFPBarrierRequest"
    group_adds = [m for m in dp.sent[2:] if type(m).__name__ == "OFPGroupMod"]
    assert len(group_adds) == 1 and group_adds[0].type == dp.ofproto.OFPGT_SELECT
    assert [b.actions[0].port for b in group_adds[0].buckets] == [3, 4]
    flow_adds = [m for m in dp.sent[1:] if type(m).__name__ == "OFPFlowMod"]
    assert len(flow_adds) == count == len(rules.for_dpid(edge.dpid)[0])
    ecmp = [m for m in flow_adds if m.match.get("tcp_src") is not None]
    assert len(ecmp) == 4 and {m.instructions[0].actions[0].port for m in ecmp} == {3, 4}
    assert all(m.match["tcp_src"][1] == m.match["tcp_dst"][1] == 0b10 for m in ecmp)  # bit 1: the edge's tier
    host_rule = next(m for m in flow_adds if m.match.get("ipv4_dst") == "10.0.0.1")
    assert host_rule.instructions[0].actions[0].port == 1
    miss = next(m for m in flow_adds if m.priority == 0)
    assert miss.instructions[0].actions[0].port == dp.ofproto.OFPP_CONTROLLER


def test_fast_failover_groups_and_a_reroute_make_before_break():
    """The core's detour group sends back out of the in port; a reroute around a0_0-c0 first adds a1_0's rules
    that avoid c0 for pod 0, and only then removes c0's rules towards pod 0."""
    app = load_app_module()
    topo = parse("fattree:4")
    backup, rerouted = compute_rules(topo, failover=True), compute_rules(topo, [("a0_0", "c0")], failover=True)
    core = FakeDatapath(topo.node("c0").dpid)
    app.install(core, backup)
    ff = [m for m in core.sent if type(m).__name__ == "OFPGroupMod" and m.type == core.ofproto.OFPGT_FF]
    back = [m for m in ff if m.buckets[-1].actions[0].port == core.ofproto.OFPP_IN_PORT]
    assert back and all(m.buckets[0].watch_port == m.buckets[0].actions[0].port for m in back)
    add, gone = app.changes(core, backup, rerouted)
    assert not [m for m in add if type(m).__name__ == "OFPFlowMod"]
    assert {m.match["ipv4_dst"] for m in gone if type(m).__name__ == "OFPFlowMod"} >= {h.ip for h in topo.hosts[:4]}
    agg = FakeDatapath(topo.node("a1_0").dpid)
    add, gone = app.changes(agg, backup, rerouted)
    avoid = {m.match["ipv4_dst"]: m.instructions[0].actions[0].port for m in add if type(m).__name__ == "OFPFlowMod"}
    assert avoid == {h.ip: 4 for h in topo.hosts[:4]} and not gone  # pod 0 through c1 only
    for m in add:
        m.serialize()


def test_bcube_flow_mod_matches_destination_mac():
    app = load_app_module()
    topo = parse("bcube:3,2")
    sw = topo.node("s1_0")
    dp = FakeDatapath(sw.dpid)
    app.install(dp, compute_rules(topo))
    macs = {m.match.get("eth_dst"): m.instructions[0].actions[0].port
            for m in dp.sent if type(m).__name__ == "OFPFlowMod" and m.priority == 100}
    assert macs == {"02:00:01:00:00:01": 1, "02:00:01:00:00:04": 2, "02:00:01:00:00:07": 3}


OSKEN_VENV = os.environ.get("DMLBED_OSKEN_VENV") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "dmlbed", "os-ken-4.2.2-py3.12")
OSKEN_PYTHON = os.path.join(OSKEN_VENV, "bin", "python")


def flowmod_bytes(python, specs):
    r = subprocess.run([python, os.path.join(ROOT, "tests", "flowmod_bytes.py"), *specs], capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


@pytest.mark.skipif(not os.path.exists(OSKEN_PYTHON), reason="no Python 3.12 with os-ken (make setup installs it "
                                                               "where a python3.12 exists)")
def test_the_app_sends_the_same_flow_mods_under_os_ken_on_python_3_12():
    """Ryu 4.34 cannot run on Python 3.12; os-ken, its maintained fork, can: dmlbed's app sends every switch of
    bcube:3,2 and fattree:4 the same OpenFlow messages under both, byte for byte."""
    specs = ["bcube:3,2", "fattree:4"]
    ryu, osken = flowmod_bytes(sys.executable, specs), flowmod_bytes(OSKEN_PYTHON, specs)
    assert ryu["library"] == "ryu" and osken["library"] == "os_ken" and osken["python"].startswith("3.12")
    assert len(ryu["messages"]) == sum(len(parse(s).switches) for s in specs) and all(len(m) > 3 for m in ryu["messages"].values())
    assert osken["messages"] == ryu["messages"]
