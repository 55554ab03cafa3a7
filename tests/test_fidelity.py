"""The fidelity report's pure parts: busy time, the GST decomposition, the verdict; TCP settings as commands;
the compute clock that emulates a device."""

import statistics
import time

import pytest

from emulation.results.fidelity import Evidence, one_line, report, verdict_and_cause
from emulation.results.links import decompose, iteration_links, step_skew, union_length
from emulation.core.addressing import all_host_configs, config_commands
from emulation.run.options import OptionError, RunConfig
from emulation.run.resolution import tcp_settings
from emulation.run.validation import check_values
from emulation.core.tcp import TcpSettings, route_rto_min_ms, rto_min_for_rate, tsq_for_rate, wire_bytes
from emulation.core.topology import parse
from workloads.records import IterationRecord
from workloads.strategies.base import ComputeClock


def test_union_length_merges_overlaps():
    assert union_length([(0, 1), (0.5, 2), (3, 4)]) == pytest.approx(3.0)
    assert union_length([]) == 0


def trace(rank, level, start, end, nbytes, step=0, iteration=2, direction="send", peer=1):
    return {"rank": rank, "level": level, "start": start, "end": end, "bytes": nbytes, "wire_bytes": nbytes,
            "iteration": iteration, "dir": direction, "stream": 0, "step": step, "peer": peer}


def test_decomposition_adds_up_on_the_bottleneck_link():
    topo = parse("star:2")
    rate = 100e6 / 8
    payload = 1_000_000
    rows = {0: [{}, {}, {"tx_bytes": {"h0-eth0": payload * 1.05}}], 1: [{}, {}, {"tx_bytes": {"h1-eth0": 10}}]}
    traces = [trace(0, 0, 10.0, 10.0 + 0.05, payload / 2), trace(0, 0, 10.3, 10.3 + 0.1, payload / 2, step=1),
              trace(1, 0, 10.01, 10.1, payload / 2, direction="recv", peer=0),  # the first arrives at 10.1
              trace(1, 0, 10.0, 10.01, 10, peer=0)]
    links = iteration_links(topo, rows, traces, 2, (100.0,))
    it = {"iteration": 2, "gst_s": 0.45, "sync_start": 10.05, "sync_end": 10.5}
    theory = payload / rate
    d = decompose(it, links, theory)
    assert d["bottleneck"].startswith("h0>") and d["bottleneck"].endswith(" L0")
    assert d["headers_s"] == pytest.approx(0.05 * payload / rate)
    assert d["early_s"] == pytest.approx(0.05)  # busy 10.0-10.1 and 10.3-10.4; the window opens at 10.05
    assert d["below_rate_s"] == pytest.approx(0.2 - 1.05 * payload / rate)
    assert d["idle_s"] == pytest.approx(0.45 - 0.15)
    total = d["theory_s"] + d["plan_s"] + d["headers_s"] + d["below_rate_s"] + d["idle_s"] - d["early_s"]
    assert total == pytest.approx(d["measured_s"])


def test_a_two_phase_synchronization_chains_each_phases_bottleneck():
    """Parameter Flow's push into h0, then its broadcast out of h0: each phase loads another link of h0, so one
    link would look idle half the GST; the chain of both is busy all of it."""
    topo = parse("star:3")
    rate = 100e6 / 8
    mb = 1_000_000
    t_push = 2 * mb / rate  # two workers' pushes share h0's downlink
    push = [dict(trace(r, 0, 10.0, 10.0 + t_push, mb, peer=0), phase="push") for r in (1, 2)]
    cast = [dict(trace(0, 0, 10.0 + t_push, 10.0 + 2 * t_push, mb, peer=r), phase="broadcast") for r in (1, 2)]
    rows = {r: [{}, {}, {}] for r in range(3)}
    it = {"iteration": 2, "gst_s": 2 * t_push, "sync_start": 10.0, "sync_end": 10.0 + 2 * t_push}
    links = iteration_links(topo, rows, push + cast, 2, (100.0,))
    one = decompose(it, links, 2 * t_push)
    assert one["idle_s"] == pytest.approx(t_push)  # one link: idle through the other phase
    phases = [iteration_links(topo, rows, p, 2, (100.0,)) for p in (push, cast)]
    d = decompose(it, links, 2 * t_push, phases)
    assert d["idle_s"] == pytest.approx(0, abs=1e-9) and d["plan_s"] == pytest.approx(0, abs=1e-9)
    assert d["bottleneck"] == "s0>h0 L0 then h0>s0 L0"  # the workers' uplinks need as long: each gets half
    before = [dict(trace(0, 0, 9.0, 9.5, mb, peer=1), phase="pull")]  # over before the window opens: left out
    d = decompose(it, links, 2 * t_push, phases + [iteration_links(topo, rows, before, 2, (100.0,))])
    assert d["early_s"] == 0 and d["bottleneck"].count(" then ") == 1


def test_a_phase_is_judged_with_the_whole_iterations_wire_factor():
    """A worker that pushes 1 MB and relays 1 MB of the broadcast sent 2.04 MB on its interface: 2% overhead, not a
    push that took twice its bytes."""
    from emulation.results.links import wire_factors
    topo = parse("star:3")
    mb = 1_000_000
    push = [dict(trace(1, 0, 10.0, 10.1, mb, peer=0), phase="push")]
    relay = [dict(trace(1, 0, 10.2, 10.3, mb, peer=2), phase="broadcast")]
    rows = {0: [{}] * 3, 1: [{}, {}, {"tx_bytes": {"h1-eth0": 2.04 * mb}}], 2: [{}] * 3}
    factors = wire_factors(topo, rows, push + relay, 2)
    assert factors[(1, 0)] == pytest.approx(1.02)
    alone = iteration_links(topo, rows, push, 2, (100.0,))
    whole = iteration_links(topo, rows, push, 2, (100.0,), factors=factors)
    up = lambda links: next(l for l in links if l["link"].startswith("h1>"))  # noqa: E731
    assert up(alone)["wire"] == pytest.approx(2.04 * mb) and up(whole)["wire"] == pytest.approx(1.02 * mb)


