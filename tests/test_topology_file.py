"""Topologies from files and generators: leaf-spine, export and read back, and every bad file refused in one line."""

import json

import pytest

from controllers.flow_rules import compute_rules
from controllers.paths import follow_packet
from emulation.core.addressing import all_host_configs
from emulation.core.topology import TopologyError, parse
from emulation.core.topology_file import read_topology, write_topology
from helpers import cli_json, run_dmlbed


def every_pair_traced(topo):
    rules, configs = compute_rules(topo, failover=True), all_host_configs(topo)
    for a in topo.hosts:
        for b in topo.hosts:
            if a.name != b.name:
                result = follow_packet(topo, rules, configs, a.name, b.ip, (40000 + 2 * b.index, 7000))
                assert result.ok and len(result.paths) == 1, (a.name, b.name, result.problems)


def test_a_leaf_spine_has_its_leaves_spines_and_oversubscription():
    topo = parse("leafspine:4,4,2")
    assert (len(topo.hosts), len(topo.switches), len(topo.links), topo.levels) == (16, 6, 24, 2)
    assert [s.role for s in topo.switches].count("spine") == 2 and topo.radices() == [4, 4]
    assert all(sum(1 for l in topo.links if l.lower == leaf.name) == 2 for leaf in topo.switches[:4])
    assert topo.oversubscription((100, 200)) == 1 and topo.oversubscription((100, 50)) == 4
    with pytest.raises(TopologyError, match="must each be >= 1"):
        parse("leafspine:4,0,2")
    with pytest.raises(TopologyError, match="needs 3 parameter"):
        parse("leafspine:4,4")


@pytest.mark.parametrize("spec", ["leafspine:4,4,2", "fattree:4", "tree:3,2,2", "star:5", "leafspine:3,2,3"])
@pytest.mark.parametrize("suffix", ["json", "yaml"])
def test_an_exported_topology_reads_back_as_the_same_network(spec, suffix, tmp_path):
    topo = parse(spec)
    path = write_topology(topo, str(tmp_path / f"t.{suffix}"))
    back = parse(path)
    assert back.kind == "file" and back.spec == path
    assert back.links == topo.links
    assert [(s.name, s.dpid, s.level) for s in back.switches] == [(s.name, s.dpid, s.level) for s in topo.switches]
    assert [h.interfaces for h in back.hosts] == [h.interfaces for h in topo.hosts]
    every_pair_traced(back)


def test_a_hand_written_three_level_file_routes_every_pair(tmp_path):
    """Two pods of two racks under two spines each, three cores: ECMP up, one way down."""
    links = [[f"h{i}", f"r{i // 2}"] for i in range(8)]
    links += [[f"r{r}", f"p{r // 2}_{s}"] for r in range(4) for s in range(2)]
    links += [[f"p{p}_{s}", f"c{c}"] for p in range(2) for s in range(2) for c in range(3) if (s + c) % 2 == 0]
    switches = [{"name": f"r{r}", "level": 0} for r in range(4)]
    switches += [{"name": f"p{p}_{s}", "level": 1} for p in range(2) for s in range(2)]
    switches += [{"name": f"c{c}", "level": 2} for c in range(3)]
    path = tmp_path / "pods.json"
    path.write_text(json.dumps({"hosts": 8, "switches": switches, "links": links}))
    every_pair_traced(read_topology(str(path)))


GRAPHS = {  # files up/down routing cannot serve, routed by shortest paths
    "ring of three": {"hosts": 3, "switches": [{"name": f"s{i}"} for i in range(3)],
                      "links": [["h0", "s0"], ["h1", "s1"], ["h2", "s2"], ["s0", "s1"], ["s1", "s2"], ["s2", "s0"]]},
    "across two levels": {"hosts": 2, "switches": [{"name": "s0"}, {"name": "s1", "level": 2}, {"name": "s2"}],
                          "links": [["h0", "s0"], ["h1", "s2"], ["s0", "s1"], ["s1", "s2"]]},
    "two ways down": {"hosts": 4, "switches": [{"name": "a"}, {"name": "b"}, {"name": "m", "level": 1},
                                               {"name": "n", "level": 1}, {"name": "t", "level": 2}],
                      "links": [["h0", "a"], ["h1", "a"], ["h2", "b"], ["h3", "b"], ["a", "m"], ["a", "n"],
                                ["b", "m"], ["m", "t"], ["n", "t"]]},
    "a valley": {"hosts": 3, "switches": [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "m", "level": 1},
                                          {"name": "n", "level": 1}],
                 "links": [["h0", "a"], ["h1", "b"], ["h2", "c"], ["a", "m"], ["c", "m"], ["c", "n"], ["b", "n"]]},
}


@pytest.mark.parametrize("name", GRAPHS)
def test_a_file_up_down_routing_cannot_serve_is_routed_by_shortest_paths(name, tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps(GRAPHS[name]))
    topo = read_topology(str(path))
    assert topo.graph
    every_pair_traced(topo)


