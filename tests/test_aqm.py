"""ECN marking in the switch port buffers (--aqm red-ecn:K) and the incast that measures a queue: parsing, the RED
leaf's tc arguments, the hosts' ECN, the refusals, the queue samples and their summary, the closed forms, the
flow model's shares (the DCTCP experiment itself runs in the VM test, whose kernel has sch_red and tcp_dctcp)."""

import pytest

from emulation.commands import net as net_command
from emulation.core.aqm import describe, dctcp_queue, droptail_queue, parse_aqm, queue_forecast, red_ecn_args
from emulation.core.queue_samples import leaf_counters, parse_samples, series_rows, summarize
from emulation.core.shaping import leaf_queue_command
from emulation.core.tcp import TcpSettings
from emulation.core.topology import parse
from emulation.net import checks
from emulation.net.kernel_probes import leaf_drops, leaf_marks
from emulation.net.nodes import QuietTCIntf
from emulation.net.topos import SpecTopo
from emulation.run import validation
from emulation.run.options import OptionError, RunConfig
from helpers import run_dmlbed

RED_LEAF = ("qdisc red 10: parent 5:1 limit 151400b min 30280b max 31794b ecn\n"
            " Sent 3000000 bytes 2000 pkt (dropped 3, overlimits 120 requeues 0)\n"
            " backlog 30280b 20p requeues 0\n"
            "  marked 117 early 0 pdrop 3 other 0\n")
HTB = ("qdisc htb 5: root refcnt 2 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000\n"
       " Sent 3000000 bytes 2000 pkt (dropped 3, overlimits 500 requeues 0)\n"
       " backlog 30280b 20p requeues 0\n")
CHILD = "qdisc bfifo 0: parent 10:1 limit 151400b\n Sent 3000000 bytes 2000 pkt (dropped 3, overlimits 0 requeues 0)\n"


def test_aqm_parses_none_or_red_ecn_with_k_and_names_what_is_valid():
    assert parse_aqm("none") == 0 and parse_aqm("") == 0 and parse_aqm("RED-ECN:20") == 20
    assert describe(20) == "red-ecn:20" and describe(0) == "none"
    for bad in ("red:20", "red-ecn", "red-ecn:0", "red-ecn:x", "codel"):
        with pytest.raises(ValueError, match="give none .* or red-ecn:K"):
            parse_aqm(bad)


def test_the_red_leaf_marks_from_k_full_frames_to_all_one_frame_later_within_the_buffer():
    args = red_ecn_args(20, 100, 10, 1500)
    assert args == ("red limit 151400 min 30280 max 31794 avpkt 1514 burst 21 bandwidth 10Mbit probability 1 ecn")
    assert leaf_queue_command("tc", "s0-eth1", 100, red=args) == f"tc qdisc add dev s0-eth1 parent 5:1 handle 10: {args}"
    assert leaf_queue_command("tc", "s0-eth1", 100).endswith("pfifo limit 100")


def test_a_shaped_end_asked_to_mark_gets_red_under_htb_and_others_keep_their_fifo():
    intf = QuietTCIntf.__new__(QuietTCIntf)
    intf.leaf_packets, intf.netem, intf.ecn_mark, intf.frame_mtu = 100, None, 20, 1500
    cmds, parent = intf.bwCmds(bw=10)
    assert cmds[-1] == "%s qdisc add dev %s parent 5:1 handle 10: " + red_ecn_args(20, 100, 10, 1500)
    assert parent.strip() == "parent 10:"
    intf.ecn_mark = 0
    assert QuietTCIntf.bwCmds(intf, bw=10)[0][-1].endswith("pfifo limit 100")


def test_only_switch_side_queues_mark_and_hosts_then_ask_for_ecn():
    topo = SpecTopo(spec=parse("star:3"), bw=(10,), host_queue=1000, switch_queue=100, ecn_mark=20)
    for _, _, info in topo.links(withInfo=True):
        assert "ecn_mark" not in info["params1"] and info["params2"]["ecn_mark"] == 20  # host end, switch end
    assert "sysctl -qw net.ipv4.tcp_ecn=1" in TcpSettings(ecn_mark_packets=20).sysctl_commands()
    assert not any("tcp_ecn" in c for c in TcpSettings().sysctl_commands())