def test_links_are_judged_against_the_fair_share_of_their_paths():
    """Two transfers cross a tree's 25 Mbit/s uplink together: each host link can only offer 12.5."""
    topo = parse("tree:2,2")
    mb = 1_000_000
    share = 12.5e6 / 8
    traces = [dict(trace(0, 0, 1.0, 1.0 + mb / share, mb, peer=2)), dict(trace(1, 0, 1.0, 1.0 + mb / share, mb, peer=3))]
    links = {l["link"]: l for l in iteration_links(topo, {0: [{}] * 3, 1: [{}] * 3}, traces, 2, (200.0, 25.0))}
    up = next(l for l in links.values() if l["level"] == 1)
    assert up["payload"] == 2 * mb and up["need_s"] == pytest.approx(up["busy_s"])
    host = links[next(k for k in links if k.startswith("h0>"))]
    assert host["need_s"] == pytest.approx(mb / share) == pytest.approx(host["busy_s"])
    assert len([l for l in links.values() if l["level"] == 0]) == 4  # two uplinks, two downlinks
    fid = report(Evidence(topo, (200.0, 25.0), mb / share, [{"iteration": 2, "gst_s": mb / share, "sync_start": 1.0,
                                                             "sync_end": 1.0 + mb / share, "workers": 4}],
                          {0: [{}] * 3, 1: [{}] * 3}, traces, {}, {"saturated_share": 0.0}, True))
    assert fid["levels"]["L0"]["fidelity"] == pytest.approx(1.0) and fid["levels"]["L1"]["fidelity"] == pytest.approx(1.0)
    assert fid["verdict"] == "faithful"


def test_a_connections_ports_put_its_transfer_on_its_ecmp_path():
    """Two cross-pod transfers whose ports hash onto the same core link: that link carries both, so each host
    link is judged against half its rate; without ports only the links common to every path are known."""
    from controllers.flow_rules import ecmp_choice
    topo = parse("fattree:4")
    mb, half = 1_000_000, 50e6 / 8 / 2
    same = [(s, 5000) for s in range(33000, 34000, 2)
            if (ecmp_choice(0, 2, s, 5000), ecmp_choice(1, 2, s, 5000)) == (0, 0)][:2]
    traces = [dict(trace(r, 0, 1.0, 1.0 + mb / half, mb, peer=p), ports=list(ports))
              for r, p, ports in [(0, 12, same[0]), (1, 13, same[1])]]
    links = {l["link"]: l for l in iteration_links(topo, {0: [{}] * 3, 1: [{}] * 3}, traces, 2, (50.0,) * 3)}
    assert links["a0_0>c0"]["payload"] == 2 * mb
    assert links["h0>e0_0"]["need_s"] == pytest.approx(mb / half) == pytest.approx(links["h0>e0_0"]["busy_s"])
    portless = {l["link"] for l in iteration_links(topo, {0: [{}] * 3, 1: [{}] * 3},
                                                   [trace(0, 0, 1.0, 2.0, mb, peer=12)], 2, (50.0,) * 3)}
    assert portless == {"h0>e0_0", "e3_0>h12"}


def test_connections_ecmp_hashed_are_said_as_the_scenarios_when_the_flow_model_replays_them():
    from emulation.results.fidelity import hashed_connections
    from emulation.results.links import Paths
    topo, mb, half = parse("fattree:4"), 1_000_000, 50e6 / 8 / 2
    traces = [dict(trace(r, 0, 1.0, 1.0 + mb / half, mb, peer=p), ports=[33000 + r, 5000])
              for r, p in [(0, 12), (1, 13)]]
    # one edge switch: no choice of path
    traces.append(dict(trace(0, 0, 1.0, 1.0 + mb / half, mb, peer=1), ports=[33002, 5000]))
    assert {c[:2] for c in hashed_connections(traces, Paths(topo))} == {(0, 12), (1, 13)}
    rows = [{"iteration": i, "gst_s": mb / half, "sync_start": 1.0, "sync_end": 1.0 + mb / half, "workers": 16}
            for i in range(4)]
    records = {r: [{}] * 4 for r in range(16)}

    def judged(topology, scenario):
        return report(Evidence(topology, (50.0,) * 3, mb / half, rows, records, [dict(t, iteration=i) for t in traces
                                                                                 for i in range(4)],
                               {}, {"saturated_share": 0.0}, True, scenario=scenario))
    modelled = judged(topo, {"gst_s": [mb / half * 1.3] * 4})
    assert "ECMP: 2 connections each took the equal-cost path" in modelled["scenario_note"]
    assert "1.30 of the closed form" in modelled["scenario_note"]
    unreplayed = judged(topo, {"none": "no flow model of this run: x"})
    assert "ECMP" not in (unreplayed.get("scenario_note") or "")  # no model replays them: nothing said
    assert unreplayed["unmodelled"] == ["hashed ECMP paths"] and unreplayed["verdict"] == "not judged"
    assert unreplayed["cause"].startswith("not judged: no model of hashed ECMP paths (no flow model of this run: x)")
    star = judged(parse("star:16"), {"gst_s": [mb / half] * 4})
    assert "ECMP" not in (star.get("scenario_note") or "") and "unmodelled" not in star
    assert "unmodelled" not in judged(parse("star:16"), None)  # nothing the closed form lacks: judged by it


def test_step_skew_is_the_spread_of_first_starts():
    traces = [trace(0, 0, 1.0, 2.0, 1), trace(1, 0, 1.3, 2.0, 1), trace(1, 0, 1.2, 2.0, 1), trace(0, 0, 5.0, 6.0, 1, step=1)]
    assert step_skew(traces, 2) == [pytest.approx(0.2)]


