"""The links' MTU: header share, every link end configured, what each datapath carries, calibrations of another
MTU refused, the simulator's goodput following it, and a real network with the MTU asked for."""

import json

import pytest

from emulation.net.topos import SpecTopo
from emulation.run.options import OptionError, RunConfig
from emulation.run.validation import check_mtu, validate
from emulation.core.calibration import Calibration, CalibrationError, LevelFit, load
from emulation.core.shaping import GSO_HOLD_S, gso_bytes, offloads_off_command
from emulation.core.tcp import DEFAULT_MTU, TcpSettings, goodput, mss_bytes, wire_bytes
from emulation.core.topology import parse
from helpers import run_dmlbed


def test_header_share_follows_the_mtu():
    assert mss_bytes(1500) == 1448 and goodput(1500) == pytest.approx(1448 / 1514)
    assert wire_bytes(1448, 1500) == pytest.approx(1514) and wire_bytes(3448, 3500) == pytest.approx(3514)
    assert TcpSettings().mtu == DEFAULT_MTU and goodput() > goodput(1500)


@pytest.mark.parametrize("spec,boxes", [("bcube:2,2", False), ("fattree:4", True), ("tree:2,2", True)])
def test_every_end_of_every_link_gets_the_mtu(spec, boxes):
    topo = SpecTopo(spec=parse(spec), bw=(100.0,) * parse(spec).levels, shaper_boxes=boxes, host_queue=1000,
                    switch_queue=100, mtu=3000)
    ends = [p for _, _, info in topo.links(withInfo=True) for p in (info["params1"], info["params2"])]
    assert ends and all(p["mtu"] == 3000 for p in ends)
    plain = SpecTopo(spec=parse(spec), bw=(100.0,) * parse(spec).levels)
    assert all("mtu" not in info["params1"] for _, _, info in plain.links(withInfo=True))


def test_an_mtu_the_links_cannot_carry_is_refused_before_anything_starts(monkeypatch):
    import emulation.net.kernel_probes as probes
    monkeypatch.setattr(probes, "kernel_datapath_available", lambda: False)
    with pytest.raises(OptionError, match=r"--mtu 4000 is more than the userspace switch's AF_XDP ports carry.*"
                                          r"valid 576-3690 here, up to 9000 with the kernel datapath"):
        check_mtu(RunConfig(topology="star:4", algo="ring", mtu=4000))
    check_mtu(RunConfig(topology="star:4", algo="ring", mtu=3690))
    check_mtu(RunConfig(topology="star:4", algo="ring", mtu=9000, local=True))  # loopback: no links
    monkeypatch.setattr(probes, "kernel_datapath_available", lambda: True)
    check_mtu(RunConfig(topology="star:4", algo="ring", mtu=9000))
    with pytest.raises(OptionError, match="more than the userspace switch"):
        check_mtu(RunConfig(topology="star:4", algo="ring", mtu=9000, datapath="user"))
    with pytest.raises(OptionError, match=r"--mtu 3500 does not fit --tunnel gre.*up to 1450 bytes"):
        check_mtu(RunConfig(topology="star:4", algo="ring", cluster="localhost,otherhost", tunnel="gre"))
    with pytest.raises(OptionError, match=r"--mtu 100 is out of range"):
        validate(RunConfig(topology="star:4", algo="ring", mtu=100))


def test_cli_refuses_a_bad_mtu_in_one_line():
    r = run_dmlbed("run", "--topo", "star:4", "--algo", "ring", "--mtu", "20000")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--mtu" in r.stderr


def test_a_calibration_of_another_mtu_is_refused(tmp_path):
    fits = (LevelFit(0, 1e-4, 12e6),)
    for name, meta in (("new", {"mtu": 3500}), ("legacy", {})):
        (tmp_path / f"{name}.json").write_text(json.dumps(Calibration("star:4", (100.0,), "user", fits, fits,
                                                                      meta).to_dict()))
    assert load(str(tmp_path / "new.json"), "star:4", (100.0,), mtu=3500).topology == "star:4"
    with pytest.raises(CalibrationError, match="measured with --mtu 3500, this run uses 1500"):
        load(str(tmp_path / "new.json"), "star:4", (100.0,), mtu=1500)
    with pytest.raises(CalibrationError, match="measured with --mtu 1500"):  # written before --mtu: 1500
        load(str(tmp_path / "legacy.json"), "star:4", (100.0,), mtu=3500)
    assert load(str(tmp_path / "legacy.json"), "star:4", (100.0,)).topology == "star:4"  # theory: no MTU


def test_simulated_headers_follow_the_mtu(tmp_path):
    ratios = {}
    for mtu in (1500, 3500):
        r = run_dmlbed("simulate", "--topo", "star:4", "--algo", "ring", "--bw", "100", "--mtu", str(mtu),
                       "--out", str(tmp_path / str(mtu)), "--json")
        assert r.returncode == 0, r.stderr[-2000:]
        s = json.loads(r.stdout)
        assert s["model_settings"]["mtu"] == mtu and s["model_settings"]["goodput"] == pytest.approx(goodput(mtu))
        ratios[mtu] = s["gst_ratio"]
    assert ratios[1500] == pytest.approx(1514 / 1448, rel=1e-3) and ratios[3500] == pytest.approx(3514 / 3448, rel=1e-3)


@pytest.mark.emulation
def test_the_emulated_links_carry_the_mtu_asked_for():
    r = run_dmlbed("net", "star:2", "--bw", "50", "--check", "--json", "--duration", "2", "--mtu", "1500")
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["tcp"]["mtu"] == 1500 and report["tcp"]["applied"]["mtu"] == 1500
    # full-size segments crossed the switch (a frame it cannot carry leaves TCP with nothing through)
    assert all(f["measured_mbps"] > 0.5 * 50 for f in report["flows"]), report["flows"]
    assert report["fidelity_min"] == pytest.approx(min(wire_bytes(f["measured_mbps"], 1500) / 50
                                                       for f in report["flows"]), rel=1e-3)


def test_ingress_devices_take_the_links_frames():
    from emulation.core.shaping import ingress_netem_commands
    alone = ingress_netem_commands("h0-eth0", "ifb0", 50, "delay 1ms", mtu=3500)
    assert "ip link set ifb0 txqueuelen 50 mtu 3500 up" in alone
    assert alone[-1].endswith("action mirred egress redirect dev ifb0") and "ingress" in alone[-2]


def test_a_hosts_tcp_skbs_hold_its_nic_no_longer_than_its_tsq_budget():
    """TCP makes GSO skbs whatever the device offers: at low rates each is capped to one frame (a 64 KB skb held a
    5 Mbit/s NIC for 105 ms, and BML's queues of them for seconds), at high rates it keeps the kernel's 64 KB."""
    assert gso_bytes(2.5, 3500) == 3500 and gso_bytes(1, 1500) == 1500 and gso_bytes(5, 3500) < 2 * 3500
    assert gso_bytes(25, 3500) == int(25e6 / 8 * GSO_HOLD_S) and gso_bytes(1000, 3500) == 65536
    assert offloads_off_command("h0-eth0", gso_bytes(2.5, 3500)).endswith("ip link set dev h0-eth0 gso_max_size 3500")
    assert "gso_max_size" not in offloads_off_command("x0-eth0")
