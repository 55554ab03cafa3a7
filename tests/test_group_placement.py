"""--placement: named rules that number a parallel job's ranks so one kind's groups sit in a rack or across racks,
checked against the racks of the job's hosts."""

import json

import pytest

from emulation.simulation.group_placement import RULES, check_placement_format, placed, racks
from emulation.core.topology import parse
from workloads.parallel_layout import LayoutError, parse_layout


def hosts_of(topo):
    return tuple(h.name for h in topo.hosts)


@pytest.mark.parametrize("spec,text", [("leafspine:2,8,1", "tp=8,dp=2"), ("fattree:4", "tp=2,pp=2,dp=4"),
                                       ("leafspine:4,4,2", "tp=4,pp=2,dp=2"), ("tree:4,4", "tp=4,dp=4"),
                                       ("leafspine:4,4,2", "tp=2,pp=4,dp=2")])
def test_each_rule_puts_its_groups_where_it_says_or_is_refused(spec, text):
    topo = parse(spec)
    hosts = hosts_of(topo)
    rack = racks(topo, hosts)
    layout = parse_layout(text)
    for rule in RULES:
        kind, shape = rule.split("-", 1)
        try:
            numbered = placed(layout, rule, topo, hosts)
        except LayoutError as exc:
            assert str(exc).startswith(f"--placement {rule}: ") and "cannot hold" in str(exc)
            continue
        assert (numbered.tp, numbered.pp, numbered.dp) == (layout.tp, layout.pp, layout.dp)
        for group in numbered.groups(kind):
            used = [rack[hosts[r]] for r in group]
            assert len(set(used)) == (1 if shape == "in-rack" else len(group)), (rule, group, used)
        every = sorted(r for group in numbered.groups(kind) for r in group)
        assert every == list(range(layout.ranks))  # still every rank once


def test_tensor_in_a_rack_is_megatrons_order_and_across_puts_tensor_slowest():
    topo = parse("leafspine:2,8,1")
    hosts = hosts_of(topo)
    assert placed(parse_layout("tp=8,dp=2"), "tp-in-rack", topo, hosts).order == ("tp", "dp", "pp")
    assert placed(parse_layout("tp=2,dp=8"), "tp-across-racks", topo, hosts).order == ("dp", "pp", "tp")
    assert placed(parse_layout("tp=2,dp=8"), "dp-in-rack", topo, hosts).label == "tp=2,pp=1,dp=8,order=dp-tp-pp"


def test_what_the_racks_cannot_hold_is_refused_in_one_line():
    topo = parse("leafspine:2,8,1")
    with pytest.raises(LayoutError, match=r"2 racks of 8 hosts on leafspine:2,8,1 cannot hold groups of tp=16"):
        placed(parse_layout("tp=16"), "tp-in-rack", topo, hosts_of(topo))
    with pytest.raises(LayoutError, match="under different switches"):
        placed(parse_layout("tp=4,dp=4"), "tp-across-racks", topo, hosts_of(topo))
    with pytest.raises(LayoutError, match="not both"):
        placed(parse_layout("tp=8,dp=2,order=dp-tp-pp"), "tp-in-rack", topo, hosts_of(topo))
    bcube = parse("bcube:4,2")
    with pytest.raises(LayoutError, match="has 2 links, so no one rack"):
        placed(parse_layout("tp=4,dp=4"), "tp-in-rack", bcube, hosts_of(bcube))
    with pytest.raises(LayoutError, match="not a placement rule: give KIND-in-rack"):
        check_placement_format("tp-in-pod")
    assert check_placement_format("") == "" and check_placement_format("dp-across-racks") == "dp-across-racks"


def test_placement_on_the_command_line_changes_the_iteration_as_the_order_it_names(tmp_path):
    from helpers import run_dmlbed
    job = ["--topo", "leafspine:2,8,1", "--bw", "100,25", "--algo", "ring", "--model", "gpt:2,64,8,256,128",
           "--micro-batches", "4", "--batch", "16", "--compute-time", "0.02", "--json"]
    got = {}
    for name, extra in (("in", ["--parallel", "tp=8,dp=2", "--placement", "tp-in-rack"]),
                        ("across", ["--parallel", "tp=8,dp=2", "--placement", "dp-in-rack"]),
                        ("order", ["--parallel", "tp=8,dp=2,order=dp-tp-pp"])):
        r = run_dmlbed("simulate", *job, *extra, "--out", str(tmp_path / name))
        assert r.returncode == 0, r.stderr
        got[name] = json.loads(r.stdout)
    assert got["in"]["placement"] == "tp-in-rack" and got["order"]["placement"] is None
    assert got["across"]["parallel"] == got["order"]["parallel"] == "tp=8,pp=1,dp=2,order=dp-tp-pp"
    assert got["across"]["iteration_s"] == pytest.approx(got["order"]["iteration_s"], rel=1e-9)
    assert got["across"]["iteration_s"] > 3 * got["in"]["iteration_s"]  # TP over the 4:1 spine
    r = run_dmlbed("theory", *job, "--parallel", "tp=4,dp=4", "--placement", "tp-across-racks")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "cannot hold" in r.stderr, r.stderr


@pytest.mark.parametrize("spec,text,rule", [("leafspine:2,8,1", "tp=8,dp=2", "tp-in-rack"),
                                            ("leafspine:2,8,1", "tp=8,dp=2", "dp-in-rack"),
                                            ("fattree:4", "tp=2,pp=2,dp=4", "tp-in-rack"),
                                            ("fattree:4", "tp=2,pp=2,dp=4", "pp-across-racks")])
def test_bytes_per_level_follow_the_placement(spec, text, rule):
    """Every flow crosses two host links (level 0: twice the kind's bytes); a kind kept in a rack puts nothing on
    the levels above, one spread across racks does."""
    from helpers import cli_json
    s = cli_json("theory", "--topo", spec, "--bw", "100", "--algo", "ring", "--model", "gpt:4,64,8,256,128",
                 "--parallel", text, "--placement", rule, "--micro-batches", "4", "--batch", "16",
                 "--compute-time", "0.02")
    kind, shape = rule.split("-", 1)
    for k, sent in s["bytes_per_kind"].items():
        levels = s["bytes_per_level"][k]
        if sent:
            assert levels["0"] == pytest.approx(2 * sent, rel=1e-6), (k, levels)
    above = sum(b for level, b in s["bytes_per_level"][kind].items() if level != "0")
    assert (above == 0) == (shape == "in-rack"), s["bytes_per_level"]