def test_verdicts():
    fast = {"decomposition_median_s": {"below_rate_s": 0.01, "idle_s": 0.02}, "levels": {"L0": {"critical_fidelity": 0.95}},
            "cpu": {"saturated_share": 0.1}, "tcp_totals": {}}
    assert verdict_and_cause(fast, 10, 1.0)["verdict"] == "faithful"
    stalls = dict(fast, decomposition_median_s={"below_rate_s": 0.0, "idle_s": 0.3},
                  tcp_totals={"rto_timeouts": 12})
    v = verdict_and_cause(stalls, 10, 1.0)
    assert v["verdict"] == "degraded" and "retransmission timeouts" in v["cause"] and "spurious" not in v["cause"]
    late_acks = dict(stalls, tcp_totals={"rto_timeouts": 12, "retrans_segs": 200, "dsack_received": 200})
    assert "spurious" in verdict_and_cause(late_acks, 10, 1.0)["cause"]
    busy = dict(fast, cpu={"saturated_share": 0.8})
    v = verdict_and_cause(busy, 10, 1.0)
    assert v["verdict"] == "degraded" and "CPU saturation" in v["cause"]
    # 0.09 s per rank, 9 ranks on 2 cores: 0.4 s of the machine in a 0.6 s GST (PS star:9 with TernGrad at 100)
    coding = dict(fast, levels={"L0": {"critical_fidelity": 0.43}}, codec_cpu_s=0.09, codec_cores_s=0.405,
                  gst_ratio=3.0)
    v = verdict_and_cause(coding, 10, 0.2)
    assert v["verdict"] == "not faithful"
    assert v["cause"].startswith("gradient compression on the CPU: 0.09 s per rank and iteration, all ranks "
                                 "together 68% of the GST")
    assert "compression" not in verdict_and_cause(dict(coding, codec_cores_s=0.1), 10, 0.2)["cause"]
    switch = dict(fast, cpu={"saturated_share": 0.0, "switch_saturated_share": 0.7},
                  levels={"L0": {"critical_fidelity": 0.05}})
    v = verdict_and_cause(switch, 10, 1.0)
    assert v["verdict"] == "not faithful" and "software switch saturated" in v["cause"]  # the root cause first
    slow = dict(fast, levels={"L0": {"critical_fidelity": 0.5}})
    assert verdict_and_cause(slow, 10, 1.0)["verdict"] == "not faithful"


def test_links_above_their_rate_or_a_gst_far_below_theory_are_not_faithful():
    fast = {"decomposition_median_s": {"below_rate_s": 0.01, "idle_s": 0.02}, "levels": {"L0": {"critical_fidelity": 0.95}},
            "cpu": {"saturated_share": 0.1}, "tcp_totals": {}, "gst_ratio": 1.03}
    assert verdict_and_cause(fast, 10, 1.0)["verdict"] == "faithful"
    unshaped = dict(fast, levels={"L0": {"critical_fidelity": 0.97}, "L1": {"critical_fidelity": 6.2}})
    v = verdict_and_cause(unshaped, 10, 1.0)
    assert v["verdict"] == "not faithful" and "6.20 times their shaped rate" in v["cause"]
    assert verdict_and_cause(dict(fast, levels={"L0": {"critical_fidelity": 1.1}}), 10, 1.0)["verdict"] == "faithful"
    v = verdict_and_cause(dict(fast, gst_ratio=7e-11), 10, 1.0)
    assert v["verdict"] == "not faithful" and "7e-11 of theory" in v["cause"]


def test_spurious_timeouts_are_counted_and_unsteady_timings_are_degraded():
    from emulation.results.fidelity import spurious_timeouts
    assert spurious_timeouts({"rto_timeouts": 10, "retrans_segs": 20, "dsack_received": 20}) == 10
    assert spurious_timeouts({"rto_timeouts": 10, "retrans_segs": 20, "dsack_received": 5}) == 2.5
    assert spurious_timeouts({"rto_timeouts": 0, "retrans_segs": 20, "dsack_received": 20}) == 0
    fast = {"decomposition_median_s": {"below_rate_s": 0.01, "idle_s": 0.02}, "levels": {"L0": {"critical_fidelity": 0.95}},
            "cpu": {"saturated_share": 0.1}, "tcp_totals": {}}
    jitter = dict(fast, spurious_rto_per_worker_iteration=5.6, gst_cv=0.13)
    v = verdict_and_cause(jitter, 10, 1.0)
    assert v["verdict"] == "degraded" and "CV 0.13" in v["cause"]
    assert "5.6 spurious TCP retransmission timeouts per worker" in v["cause"]
    steady = verdict_and_cause(dict(fast, spurious_rto_per_worker_iteration=5.6, gst_cv=0.004), 10, 1.0)
    assert steady["verdict"] == "faithful" and "5.6 spurious" in steady["timer_note"]
    assert verdict_and_cause(dict(fast, gst_cv=0.12), 10, 1.0)["verdict"] == "degraded"
    assert verdict_and_cause(dict(fast, gst_cv=0.08), 10, 1.0)["verdict"] == "faithful"
    assert "timer_note" not in verdict_and_cause(dict(fast, spurious_rto_per_worker_iteration=0.4), 10, 1.0)


def test_a_run_that_finished_no_iteration_gets_no_verdict():
    """A run that failed at bring-up measured nothing: no verdict may vouch for it (it said faithful)."""
    fid = report(Evidence(parse("star:4"), (100.0,), 1.0, [], {}, [], {}, {"busy_mean": 0.5}, True))
    assert fid["verdict"] == "not measured" and "no iteration finished" in fid["cause"]


