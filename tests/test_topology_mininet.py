"""`--topo mininet:FILE.py:NAME[,ARGS]`: Mininet Topo classes, as `mn --custom` takes them, run as dmlbed topologies."""

import pytest

from emulation.core.topology import parse
from emulation.core.topology_types import TopologyError
from helpers import cli_json, run_dmlbed

CUSTOM = '''"""Topologies as a Mininet user writes them: mn --custom mytopos.py --topo linear,3,2 / --topo tree,2,2"""
from mininet.topo import Topo


class LinearTopo(Topo):
    "k switches in a line, n hosts on each."
    def build(self, k=2, n=1):
        last = None
        for i in range(1, k + 1):
            switch = self.addSwitch('s%s' % i)
            for j in range(1, n + 1):
                host = self.addHost('h%s' % ((i - 1) * n + j))
                self.addLink(host, switch)
            if last:
                self.addLink(switch, last)
            last = switch


class TreeTopo(Topo):
    "A tree of switches, fanout hosts under each bottom switch."
    def build(self, depth=2, fanout=2):
        self.hostNum, self.switchNum = 1, 1
        self.addTree(depth, fanout)

    def addTree(self, depth, fanout):
        if depth > 0:
            node = self.addSwitch('s%s' % self.switchNum)
            self.switchNum += 1
            for _ in range(fanout):
                self.addLink(node, self.addTree(depth - 1, fanout))
        else:
            node = self.addHost('h%s' % self.hostNum)
            self.hostNum += 1
        return node


class Shaped(Topo):
    def build(self):
        s1 = self.addSwitch('s1')
        for i in (1, 2):
            self.addLink(self.addHost('h%d' % i), s1, bw=10, delay='5ms')


class Broken(Topo):
    def build(self, n=2):
        raise ValueError('n must be even')


topos = {'linear': LinearTopo, 'tree': TreeTopo}
'''


@pytest.fixture
def custom(tmp_path):
    path = tmp_path / "mytopos.py"
    path.write_text(CUSTOM)
    return path


def test_mininet_topo_classes_become_dmlbed_topologies(custom):
    tree = parse(f"mininet:{custom}:tree,2,3")
    assert [h.name for h in tree.hosts] == [f"h{i}" for i in range(9)]  # Mininet's h1..h9, in its order
    assert sorted((s.name, s.level) for s in tree.switches) == [("s1", 1), ("s2", 0), ("s3", 0), ("s4", 0)]
    assert len(tree.links) == 12 and tree.spec == f"mininet:{custom}:tree,2,3"
    assert {l.lower_port for l in tree.links if l.lower.startswith("h")} == {0}  # Mininet's ports kept: h1-eth0
    line = parse(f"mininet:{custom}:linear,k=3,n=2")
    assert len(line.hosts) == 6 and {s.level for s in line.switches} == {0} and line.graph  # shortest paths
    assert parse(line.spec).links == line.links  # the ranks build it again from its spec


def test_a_mininet_tree_simulates_as_the_same_tree_of_dmlbed(custom, tmp_path):
    common = ("--algo", "ring", "--model", "mlp:1MB", "--bw", "100")
    mine = cli_json("simulate", "--topo", f"mininet:{custom}:tree,2,2", *common, "--out", str(tmp_path / "mn"))
    family = cli_json("simulate", "--topo", "tree:2,2", *common, "--out", str(tmp_path / "family"))
    assert mine["gst_median_s"] == pytest.approx(family["gst_median_s"], rel=1e-9)


@pytest.mark.parametrize("spec,message", [
    ("mininet:{dir}/none.py:tree", "no file"),
    ("mininet:{custom}:star", "has no topos['star'] nor class star: valid are linear, tree"),
    ("mininet:{custom}:Broken,3", "Broken(3) raised ValueError: n must be even"),
    ("mininet:{custom}:Shaped", "link h1-s1 sets bw, delay: dmlbed does not apply a Mininet link's options"),
    ("mininet:{custom}", "give mininet:FILE.py:NAME"),
    ("mininet:{bad}:tree", "failed to load: SyntaxError"),
])
def test_a_bad_mininet_topology_is_one_line_and_exit_2(custom, tmp_path, spec, message):
    bad = tmp_path / "bad.py"
    bad.write_text("from mininet.topo import Topo\nclass T(Topo:\n")
    given = spec.format(dir=tmp_path, custom=custom, bad=bad)
    with pytest.raises(TopologyError, match="topology"):
        parse(given)
    r = run_dmlbed("topo", given)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.emulation
@pytest.mark.benchmark  # two networks brought up: make benchmark runs it (the pure tests check the conversion)
@pytest.mark.parametrize("call", ["tree,2,2", "linear,k=3,n=1"])
def test_a_mininet_topo_checks_and_runs_a_ring_on_the_emulated_network(custom, tmp_path, call):
    from test_emulation import leftovers
    spec = f"mininet:{custom}:{call}"
    r = run_dmlbed("net", spec, "--check", "--bw", "100", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    s = cli_json("run", "--topo", spec, "--algo", "ring", "--model", "mlp:1MB", "--iters", "4", "--bw", "100",
                 "--out", str(tmp_path / "run"), timeout=600)
    assert s["correct"] is True and s["sum_verified"] is True and s["topology"] == spec
    assert leftovers(spec) == []