def test_red_leaves_count_drops_once_and_their_marks():
    tc = HTB + RED_LEAF + CHILD
    assert leaf_drops(tc) == 3 and leaf_marks(tc) == 117
    assert leaf_counters(tc) == {"bytes": 30280, "packets": 20, "marked": 117, "dropped": 3, "sent_bytes": 3000000}


def test_queue_samples_parse_summarize_and_leave_out_a_look_cut_off():
    looks = []
    for i, (packets, marks) in enumerate([(10, 0), (20, 5), (30, 9), (20, 12), (10, 20)]):
        leaf = RED_LEAF.replace("20p", f"{packets}p").replace("marked 117", f"marked {marks}") \
            .replace("Sent 3000000", f"Sent {1000000 * i}")
        looks.append(f"T {100 + 0.5 * i:.3f}\n{HTB}{leaf}")
    samples = parse_samples("".join(looks) + "T 103.0\nqdisc htb 5: root")
    assert [s.packets for s in samples] == [10, 20, 30, 20, 10]
    whole = summarize(samples, 100)
    assert whole["median_packets"] == 20 and whole["max_packets"] == 30 and whole["ecn_marks"] == 20
    assert whole["sent_mbps"] == pytest.approx(4e6 * 8 / 2 / 1e6) and whole["period_s_median"] == 0.5
    assert whole["p90_of_buffer"] == pytest.approx(whole["p90_packets"] / 100, abs=1e-3)
    inner = summarize(samples, 100, start=100.4, end=101.1)
    assert inner["samples"] == 2 and inner["ecn_marks"] == 4
    assert "error" in summarize(samples[:1], 100)
    assert series_rows(samples, 100)[1] == {"t_s": 0.5, "packets": 20, "bytes": 30280, "ecn_marks": 5, "drops": 3}


def test_closed_forms_of_the_queue_dctcp_near_k_drop_tail_near_full():
    d = dctcp_queue(20, 2, 0.8)
    assert d.high == 22 and d.low == pytest.approx(22 - (2 * 2 * 20.8) ** 0.5 / 2) and 15 <= d.middle <= 30
    cubic = droptail_queue(100, 0.8, "cubic")
    assert cubic.high == 100 and cubic.low == pytest.approx(0.7 * 100.8 - 0.8)
    assert droptail_queue(100, 0.8, "reno").low == pytest.approx(0.5 * 100.8 - 0.8)
    assert queue_forecast(20, "dctcp", 2, 100, 0.8) == d
    assert queue_forecast(0, "cubic", 2, 100, 0.8) == cubic
    assert queue_forecast(20, "cubic", 2, 100, 0.8).high == 20  # cubic with ECN halves at the mark
    assert queue_forecast(0, "bbr", 2, 100, 0.8).high == 1.0


def test_incast_flows_get_the_flow_models_fair_shares_of_the_receivers_link():
    star = net_command.incast_flows(parse("star:3"), 2, (10,))
    assert [(f.src, f.dst, f.shaped_mbps) for f in star] == [("h1", "h0", 5.0), ("h2", "h0", 5.0)]
    fat = net_command.incast_flows(parse("fattree:4"), 15, (100, 100, 100))
    assert sum(f.shaped_mbps for f in fat) == pytest.approx(100, abs=0.01) and all(f.path[-1] == "h0" for f in fat)
    slow = net_command.incast_flows(parse("star:3"), 2, (10,), {("h1", "s0"): 2.0})
    assert [f.shaped_mbps for f in slow] == [2.0, 8.0]  # max-min: the slow sender's leftover goes to the other


def test_an_incast_summary_weighs_the_flows_against_the_bottleneck_and_each_other():
    rows = [{"wire_mbps": 4.9, "retransmits": 1}, {"wire_mbps": 4.7, "retransmits": 0}]
    out = checks.summarize_incast(rows, 10.0)
    assert out["throughput_of_rate"] == 0.96 and out["retransmits"] == 1 and out["jain_fairness"] > 0.99
    assert checks.summarize_incast([{"wire_mbps": 9.6}, {"wire_mbps": 0.0}], 10.0)["jain_fairness"] == 0.5