def test_loopback_runs_are_not_measured():
    fid = report(Evidence(None, (100.0,), 1.0, [{"iteration": 0, "gst_s": 1.0}], {}, [], {}, {"busy_mean": 0.5}, False))
    assert fid["verdict"] == "not measured"
    assert "fidelity: not measured" in one_line(fid)


def test_tcp_settings_are_namespace_commands_and_route_options():
    tcp = TcpSettings(congestion_control="cubic", rto_min_ms=5, tsq_bytes=65536, quickack=False)
    cmds = tcp.sysctl_commands()
    assert not any("congestion_control" in c for c in cmds)  # set per socket: see TcpSettings
    assert "sysctl -qw net.ipv4.tcp_limit_output_bytes=65536" in cmds
    assert all(c.startswith("sysctl -qw net.ipv4.") for c in cmds)  # per-namespace keys only
    topo = parse("bcube:2,2")
    routes = [c for c in config_commands(all_host_configs(topo)["h0"], tcp.route_options()) if "ip route" in c]
    assert routes and all(c.endswith("rto_min 5ms") for c in routes)
    assert any("10.0.0.0/16" in c for c in routes)  # the connected subnet routes too
    assert TcpSettings(rto_min_ms=0, quickack=False).route_options() == ""
    assert TcpSettings(rto_min_ms=5, quickack=True).route_options() == "rto_min 5ms quickack 1"
    assert TcpSettings(rto_min_ms=0, quickack=True).route_options() == "quickack 1"
    assert wire_bytes(1448, 1500) == pytest.approx(1514)


def test_tcp_settings_left_to_the_rate_are_sized_per_host_and_given_ones_stay():
    assert tsq_for_rate(25) == 15625 and tsq_for_rate(10) == 6250  # 5 ms of the NIC's rate
    assert tsq_for_rate(100) == 62500 and tsq_for_rate(1000) == 65536 and tsq_for_rate(0.5) == 4096
    # 3 drains of 100 frames of 3514 bytes: 112.4 ms at 25 Mbit/s
    assert rto_min_for_rate(25, 100) == 338 and rto_min_for_rate(10, 100) == 844
    assert rto_min_for_rate(100, 100) == 85 and rto_min_for_rate(10000, 100) == 5  # never below the floor
    assert rto_min_for_rate(25, 50) == 169  # a smaller port buffer drains sooner
    auto = TcpSettings()
    host = auto.sized(200, 25)  # tree:3,2,2 at 200,100,25: a host's own NIC at 200, the core at 25
    assert host.tsq_bytes == 65536 and host.rto_min_ms == 338
    assert host.route_options() == "rto_min 338ms"
    given = TcpSettings(rto_min_ms=0, tsq_bytes=16384).sized(10, 10)
    assert given.tsq_bytes == 16384 and given.rto_min_ms == 0 and given.route_options() == ""


def test_rto_min_and_tsq_options_take_auto_or_an_integer():
    assert tcp_settings(RunConfig(topology="star:4", algo="ps")) == TcpSettings()
    given = tcp_settings(RunConfig(topology="star:4", algo="ps", rto_min="250", tsq=16384, dilation=2.0))
    assert given.rto_min_ms == 500 and given.tsq_bytes == 16384  # --rto-min is in emulated time
    with_units = tcp_settings(RunConfig(topology="star:4", algo="ps", rto_min="0.25s", tsq="16KiB"))
    assert with_units.rto_min_ms == 250 and with_units.tsq_bytes == 16384
    for name, bad in (("rto_min", "soon"), ("rto_min", "1001"), ("tsq", "100")):
        with pytest.raises(OptionError, match=f"--{name.replace('_', '-')} .* give auto or a whole number"):
            check_values(RunConfig(topology="star:4", algo="ps", **{name: bad}))


def test_the_minimum_rto_is_read_back_from_ip_route_output():
    assert route_rto_min_ms("10.0.0.0/16 dev h0-eth0 scope link rto_min lock 282ms") == 282
    assert route_rto_min_ms("10.1.0.0/16 dev h0-eth1 scope link rto_min lock 1.2s quickack 1") == 1200
    assert route_rto_min_ms("10.1.0.0/16 dev h0-eth1 scope link") is None


def test_compute_clock_pads_to_the_device_time_and_flags_overruns():
    clock = ComputeClock(0.2)  # margin for a loaded machine: 10 ms of work padded to 0.2 s, 0.3 s overrunning it
    for _ in range(2):
        rec = IterationRecord(0, 0, "worker")
        clock.begin()
        with clock.segment():
            time.sleep(0.01)
        clock.finish(rec)
        assert rec.compute_s == pytest.approx(0.2, abs=0.05) and rec.compute_real_s < 0.15
        assert not rec.compute_over_budget
    rec = IterationRecord(0, 1, "worker")
    clock.begin()
    with clock.segment():
        time.sleep(0.3)
    clock.finish(rec)
    assert rec.compute_over_budget and rec.compute_s >= 0.3


def test_compute_clock_without_device_time_measures_only():
    clock = ComputeClock(None)
    rec = IterationRecord(0, 0, "worker")
    clock.begin()
    with clock.segment():
        sum(range(100000))
    clock.finish(rec)
    assert rec.compute_s == pytest.approx(rec.compute_real_s) and rec.compute_cpu_s > 0


def test_switch_queue_drops_are_reported_as_the_networks_not_judged():
    from emulation.net.kernel_probes import leaf_drops
    tc = ("qdisc htb 5: root refcnt 2 r2q 10 default 0x1\n Sent 9 bytes 4 pkt (dropped 7, overlimits 0 requeues 0)\n"
          "qdisc pfifo 10: parent 5:1 limit 100p\n Sent 9 bytes 4 pkt (dropped 7, overlimits 0 requeues 0)\n"
          "qdisc noqueue 0: dev lo root refcnt 2\n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0)")
    assert leaf_drops(tc) == 7  # the HTB above the FIFO counts the same drops again
    fast = {"decomposition_median_s": {"below_rate_s": 0.01, "idle_s": 0.02},
            "levels": {"L0": {"critical_fidelity": 0.95}}, "cpu": {}, "tcp_totals": {}}
    v = verdict_and_cause(dict(fast, switch_port_drops={"switch_queue_drops": 40}), 10, 1.0)
    assert v["verdict"] == "faithful" and "40 packets dropped at switch-side queues" in v["network_note"]
    assert "network_note" not in verdict_and_cause(fast, 10, 1.0)


