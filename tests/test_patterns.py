"""Hedera's traffic patterns: who sends to whom from which port, the flow model's aggregate on the paths those
ports hash to beside a non-blocking switch's, and `net --pattern` measuring them."""

import pytest

from emulation.core.patterns import check_pattern, client_ports, pairs, parse_pattern
from emulation.core.topology import parse
from emulation.run.pattern_traffic import pattern_flows, summarize_patterns
from controllers.flow_rules import compute_rules
from controllers.paths import follow_packet
from emulation.core.addressing import all_host_configs
from helpers import cli_json, run_dmlbed


def test_patterns_parse_and_refuse_in_one_line():
    assert parse_pattern("stride:4").stride == 4 and parse_pattern("randbij").kind == "randbij"
    for bad in ("stride:0", "stride", "randbij:3", "ring"):
        with pytest.raises(ValueError, match="give stride:K"):
            parse_pattern(bad)
    with pytest.raises(ValueError, match="sends every host to itself"):
        check_pattern(parse_pattern("stride:16"), 16)


@pytest.mark.parametrize("seed", range(1, 6))
def test_each_host_sends_one_flow_and_receives_one_and_the_seed_draws_them(seed):
    for text in ("stride:1", "stride:4", "randbij"):
        got = pairs(parse_pattern(text), 16, seed)
        assert sorted(a for a, _ in got) == list(range(16)) == sorted(b for _, b in got)
        assert all(a != b for a, b in got)
    assert pairs(parse_pattern("stride:4"), 16, seed) == [(i, (i + 4) % 16) for i in range(16)]
    assert len(pairs(parse_pattern("alltoall"), 5, seed)) == 20
    hosts = [f"h{i % 16}" for i in range(240)]
    used = {}
    ports = client_ports(hosts, f"alltoall:{seed}", used)
    assert all(p % 2 == 0 and 32768 <= p <= 60999 for p in ports)
    assert all(len({p for h, p in zip(hosts, ports) if h == name}) == 15 for name in set(hosts))
    again = client_ports(hosts, f"alltoall:{seed}", used)  # a second run on the same hosts binds none of them again
    assert all(not set(p for h, p in zip(hosts, again) if h == n) & used_before
               for n, used_before in ((n, {p for h, p in zip(hosts, ports) if h == n}) for n in set(hosts)))
    assert client_ports(hosts[:16], f"stride:4:{seed}") == client_ports(hosts[:16], f"stride:4:{seed}") \
        != client_ports(hosts[:16], f"stride:4:{seed + 1}")


def test_a_non_blocking_switch_gives_every_flow_its_hosts_rate_and_ecmp_collisions_cost_on_a_fat_tree():
    star = parse("star:16")
    flows, _, ideal = pattern_flows(star, parse_pattern("randbij"), 1, (10.0,))
    assert sum(ideal) == pytest.approx(160) and sum(f.shaped_mbps for f in flows) == pytest.approx(160)
    fat = parse("fattree:4")
    within, _, ideal = pattern_flows(fat, parse_pattern("stride:1"), 1, (10.0, 10.0, 10.0))
    assert sum(f.shaped_mbps for f in within) == pytest.approx(sum(ideal))
    shares = [sum(f.shaped_mbps for f in pattern_flows(fat, parse_pattern("stride:8"), s, (10.0,) * 3)[0]) / 160
              for s in range(1, 6)]
    assert all(s < 0.9 for s in shares)  # every seed hashes some inter-pod flows onto one core path


@pytest.mark.parametrize("spec,pattern", [("fattree:4", "stride:4"), ("leafspine:4,4,2", "randbij"),
                                          ("torus:4,4", "stride:5"), ("tree:4,4", "stride:4")])
def test_each_pattern_flow_takes_the_path_the_rules_give_its_ports(spec, pattern):
    topo = parse(spec)
    flows, ports, _ = pattern_flows(topo, parse_pattern(pattern), 3, (10.0,) * topo.levels)
    rules, configs = compute_rules(topo), all_host_configs(topo)
    for i, (flow, port) in enumerate(zip(flows, ports)):
        traced = follow_packet(topo, rules, configs, flow.src, flow.dst_ip, (port, 5201 + i))
        assert traced.paths == [list(flow.path)]


def test_a_summary_gives_each_pattern_its_median_share_and_worst_ratio():
    rows = [{"pattern": "stride:4", "of_non_blocking": v, "flow_model_of_non_blocking": 0.6,
             "measured_over_flow_model": r} for v, r in ((0.5, 0.9), (0.6, 1.0), (0.7, 1.1))]
    out = summarize_patterns(rows)["stride:4"]
    assert out["of_non_blocking_median"] == 0.6 and out["measured_over_flow_model_range"] == [0.9, 1.1]


@pytest.mark.parametrize("argv,message", [
    (["--pattern", "ring"], "give stride:K"),
    (["--pattern", "stride:3"], "sends every host to itself on 3 hosts"),
    (["--pattern", "randbij", "--cli"], "give --check|not allowed with argument"),
])
def test_a_bad_pattern_is_one_line_and_exit_2(argv, message):
    mode = [] if "--cli" in argv else ["--check"]
    r = run_dmlbed("net", "star:3", *argv, *mode, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert any(m in r.stderr for m in message.split("|")), r.stderr


def test_the_patterns_command_models_a_pattern_without_a_network():
    r = cli_json("patterns", "fattree:4", "--bw", "10", "--pattern", "stride:1", "--pattern", "stride:8", "--seeds", "2")
    assert [row["pattern"] for row in r["patterns"]] == ["stride:1", "stride:1", "stride:8", "stride:8"]
    assert r["pattern_summary"]["stride:1"]["flow_model_of_non_blocking_median"] == 1.0
    assert r["pattern_summary"]["stride:8"]["flow_model_of_non_blocking_median"] < 0.9
    bad = run_dmlbed("patterns", "fattree:4", "--pattern", "stride:16")
    assert bad.returncode == 2 and "sends every host to itself" in bad.stderr


@pytest.mark.emulation
@pytest.mark.benchmark  # 48 s: make benchmark runs it beside configs/bench/patterns.yaml
def test_net_measures_a_pattern_beside_the_flow_model_and_a_non_blocking_switch(tmp_path):
    from test_emulation import leftovers
    r = cli_json("net", "fattree:4", "--bw", "10", "--check", "--duration", "4", "--pattern", "stride:4",
                 "--out", str(tmp_path / "n"), timeout=600)
    (row,) = r["patterns"]
    assert row["flows"] == 16 and not row["errors"] and row["non_blocking_mbps"] == pytest.approx(160)
    assert 0.8 < row["measured_over_flow_model"] < 1.2, row
    assert r["pattern_summary"]["stride:4"]["seeds"] == 1
    assert leftovers("fattree:4") == []