BAD = [
    ({"hosts": 2, "switches": [{"name": "s0"}], "links": [["h0", "s0"], ["h1", "s9"]]},
     "'s9' is neither a host nor a switch"),
    ({"hosts": 3, "switches": [{"name": "s0"}], "links": [["h0", "s0"], ["h1", "s0"]]}, "h2 has 0 links"),
    ({"hosts": 2, "switches": [{"name": "s0"}, {"name": "s1"}], "links": [["h0", "s0"], ["h1", "s1"]]},
     "h1 is unreachable from h0: no path of links joins them"),
    ({"hosts": 2, "switches": [{"name": "s0"}, {"name": "s0", "level": 1}], "links": [["h0", "s0"]]},
     "'s0' is named twice"),
    ({"hosts": 2, "switches": [{"name": "s0"}, {"name": "s1"}],
      "links": [["h0", "s0"], ["h1", "s0"], ["h0", "s1"]]}, "h0 has 2 links"),
    ({"hosts": 2, "switches": [{"name": "s0"}], "links": [["h0", "s0"], ["s0", "h1"], ["h1", "s0"]]},
     "listed twice"),
    ({"hosts": ["h0", "h2"], "switches": [{"name": "s0"}], "links": [["h0", "s0"], ["h2", "s0"]]},
     "host 'h2' is out of order"),
    ({"hosts": 2, "switches": [{"name": "s0"}], "links": [{"a": "h0", "b": "s0", "ports": [0, 1]},
                                                        {"a": "h1", "b": "s0", "ports": [0, 1]}]},
     "s0 port 1 is used by two links"),
    ({"hosts": 2, "switch": []}, "unknown key 'switch'"),
]


@pytest.mark.parametrize("data,needle", BAD, ids=[n for _, n in BAD])
def test_a_bad_file_is_refused_in_one_line_naming_what_is_wrong(data, needle, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TopologyError, match=needle.replace("(", r"\(").replace("'", "'")):
        read_topology(str(path))
    r = run_dmlbed("theory", "--topo", str(path), "--algo", "ring", "--model", "mlp:1MB")
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_file_that_is_not_json_or_yaml_or_is_missing_gets_one_line(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("hosts: [h0, h1\nlinks: {")
    r = run_dmlbed("topo", str(path))
    assert r.returncode == 2 and "is not JSON or YAML at line" in r.stderr
    r = run_dmlbed("topo", str(tmp_path / "none.json"))
    assert r.returncode == 2 and "No such file" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_topo_exports_and_the_file_gives_the_generators_theory_and_simulation(tmp_path):
    path = tmp_path / "ls.yaml"
    out = cli_json("topo", "leafspine:4,4,2", "--export", str(path))
    assert out["exported_to"] == str(path) and out["counts"]["oversubscription_at_equal_rates"] == 2
    common = ["--algo", "ring", "--model", "mlp:2MB", "--bw", "100,50", "--iters", "3", "--ecmp", "hash"]
    made = cli_json("simulate", "--topo", "leafspine:4,4,2", *common)
    read = cli_json("simulate", "--topo", str(path), *common)
    assert read["topology"] == str(path)
    assert read["gst_median_s"] == pytest.approx(made["gst_median_s"]) and read["gst_theory_s"] == made["gst_theory_s"]


def test_bcube_and_bad_export_paths_are_refused_before_writing(tmp_path):
    r = run_dmlbed("topo", "bcube:3,2", "--export", str(tmp_path / "b.json"))
    assert r.returncode == 2 and "h0 has 2 NICs" in r.stderr and not (tmp_path / "b.json").exists()
    r = run_dmlbed("topo", "star:4", "--export", str(tmp_path / "b.txt"))
    assert r.returncode == 2 and "give a .json, .yaml or .yml file" in r.stderr


def test_algorithms_that_plan_over_a_familys_levels_say_why_a_file_does_not_fit(tmp_path):
    path = write_topology(parse("leafspine:4,4,2"), str(tmp_path / "ls.json"))
    r = run_dmlbed("theory", "--topo", path, "--algo", "blueconnect", "--model", "mlp:1MB")
    assert r.returncode == 2 and "plans over the levels of a named family" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_the_python_api_and_a_compare_config_take_a_file(tmp_path):
    import dmlbed
    path = write_topology(parse("leafspine:2,2,1"), str(tmp_path / "ls.json"))
    assert dmlbed.theory(topo=path, algo="ring", model="mlp:1MB", bw="100,50")["topology"] == path


@pytest.mark.emulation
def test_an_exported_leaf_spine_comes_up_traced_and_trains_correctly(tmp_path):
    """Every host pair reachable through the file's network, and a ring over it gives every rank the exact sum."""
    from test_emulation import leftovers
    path = write_topology(parse("leafspine:2,2,2"), str(tmp_path / "ls.yaml"))
    net = cli_json("net", path, "--bw", "50,25", "--check", "--duration", "2", timeout=600)
    assert net["pairs_reachable"] == net["pairs_tested"] == 12 and net["verdict"] != "not faithful"
    s = cli_json("run", "--topo", path, "--algo", "ring", "--model", "mlp:1MB", "--bw", "50,25", "--iters", "4",
                 "--batch", "4", "--out", str(tmp_path / "r"), timeout=600)
    assert s["correct"] is True and s["iterations"] == 4 and s["topology"] == path
    assert leftovers("leafspine:2,2,2") == []