@pytest.mark.parametrize("argv,message", [
    (["--aqm", "red-ecn:200"], "never reaches: give K below 100"),
    (["--aqm", "red:3"], "give none"),
    (["--incast", "3"], "out of range for star:3: give 1-2 senders"),
    (["--incast", "1", "--cli"], "give --check|not allowed with argument"),
])
def test_bad_aqm_or_incast_is_one_line_and_exit_2(argv, message):
    mode = [] if "--cli" in argv else ["--check"]
    r = run_dmlbed("net", "star:3", *argv, *mode, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert any(m in r.stderr for m in message.split("|")), r.stderr


def test_a_kernel_without_red_or_dctcp_is_named_in_one_line(monkeypatch):
    monkeypatch.setattr(validation, "red_available", lambda: False)
    monkeypatch.setattr(validation.os, "geteuid", lambda: 0)
    with pytest.raises(OptionError, match="needs the kernel's RED qdisc \\(module sch_red\\)"):
        validation.check_aqm(RunConfig(aqm="red-ecn:20"), validation.parse_impairment("0", "0", parse("star:3")))
    with pytest.raises(OptionError, match="both need the leaf of a switch port's queue"):
        validation.check_aqm(RunConfig(aqm="red-ecn:20"), validation.parse_impairment("1", "0", parse("star:3")))
    with pytest.raises(OptionError, match="--local has none"):
        validation.check_aqm(RunConfig(aqm="red-ecn:20", local=True), None)
    from emulation.net import kernel_probes
    monkeypatch.setattr(kernel_probes, "available_congestion_controls", lambda load=None: ["cubic", "reno"])
    with pytest.raises(OptionError, match="--tcp-cc dctcp needs the kernel module tcp_dctcp"):
        validation.check_congestion_control(RunConfig(tcp_cc="dctcp"))
    assert net_command.Net.own  # the command that runs the experiment declares --incast
    assert any(o.name == "incast" for o in net_command.Net.own)


def test_incast_sender_counts_take_one_a_range_or_a_list():
    assert net_command.sender_counts("3") == (3,)
    assert net_command.sender_counts("1-4") == (1, 2, 3, 4)
    assert net_command.sender_counts("1,2,8") == (1, 2, 8)
    assert net_command.sender_counts("0") == ()
    for bad in ("4-1", "a", "1,1", "0,2", "-1", ""):
        with pytest.raises(ValueError, match="--incast"):
            net_command.sender_counts(bad)


def test_an_incasts_verdict_tells_drops_at_the_port_from_the_emulators_faults():
    calm = {"saturated_share": 0.1, "switch_saturated_share": 0.0}
    ok = net_command.incast_verdict(95.0, 100.0, {"drops": 0}, calm)
    assert ok == {"verdict": "faithful", "cause": None}
    lossy = net_command.incast_verdict(40.0, 100.0, {"drops": 120}, calm)
    assert lossy["verdict"] == "faithful" and "network under study: 120 drops" in lossy["cause"]
    short = net_command.incast_verdict(40.0, 100.0, {"drops": 0}, calm)
    assert short["verdict"] == "not faithful" and short["cause"].startswith("emulator")
    busy = net_command.incast_verdict(40.0, 100.0, {"drops": 120}, {"saturated_share": 0.8})
    assert busy["verdict"] == "not faithful" and "saturated" in busy["cause"]
    # the flows' iperf3 rates summed over their own windows overstate; the port's own count is the aggregate
    held = net_command.incast_verdict(117.0, 100.0, {"drops": 384, "sent_mbps": 99.6}, calm)
    assert held["verdict"] == "faithful"
    over = net_command.incast_verdict(99.0, 100.0, {"drops": 0, "sent_mbps": 130.0}, calm)
    assert over["verdict"] == "not faithful" and "did not hold" in over["cause"]