def test_cpu_saturation_is_judged_over_the_measured_iterations_not_the_start_up():
    from emulation.results.links import measured_window
    from emulation.run.sampling import CpuSampler
    cpu = CpuSampler()
    # start-up (torch imports) saturates the machine; the measured iterations leave it half idle
    cpu.samples = [(0.0, 0.5, 1.0), (0.5, 1.0, 1.0), (1.0, 1.5, 1.0), (2.0, 2.5, 0.5), (2.5, 3.0, 0.4)]
    rows = {r: [{"start": 1.0 + i * 0.5, "end": 1.5 + i * 0.5} for i in range(5)] for r in range(2)}
    window = measured_window(rows, 2)
    assert window == (2.0, 3.5)
    inside = cpu.report(window)
    assert inside["scope"] == "measured iterations" and inside["samples"] == 2 and inside["saturated_share"] == 0
    assert cpu.report()["saturated_share"] == 0.6
    assert cpu.report((10.0, 11.0))["scope"].startswith("whole run") and measured_window({}, 2) is None


def test_a_hosts_configuration_goes_in_lines_its_shell_reads_whole():
    """star:48's static ARP made h0's one line 4.2 KB; the terminal cut it at 4095 bytes and bring-up failed with
    'Device and destination are required arguments'."""
    from emulation.core.addressing import SHELL_LINE_BYTES, command_batches
    cmds = config_commands(all_host_configs(parse("star:48"))["h0"])
    assert len(" ; ".join(cmds)) > 4095
    batches = command_batches(cmds)
    assert [c for b in batches for c in b] == cmds and len(batches) >= 2
    assert all(len(" ; ".join(b)) <= SHELL_LINE_BYTES for b in batches)
    assert command_batches(["x" * 5000, "y"]) == [["x" * 5000], ["y"]]


def test_work_before_the_window_is_credited_against_slow_sending_in_it():
    """A bottleneck that sent 0.2 s before the GST window opened (ranks started early) and took 0.2 s longer than
    its bytes need overall added nothing to the GST: measured - need = below rate + idle - early = 0.2 + 0.01 - 0.2.
    The same slow sending with no early work added 0.2 s."""
    early = {"decomposition_median_s": {"below_rate_s": 0.2, "idle_s": 0.01, "early_s": 0.2},
             "levels": {"L0": {"critical_fidelity": 0.95}}, "cpu": {}, "tcp_totals": {}}
    v = verdict_and_cause(early, 10, 1.0)
    assert v["verdict"] == "faithful" and v["emulator_share"] == pytest.approx(0.01)
    late = dict(early, decomposition_median_s={"below_rate_s": 0.2, "idle_s": 0.01, "early_s": 0.0})
    assert verdict_and_cause(late, 10, 1.0)["emulator_share"] == pytest.approx(0.21)


def test_two_phases_steps_of_one_number_do_not_share_a_link():
    """Sharded training's reduce-scatter and all-gather both have a step 0: one after the other, each transfer had
    its path to itself, so each needs its bytes at the full rate (counted as one step, the reduce-scatter's links
    above h0 were judged at half h0's rate)."""
    from emulation.core.topology import parse
    from emulation.results.links import iteration_links
    topo, mb = parse("tree:2,2"), 1_000_000
    traces = []
    for n, (phase, far) in enumerate((("reduce_scatter", 3), ("all_gather", 1))):
        for direction, rank, peer in (("send", 0, far), ("recv", far, 0)):
            traces.append({"iteration": 0, "dir": direction, "rank": rank, "peer": peer, "level": 0, "stream": 0,
                           "step": 0, "start": 0.08 * n, "end": 0.08 * (n + 1), "wire_bytes": mb, "ports": None,
                           "phase": phase})
    rows = {0: [{"tx_bytes": {"h0-eth0": 2 * mb}}], **{r: [{}] for r in range(1, 4)}}
    links = {l["link"]: l for l in iteration_links(topo, rows, traces, 0, (100.0, 100.0))}
    assert links["h0>t0_0"]["need_s"] == pytest.approx(2 * mb / (100e6 / 8))
    across = [l for name, l in links.items() if l["level"] > 0]  # the reduce-scatter's way to h3 alone
    assert across and all(l["need_s"] == pytest.approx(mb / (100e6 / 8)) for l in across)


def test_counter_gains_count_what_each_port_gained_and_a_new_port_whole():
    from emulation.run.sampling import counter_gains
    assert counter_gains({"s1-eth1": 5, "s1-eth2": 0}, {"s1-eth1": 9, "s1-eth2": 0, "s2-eth1": 3}) == \
        {"s1-eth1": 4, "s1-eth2": 0, "s2-eth1": 3}


