"""Placing a topology on several machines (pure): servers parsed, groups kept whole, hosts balanced."""

import math

import pytest

from emulation.net.checks import Flow, fidelity_flows, mark_tunnels
from emulation.core.placement import PlacementError, crossing_links, groups_below_top, parse_servers, place
from emulation.core.topology import parse


def test_servers_parse_with_this_machine_first():
    assert parse_servers("127.0.0.1") == ["localhost", "127.0.0.1"]
    assert parse_servers("node2, 10.0.0.3") == ["localhost", "node2", "10.0.0.3"]


@pytest.mark.parametrize("text,message", [("", "give SERVER"), ("a,,b", "give SERVER"), ("a,a", "twice"),
                                          ("localhost", "other than localhost"), ("bad host", "invalid"),
                                          ("-oProxyCommand=x", "invalid")])
def test_bad_servers_are_refused(text, message):
    with pytest.raises(PlacementError, match=message):
        parse_servers(text)


@pytest.mark.parametrize("spec,group_hosts", [("fattree:4", 4), ("bcube:4,2", 4), ("bcube:3,2", 3),
                                              ("tree:3,2,2", 6), ("star:4", 1)])
def test_groups_are_pods_subcubes_and_subtrees(spec, group_hosts):
    topo = parse(spec)
    hosts = {h.name for h in topo.hosts}
    groups = groups_below_top(topo)
    assert sorted(n for g in groups for n in g if n in hosts) == sorted(hosts)
    assert {sum(n in hosts for n in g) for g in groups} == {group_hosts}


@pytest.mark.parametrize("spec", ["star:4", "star:9", "bcube:3,2", "bcube:4,2", "bcube:2,3", "fattree:4",
                                  "tree:3,2,2"])
@pytest.mark.parametrize("servers", [["localhost", "b"], ["localhost", "b", "c"]])
def test_every_node_is_placed_and_hosts_are_balanced(spec, servers):
    topo = parse(spec)
    placement = place(topo, servers)
    assert set(placement) == {h.name for h in topo.hosts} | {s.name for s in topo.switches}
    assert set(placement.values()) <= set(servers)
    per_server = [sum(placement[h.name] == s for h in topo.hosts) for s in servers]
    assert max(per_server) <= math.ceil(len(topo.hosts) / len(servers))
    assert min(per_server) > 0  # every machine takes part


@pytest.mark.parametrize("spec", ["fattree:4", "bcube:4,2"])
def test_groups_that_fit_stay_on_one_machine(spec):
    topo = parse(spec)
    placement = place(topo, ["localhost", "b"])
    for group in groups_below_top(topo):
        assert len({placement[n] for n in group}) == 1, group
    # only links to the top level cross machines
    top = max(s.level for s in topo.switches)
    for i in crossing_links(topo, placement):
        assert topo.node(topo.links[i].upper).level == top


def test_a_star_splits_its_hosts_and_keeps_the_switch_on_the_first_machine():
    topo = parse("star:4")
    placement = place(topo, ["localhost", "127.0.0.1"])
    assert placement[topo.switches[0].name] == "localhost"
    assert sorted(placement[h.name] for h in topo.hosts) == ["127.0.0.1"] * 2 + ["localhost"] * 2
    assert len(crossing_links(topo, placement)) == 2


def test_fidelity_flows_carry_their_path_and_tunnel_flows_are_marked():
    topo = parse("star:4")
    placement = place(topo, ["localhost", "127.0.0.1"])
    flows = fidelity_flows(topo, (50.0,))
    assert all(f.path[0] == f.src and f.path[-1] == f.dst and len(f.path) == 3 for f in flows)
    rows = [dict(src=f.src, dst=f.dst, path=f.path, fidelity=0.9 + 0.01 * i) for i, f in enumerate(flows)]
    summary = mark_tunnels(rows, placement)
    crossing = [r for r in rows if placement[r["src"]] != placement[r["dst"]]
                or placement[r["src"]] != placement[topo.switches[0].name]]
    assert summary["tunnel_flows"] == len(crossing) == sum(r["tunnel"] for r in rows) > 0
    assert summary["tunnel_fidelity_min"] == min(r["fidelity"] for r in crossing)
    assert mark_tunnels(rows, {}) == {}
    assert isinstance(flows[0], Flow)
