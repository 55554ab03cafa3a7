"""D-mod-k routing (--routing dmodk): every destination through one path whatever the ports, the controller's rules
and the flow model's router agreeing on it, an all-to-all without collisions, backup paths kept, and bad input
refused in one line."""

from dataclasses import replace

import pytest

from controllers.flow_rules import (IP_PROTO_TCP, IP_PROTO_UDP, compute_rules, dmodk_choice, network_number)
from controllers.paths import follow_packet
from emulation.core.addressing import all_host_configs
from emulation.core.topology import job_view, parse
from emulation.core.topology_types import from_json
from emulation.simulation.routes import Router
from helpers import cli_json, run_dmlbed

PORTS = [None, (40000, 7000), (40002, 7002), (51234, 29500)]


def dmodk(spec):
    return replace(parse(spec), routing="dmodk")


def hops_of(path):
    return list(zip(path, path[1:]))


@pytest.mark.parametrize("spec", ["fattree:4", "fattree:6", "leafspine:4,4,2", "leafspine:3,2,3"])
def test_one_path_per_destination_whatever_the_ports_and_the_router_takes_it(spec):
    topo = dmodk(spec)
    rules, configs, router = compute_rules(topo), all_host_configs(topo), Router(topo, "spread")
    for src in topo.hosts:
        for dst in topo.hosts:
            if src is dst:
                continue
            paths = {tuple(p) for ports in PORTS for proto in (IP_PROTO_TCP, IP_PROTO_UDP)
                     for p in follow_packet(topo, rules, configs, src.name, dst.ip, ports, proto=proto).paths}
            assert len(paths) == 1, (src.name, dst.name, paths)
            assert hops_of(next(iter(paths))) == list(router.path(src.index, dst.index))


def test_fat_tree_reaches_each_destination_through_its_own_core_and_an_all_to_all_meets_no_collision():
    """On fattree:4 every host is reached through one core, host h through core (h's slot, h's edge): 16 hosts over
    4 cores, 4 each; every link of an all-to-all carries at most as many flows as a host's own link (N-1), where
    ECMP's hashed ports put more than that on some link."""
    topo = dmodk("fattree:4")
    rules, configs = compute_rules(topo), all_host_configs(topo)
    cores = {}
    for dst in topo.hosts[4:]:
        path = follow_packet(topo, rules, configs, "h0", dst.ip, (40000, 7000)).paths[0]
        cores.setdefault(path[3], []).append(dst.name)
    assert sorted(len(v) for v in cores.values()) == [3, 3, 3, 3]  # 12 hosts in other pods over 4 cores
    n = len(topo.hosts)
    for routing, router in (("dmodk", Router(topo)), ("ecmp", Router(parse("fattree:4"), "hash"))):
        load = {}
        for s in range(n):
            for d in range(n):
                for hop in (router.path(s, d, key=0) if s != d else ()):
                    load[hop] = load.get(hop, 0) + 1
        assert (max(load.values()) <= n - 1) == (routing == "dmodk"), (routing, max(load.values()))


def test_the_choice_is_the_destinations_digit():
    assert [dmodk_choice(0, 2, h) for h in range(4)] == [0, 1, 0, 1]
    assert [dmodk_choice(1, 2, h) for h in range(8)] == [0, 0, 1, 1, 0, 0, 1, 1]
    topo = parse("fattree:4")
    assert [network_number(h) for h in topo.hosts] == list(range(16))
    view = job_view(replace(topo, routing="dmodk"), ["h5", "h2", "h9"])
    assert [network_number(h) for h in view.hosts] == [5, 2, 9] and view.routing == "dmodk"
    assert from_json(view.to_json()).routing == "dmodk"


def switch_links(topo):
    return [(l.lower, l.upper) for l in topo.links if not topo.is_host(l.lower)]


def test_every_pair_survives_any_one_switch_link_down():
    """Backup (fast-failover) rules before the controller knows, and its recomputed rules after, which avoid the
    link, deliver every pair on fattree:4 with any switch-to-switch link down."""
    topo = dmodk("fattree:4")
    configs = all_host_configs(topo)
    backup = compute_rules(topo, failover=True)
    for link in switch_links(topo):
        rerouted = compute_rules(topo, [link], failover=True)
        for rules in (backup, rerouted):
            for src in topo.hosts:
                for dst in topo.hosts:
                    if src is dst:
                        continue
                    got = follow_packet(topo, rules, configs, src.name, dst.ip, (40000, 7000), [link])
                    assert got.ok, (link, got.problems[:2])
                    if rules is rerouted:
                        assert all(link not in hops_of(p) and link[::-1] not in hops_of(p) for p in got.paths)


def test_the_flow_model_routed_dmodk_meets_the_closed_form_where_ecmp_hashing_collides(tmp_path):
    """MoE's all-to-alls on fattree:4 in the flow model: hashed ECMP paths collide (well above the closed form of a
    non-blocking network), D-mod-k's do not (within 5% of it)."""
    ratio = {}
    for routing in ("ecmp", "dmodk"):
        s = cli_json("simulate", "--topo", "fattree:4", "--algo", "moe", "--model", "moe:16x512", "--ecmp", "hash",
                     "--routing", routing, "--out", str(tmp_path / routing))
        ratio[routing] = s["gst_median_s"] / s["gst_theory_s"]
    assert ratio["ecmp"] > 1.15 and abs(ratio["dmodk"] - 1) < 0.05, ratio


@pytest.mark.parametrize("args,says", [
    (("--topo", "star:8"), "star:8 has no switch with several up ports"),
    (("--topo", "bcube:2,2"), "bcube:2,2 pins each level's traffic"),
    (("--topo", "torus:3,3,1"), "is routed by shortest paths"),
    (("--topo", "fattree:4", "--routing", "dmod"), "--routing"),
])
def test_routing_where_it_has_no_choice_is_refused_in_one_line(args, says):
    extra = () if "--routing" in args else ("--routing", "dmodk")
    r = run_dmlbed("simulate", *args, *extra, "--algo", "ring")
    assert r.returncode == 2 and says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_remote_controller_with_dmodk_is_refused():
    r = run_dmlbed("run", "--topo", "fattree:4", "--algo", "ring", "--routing", "dmodk", "--controller",
                   "remote:127.0.0.1:6653")
    assert r.returncode == 2 and "route their own way" in r.stderr, r.stderr