def test_frames_are_counted_beside_bytes_per_level(tmp_path):
    from emulation.results.iterations import per_iteration
    from emulation.results.summary import measured as summarize, section_dict
    from workloads.netstats import interface_bytes
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "dev").write_text(
        "Inter-|   Receive                            |  Transmit\n"
        " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls\n"
        "h0-eth0: 5000 7 0 0 0 0 0 0 151400 100 0 0 0 0 0 0\n")
    assert interface_bytes(["h0-eth0"], proc=str(tmp_path)) == {"h0-eth0": {"rx": 5000, "tx": 151400,
                                                                            "tx_frames": 100}}
    rows = {r: [{"rank": r, "iteration": i, "role": "worker", "start": 0.0, "end": 2.0, "compute_s": 1.0,
                 "sync_start": 1.0, "sync_end": 2.0, "loss": 1.0, "tx_bytes": {f"h{r}-eth0": 1514 * 10},
                 "tx_frames": {f"h{r}-eth0": 10}} for i in range(2)] for r in range(2)}
    iterations = per_iteration(rows, [0, 1], None)
    # without a topology each interface is its own level
    assert [it["tx_frames_by_level"] for it in iterations] == [{"h0-eth0": 10, "h1-eth0": 10}] * 2
    finals = {r: {"checksum": 1.0} for r in range(2)}
    measured = summarize(iterations, finals, [0, 1], {}, None)
    assert measured.frames_by_level == {"h0-eth0": 20, "h1-eth0": 20}
    assert measured.bytes_by_level == {"h0-eth0": 20 * 1514, "h1-eth0": 20 * 1514}
    # the payload on the wire: every frame's 66 bytes of headers off, over the fp32 volume and the engine's bytes
    measured.payload_fp32_bytes, measured.payload_sent_bytes = 40 * 1448 * 2, 40 * 1448
    traffic = measured.traffic([100.0], 1.0)
    assert traffic.wire_payload_ratio == pytest.approx(0.5) and traffic.interfaces_over_engine == pytest.approx(1.0)
    # records of an older run (no frames) still summarize, with none counted (and no payload on the wire claimed)
    for it in iterations:
        del it["tx_frames_by_level"]
    older = summarize(iterations, finals, [0, 1], {}, None)
    assert older.frames_by_level == {} and "wire_payload_ratio" not in section_dict(older.traffic([100.0], 1.0))


def test_the_flow_model_of_the_scenario_judges_what_the_emulator_added():
    """Against the model of the run's own scenario: its effects (idle links while a straggler computes, links below
    the per-step fair share under hash collisions, GST varying with drawn compute) are not the emulator's; a run
    that takes longer than the model still is, with its cause named."""
    scenario = {"decomposition_median_s": {"below_rate_s": 0.1, "idle_s": 0.3},
                "levels": {"L0": {"critical_fidelity": 0.8}}, "cpu": {"saturated_share": 0.1}, "tcp_totals": {},
                "gst_cv": 0.3, "step_skew_s": {"median": 0.2}}
    per_step = verdict_and_cause(scenario, 10, 1.0)  # judged by per-step fair shares: blamed on the emulator
    assert per_step["verdict"] == "not faithful" and per_step["judged_against"] == "per-step fair shares"
    modelled = dict(scenario, scenario_model={"measured_over_model": 1.04, "cv": 0.02})
    v = verdict_and_cause(modelled, 10, 1.0)
    assert v["verdict"] == "faithful" and v["emulator_share"] == pytest.approx(0.04)
    assert v["judged_against"] == "the flow model of the run's scenario"
    slower = verdict_and_cause(dict(modelled, scenario_model={"measured_over_model": 1.2, "cv": 0.02}), 10, 1.0)
    assert slower["verdict"] == "degraded" and "links idle during synchronization beyond the flow model" in \
        slower["cause"]  # the scenario's waits are in the model: not the ranks' skew
    unmodelled = verdict_and_cause(dict(scenario, levels={"L0": {"critical_fidelity": 0.99}}, gst_cv=0.02), 10, 1.0)
    assert "ranks start steps up to 200 ms apart" in unmodelled["cause"]
    far = verdict_and_cause(dict(modelled, scenario_model={"measured_over_model": 1.5, "cv": 0.02},
                                 decomposition_median_s={}), 10, 1.0)
    assert far["verdict"] == "not faithful" and "1.50 times the flow model of its own scenario" in far["cause"]
    hog = verdict_and_cause(dict(modelled, cpu={"saturated_share": 0.9}), 10, 1.0)
    assert hog["verdict"] == "degraded" and "CPU saturation" in hog["cause"]  # a saturated machine still warns
    rerouted = dict(modelled, levels={"L0": {"critical_fidelity": 1.19}})  # traffic off its per-step paths
    assert verdict_and_cause(rerouted, 10, 1.0)["verdict"] == "faithful"
    slow_rerouted = verdict_and_cause(dict(rerouted, scenario_model={"measured_over_model": 1.2, "cv": 0.02}), 10, 1.0)
    assert slow_rerouted["verdict"] == "degraded" and "links idle" in slow_rerouted["cause"]  # not the shaper
    unshaped = dict(rerouted, scenario_model={"measured_over_model": 0.6, "cv": 0.02})  # faster than it could be
    v = verdict_and_cause(unshaped, 10, 1.0)
    assert v["verdict"] == "not faithful" and "1.19 times their shaped rate" in v["cause"]
    v = verdict_and_cause(dict(modelled, scenario_model={"measured_over_model": 0.7, "cv": 0.02}), 10, 1.0)
    assert v["verdict"] == "degraded" and "0.70 of the flow model of its own scenario" in v["cause"]
    unsteady = verdict_and_cause(dict(modelled, scenario_model={"measured_over_model": 1.04, "cv": 0.2}), 10, 1.0)
    assert unsteady["verdict"] == "degraded" and "against the flow model" in unsteady["cause"]


