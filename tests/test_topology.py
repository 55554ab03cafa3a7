"""Pure topology tests: counts, unique identities, serialization, bad input."""

import ipaddress
import itertools

import pytest

from emulation.core.topology import (MAX_BW_MBPS, TopologyError, bcube, fat_tree, from_json, parse,
                                parse_bandwidth, star, tree)

SPECS = ["bcube:2,1", "bcube:2,3", "bcube:3,2", "bcube:4,2", "bcube:4,3", "bcube:5,2", "bcube:3,4",
         "fattree:4", "fattree:6", "fattree:8", "star:2", "star:9", "tree:3,2,2", "tree:9", "tree:2,2,2,2",
         "tree:1,4"]


@pytest.mark.parametrize("n,k", [(n, k) for n in range(2, 7) for k in range(1, 5) if n ** k <= 1296])
def test_bcube_counts(n, k):
    t = bcube(n, k)
    assert len(t.hosts) == n ** k
    assert len(t.switches) == k * n ** (k - 1)
    assert len(t.links) == k * n ** k
    assert all(len(h.interfaces) == k for h in t.hosts)
    # every switch has exactly n ports and sits on one level
    for sw in t.switches:
        links = t.links_of(sw.name)
        assert sorted(l.upper_port for l in links) == list(range(1, n + 1))
        assert {l.level for l in links} == {sw.level}


@pytest.mark.parametrize("n,k", [(2, 2), (3, 2), (2, 3), (4, 3)])
def test_bcube_level_switch_joins_hosts_differing_in_that_digit(n, k):
    t = bcube(n, k)
    for sw in t.switches:
        members = [t.node(l.lower) for l in t.links_of(sw.name)]
        for a, b in itertools.combinations(members, 2):
            differing = [l for l in range(k) if a.coords[l] != b.coords[l]]
            assert differing == [sw.level]
        # each host's level-l interface is the one wired to the level-l switch
        for l in t.links_of(sw.name):
            assert t.node(l.lower).interfaces[l.lower_port].level == sw.level


@pytest.mark.parametrize("k", [4, 6, 8, 10])
def test_fat_tree_counts(k):
    t = fat_tree(k)
    assert len(t.hosts) == k ** 3 // 4
    assert len(t.switches) == 5 * k * k // 4
    roles = [s.role for s in t.switches]
    assert roles.count("core") == k * k // 4
    assert roles.count("edge") == roles.count("aggregation") == k * k // 2
    for sw in t.switches:  # every switch uses all k ports (cores: one per pod)
        assert len(t.links_of(sw.name)) == k


def test_tree_counts_blueconnect_hierarchy():
    t = tree((3, 2, 2))
    assert len(t.hosts) == 12
    assert [sum(1 for s in t.switches if s.level == l) for l in range(3)] == [4, 2, 1]
    assert t.levels == 3


def test_star():
    t = star(9)
    assert len(t.hosts) == 9 and len(t.switches) == 1 and t.levels == 1


@pytest.mark.parametrize("spec", SPECS)
def test_identities_unique_and_valid(spec):
    t = parse(spec)
    names = [h.name for h in t.hosts] + [s.name for s in t.switches]
    assert len(names) == len(set(names))
    dpids = [s.dpid for s in t.switches]
    assert len(set(dpids)) == len(dpids) and all(0 < d < 2 ** 64 for d in dpids)
    intfs = [i for h in t.hosts for i in h.interfaces]
    assert len({i.ip for i in intfs}) == len(intfs)
    assert len({i.mac for i in intfs}) == len(intfs)
    assert all(len(i.name) <= 15 for i in intfs)  # Linux IFNAMSIZ
    assert all(len(f"{s.name}-eth{t.switch_ports()}") <= 15 for s in t.switches)
    for i in intfs:
        assert ipaddress.ip_address(i.ip) in ipaddress.ip_network(f"10.{i.level}.0.0/16")
        assert int(i.mac.split(":")[0], 16) & 0b10  # locally administered
    # ports unique per node
    seen = set()
    for l in t.links:
        for end in ((l.lower, l.lower_port), (l.upper, l.upper_port)):
            assert end not in seen
            seen.add(end)


@pytest.mark.parametrize("spec", SPECS)
def test_json_round_trip(spec):
    t = parse(spec)
    assert from_json(t.to_json()) == t
    assert from_json(t.to_json()).spec == spec


def test_switch_count_beside_fat_tree():
    t = parse("bcube:3,2")  # BML paper section 3.1: k*N/n = 6 vs 5N/n = 15
    assert len(t.switches) == 6
    assert t.fat_tree_switches_for_same_hosts() == 15


@pytest.mark.parametrize("spec,fragment", [
    ("bcube:1,2", "n (switch ports) must be >= 2"),
    ("bcube:3,0", "k (levels) must be >= 1"),
    ("bcube:3", "needs 2 parameter"),
    ("fattree:5", "even and >= 4"),
    ("fattree:2", "even and >= 4"),
    ("star:1", "N (hosts) must be >= 2"),
    ("tree:", "fanouts are empty"),
    ("tree:3,0", "every fanout must be >= 1"),
    ("tree:1", "product must be >= 2"),
    ("ring:4", "unknown topology 'ring'"),
    ("bcube:a,2", "non-integer"),
    ("bcube:20,4", "at most"),
])
def test_bad_topology_specs(spec, fragment):
    with pytest.raises(TopologyError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        parse(spec)


def test_bandwidth_per_level():
    t = parse("tree:3,2,2")
    assert parse_bandwidth("1000,100,200", t) == (1000.0, 100.0, 200.0)
    assert parse_bandwidth("100", t) == (100.0, 100.0, 100.0)
    assert parse_bandwidth("100", parse("bcube:3,2")) == (100.0, 100.0)


@pytest.mark.parametrize("text,fragment", [("0", "out of range"), ("-5", "out of range"),
                                           ("1e-7", "the shaper honours rates from 2 Mbit/s"),
                                           ("100,1,100", "out of range"),
                                           (str(MAX_BW_MBPS + 1), "out of range"), ("fast", "not a number"),
                                           ("100,200", "needs 1 or 3")])
def test_bad_bandwidth(text, fragment):
    with pytest.raises(TopologyError, match=fragment):
        parse_bandwidth(text, parse("tree:3,2,2"))


@pytest.mark.parametrize("text,mbps", [("1Gbit", 1000.0), ("100Mbit", 100.0), ("5000kbit", 5.0), ("10 mbit", 10.0),
                                       ("2e1", 20.0), ("2000000bit", 2.0)])
def test_bandwidth_takes_units_as_tc_writes_them(text, mbps):
    assert parse_bandwidth(text, parse("star:4")) == (mbps,)


@pytest.mark.parametrize("text", ["100Mbps", "1Tbit", "inf", "nan", "1 G bit"])
def test_a_unit_tc_does_not_write_is_refused_naming_the_valid_ones(text):
    with pytest.raises(TopologyError, match="bit, kbit, mbit, gbit"):
        parse_bandwidth(text, parse("star:4"))  # Mbps is ambiguous: tc reads it as megabytes per second