def test_tcps_split_of_links_shared_with_other_traffic_is_the_scenarios_only_while_the_links_delivered():
    """Beside another job, slower than the max-min fair model while the links ran at their rate with data to send
    (the job's bytes and the others' together): TCP's split, named, not counted; links that lost time, a run far
    beyond the model, a job alone or a saturated CPU still judge it."""
    shared = {"decomposition_median_s": {"below_rate_s": 0.16, "idle_s": 0.05, "early_s": 0.14},
              "levels": {"L1": {"critical_fidelity": 0.9}}, "cpu": {"saturated_share": 0.0}, "tcp_totals": {},
              "background": True, "scenario_note": "traffic beside the job: job a shared the job's links",
              "scenario_model": {"measured_over_model": 1.11, "cv": 0.05}}
    v = verdict_and_cause(shared, 8, 1.0)
    assert v["verdict"] == "faithful" and v["emulator_share"] == pytest.approx(0.07)
    assert v["scenario_note"].startswith("traffic beside the job") and "TCP's split of the shared links: the run " \
        "took 1.11 times" in v["scenario_note"]
    lossy = dict(shared, decomposition_median_s={"below_rate_s": 0.3, "idle_s": 0.05, "early_s": 0.1})
    assert verdict_and_cause(lossy, 8, 1.0)["verdict"] == "degraded"  # the links lost 0.25 of theory
    slow = dict(shared, levels={"L1": {"critical_fidelity": 0.8}})
    assert verdict_and_cause(slow, 8, 1.0)["verdict"] == "degraded"
    far = dict(shared, scenario_model={"measured_over_model": 1.4, "cv": 0.05})
    assert verdict_and_cause(far, 8, 1.0)["verdict"] == "not faithful"
    alone = verdict_and_cause(dict(shared, background=False), 8, 1.0)
    assert alone["verdict"] == "degraded" and alone["emulator_share"] == pytest.approx(0.11)
    assert "scenario_note" not in alone or "TCP's split" not in alone["scenario_note"]
    hog = verdict_and_cause(dict(shared, cpu={"saturated_share": 0.9}), 8, 1.0)
    assert hog["verdict"] == "degraded" and "CPU saturation" in hog["cause"]


def test_loss_at_switch_queues_beyond_the_lossless_model_is_named_as_the_cause():
    """A run beyond its scenario's flow model after switch-side drops: still judged (the model is lossless), and the
    cause names the drops and the knob, not their symptoms; a saturated CPU is still named first."""
    lossy = {"decomposition_median_s": {"below_rate_s": 0.25, "idle_s": 0.04, "early_s": 0.14},
             "levels": {"L1": {"critical_fidelity": 0.83}}, "cpu": {"saturated_share": 0.0}, "tcp_totals": {},
             "background": True, "switch_port_drops": {"switch_queue_drops": 310},
             "scenario_model": {"measured_over_model": 1.29, "cv": 0.14}}
    v = verdict_and_cause(lossy, 8, 1.0)
    assert v["verdict"] == "degraded" and v["cause"].startswith("TCP's recovery from 310 packets dropped at "
                                                                  "switch-side queues") and "--queue" in v["cause"]
    assert "310 packets dropped" in v["network_note"]
    calm = verdict_and_cause(dict(lossy, switch_port_drops={}), 8, 1.0)
    assert calm["verdict"] == "degraded" and "switch-side" not in calm["cause"]
    # one drop in 262,168 segments (a BCube link-down run 1.18 of its model) cannot explain it: not named
    stray = verdict_and_cause(dict(lossy, switch_port_drops={"switch_queue_drops": 1},
                                   tcp_totals={"out_segs": 262168}), 8, 1.0)
    assert stray["verdict"] == "degraded" and "switch-side" not in stray["cause"]
    assert "1 packets dropped" in stray["network_note"]
    assert verdict_and_cause(dict(lossy, tcp_totals={"out_segs": 262168}), 8, 1.0)["cause"].startswith(
        "TCP's recovery from 310 packets")  # 12 in 10,000
    hog = verdict_and_cause(dict(lossy, cpu={"saturated_share": 0.9}), 8, 1.0)
    assert hog["cause"].startswith("CPU saturation")


def test_a_scenario_the_closed_form_lacks_with_no_model_is_not_judged_unless_the_machine_failed():
    """Traffic beside the job, link events, stragglers or hashed paths with no flow model of the scenario: the time
    against the closed form could be either's, so only the machine's own faults judge the run."""
    scenario = {"decomposition_median_s": {"below_rate_s": 0.1, "idle_s": 0.3},
                "levels": {"L0": {"critical_fidelity": 0.6}}, "cpu": {"saturated_share": 0.1}, "tcp_totals": {},
                "gst_cv": 0.3, "unmodelled": ["traffic beside the job", "link events"],
                "scenario_model": {"none": "no flow model of this run: simulate runs the plan algorithms, not gloo"}}
    v = verdict_and_cause(scenario, 10, 1.0)
    assert v["verdict"] == "not judged" and v["emulator_share"] is None
    assert v["cause"] == ("not judged: no model of traffic beside the job and link events (no flow model of this "
                          "run: simulate runs the plan algorithms, not gloo), and the closed form has none of it")
    assert v["judged_against"] == "the machine only (no model of the scenario)"
    hog = verdict_and_cause(dict(scenario, cpu={"saturated_share": 0.9}), 10, 1.0)
    assert hog["verdict"] == "degraded" and "CPU saturation" in hog["cause"]
    drops = verdict_and_cause(dict(scenario, tcp_totals={"qdisc_drops": 500, "out_segs": 10000}), 10, 1.0)
    assert drops["verdict"] == "degraded" and "dropped in host queues" in drops["cause"]
    far = verdict_and_cause(dict(scenario, gst_ratio=0.1), 10, 1.0)
    assert far["verdict"] == "not faithful" and "faster than the shaped links" in far["cause"]
    plain = {k: v for k, v in scenario.items() if k != "unmodelled"}  # nothing the closed form lacks: judged by it
    assert verdict_and_cause(plain, 10, 1.0)["verdict"] == "not faithful"
    modelled = dict(scenario, scenario_model={"measured_over_model": 1.04, "cv": 0.02},
                    levels={"L0": {"critical_fidelity": 0.9}})
    assert verdict_and_cause(modelled, 10, 1.0)["verdict"] == "faithful"  # a model of it: judged against that


def test_the_scenario_model_is_compared_iteration_by_iteration_and_its_absence_said():
    rows = [{"iteration": i, "gst_s": g} for i, g in enumerate([3.0, 2.0, 1.1, 2.2, 1.05])]
    evidence = Evidence(parse("star:4"), (100.0,), 1.0, rows, {}, [], {}, {"busy_mean": 0.5}, True,
                        scenario={"gst_s": [1.0, 1.0, 1.0, 2.0, 1.0], "folder": "scenario-model"})
    from emulation.results.fidelity import scenario_readings
    got = scenario_readings(evidence, rows[2:])["scenario_model"]
    assert got["measured_over_model"] == pytest.approx(1.1) and got["gst_median_s"] == 1.0
    assert got["cv"] == pytest.approx(statistics.pstdev([1.1, 1.1, 1.05]) / statistics.mean([1.1, 1.1, 1.05]),
                                      abs=1e-4)
    none = Evidence(parse("star:4"), (100.0,), 1.0, rows, {}, [], {}, {}, True, scenario={"none": "no flow model: x"})
    assert scenario_readings(none, rows[2:]) == {"scenario_model": {"none": "no flow model: x"}}
    assert scenario_readings(Evidence(parse("star:4"), (100.0,), 1.0, rows, {}, [], {}, {}, True), rows) == {}


def test_a_cpu_hog_runs_for_its_block_and_every_process_is_stopped():
    from emulation.run.faults import CpuHog
    with CpuHog(2) as hog:
        procs = list(hog.procs)
        assert len(procs) == 2 and all(p.poll() is None for p in procs)
    assert all(p.poll() is not None for p in procs) and hog.procs == []
    with CpuHog(0) as none:
        assert none.procs == []


def test_a_filtered_payload_with_no_model_is_not_judged_against_the_unfiltered_closed_form():
    """DVF drops a share its updates decide, and its closed form sends every value: a run far below that closed
    form is the filter's doing, not a shaper that did not hold, so only the machine judges it."""
    from emulation.core.topology import parse
    from emulation.core.formulas import Theory
    from workloads.algorithms.pflow import theory
    topo, mb, rate = parse("star:4"), 1_000_000, 50e6 / 8
    rows = [{"iteration": i, "gst_s": 0.2 * mb / rate, "sync_start": 1.0, "sync_end": 1.0 + 0.2 * mb / rate,
             "workers": 4} for i in range(4)]  # a fifth of the closed form: what a filter that drops 4/5 gives

    def judged(filtered, cpu=0.0):
        return report(Evidence(topo, (50.0,), mb / rate, rows, {r: [{}] * 4 for r in range(4)}, [], {},
                               {"saturated_share": cpu}, True, scenario={"none": "no flow model of this run: x"},
                               filtered=filtered))
    assert judged(False)["verdict"] == "not faithful"  # unfiltered, so fast a run means a shaper did not hold
    v = judged(True)
    assert v["verdict"] == "not judged" and "no model of a filtered payload" in v["cause"]
    assert judged(True, cpu=0.9)["verdict"] == "degraded"  # the machine's own fault still counts
    tree = theory(parse("star:10"), 4e6, (100.0,), 5, pf_tree="5,1", pf_dvf="1e-5,2e-5")
    assert isinstance(tree, Theory) and tree.filtered
    assert not theory(parse("star:10"), 4e6, (100.0,), 5, pf_tree="5,1", pf_dvf="none").filtered


def test_a_run_within_its_model_names_the_rule_that_judged_it_not_idle_links():
    """Stragglers on star:16 (verdicts benchmark): 1.009 of the flow model of the scenario, 1.15 s of links idle (the
    stragglers' waits, in the model) and 7 of 128 rank-iterations over their compute budget. The verdict is the
    budget's, and so is the cause: not "links idle ... beyond the flow model", which the run was not."""
    fid = {"decomposition_median_s": {"below_rate_s": -0.05, "idle_s": 1.15, "early_s": 1.04},
           "levels": {"L0": {"critical_fidelity": 1.007}}, "cpu": {"saturated_share": 0.0}, "tcp_totals": {},
           "compute_over_budget": 7, "compute_rank_iterations": 128,
           "scenario_model": {"measured_over_model": 1.0089, "cv": 0.0}}
    v = verdict_and_cause(fid, 8, 7.86)
    assert v["verdict"] == "degraded" and v["cause"].startswith("real compute exceeded --compute-time in 7 of 128")
    beyond = verdict_and_cause(dict(fid, compute_over_budget=0, scenario_model={"measured_over_model": 1.2,
                                                                                "cv": 0.0}), 8, 7.86)
    assert beyond["verdict"] == "degraded" and beyond["cause"].startswith("links idle during synchronization beyond")


def test_links_above_their_rate_in_a_run_as_slow_as_its_model_are_a_reroute_not_a_shaper():
    """BCube link down (verdicts benchmark): BCube's hosts relay around the failed link, so a link carries 1.69 times
    the rate its per-step paths give it, and the run took 0.997 of its model: judged "not faithful" (the shaper did
    not hold) because 0.997 < 1. Within the verdict's own tolerance it is as slow as its model; faster, it is not."""
    fid = {"decomposition_median_s": {"below_rate_s": 0.0, "idle_s": 0.01},
           "levels": {"L0": {"critical_fidelity": 0.97}, "L1": {"critical_fidelity": 1.69}}, "cpu": {},
           "tcp_totals": {}, "scenario_model": {"measured_over_model": 0.9969, "cv": 0.02}}
    assert verdict_and_cause(fid, 8, 1.0)["verdict"] == "faithful"
    fast = verdict_and_cause(dict(fid, scenario_model={"measured_over_model": 0.88, "cv": 0.02}), 8, 1.0)
    assert fast["verdict"] == "not faithful" and "the shaper did not hold" in fast["cause"]
