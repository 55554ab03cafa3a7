"""The user's own controller: one the user started (--controller remote:IP:PORT, as `mn --controller remote`) or
their Ryu app run by dmlbed (--controller-app FILE.py); dmlbed reports reachability and PacketIns for either, and
the results say which controller ran."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from emulation.net.controller_process import free_ports
from helpers import ROOT, run_dmlbed, wait_listening
from test_emulation import leftovers

pytestmark = pytest.mark.emulation

NORMAL_APP = textwrap.dedent("""
    from ryu.base import app_manager
    from ryu.controller import ofp_event
    from ryu.controller.handler import CONFIG_DISPATCHER, set_ev_cls
    from ryu.ofproto import ofproto_v1_3


    class Normal(app_manager.RyuApp):
        \"\"\"Every switch forwards as an ordinary learning switch (OFPP_NORMAL): no PacketIn.\"\"\"
        OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

        @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
        def features(self, ev):
            dp = ev.msg.datapath
            ofp, parser = dp.ofproto, dp.ofproto_parser
            actions = [parser.OFPActionOutput(ofp.OFPP_NORMAL)]
            dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=0, match=parser.OFPMatch(),
                                          instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS,
                                                                                     actions)]))
""")


@pytest.fixture
def learning_switch_controller(tmp_path):
    """Ryu's own reactive L2 learning switch, started by the test as a user would (PacketIns by design)."""
    port = free_ports(1)[0]
    log = open(tmp_path / "ryu.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "controllers.ryu_manager", "--ofp-listen-host", "127.0.0.1",
                             "--ofp-tcp-listen-port", str(port), "ryu.app.simple_switch_13"], cwd=ROOT,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    wait_listening(port)
    yield proc, port
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=10)
    log.close()


def test_net_check_under_a_controller_the_user_started(learning_switch_controller):
    proc, port = learning_switch_controller
    r = run_dmlbed("net", "star:4", "--bw", "20", "--check", "--duration", "2", "--controller",
                   f"remote:127.0.0.1:{port}", "--json", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["controller"] == {"kind": "remote", "address": f"127.0.0.1:{port}"}
    assert report["pairs_reachable"] == report["pairs_tested"] > 0
    assert report["packet_in"] > 0  # a learning switch learns from PacketIns: reported, and allowed for it
    assert report["fidelity_min"] > 0.5
    assert proc.poll() is None  # the user's controller is the user's to stop
    assert leftovers("star:4") == []


def test_a_run_and_a_net_check_under_the_users_app(tmp_path):
    app = tmp_path / "normal_app.py"
    app.write_text(NORMAL_APP)
    r = run_dmlbed("net", "star:4", "--bw", "20", "--check", "--duration", "2", "--controller-app", str(app),
                   "--json", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["controller"] == {"kind": "app", "app": str(app)} and report["packet_in"] == 0
    assert report["pairs_reachable"] == report["pairs_tested"] > 0
    r = run_dmlbed("run", "--topo", "star:4", "--algo", "ring", "--model", "mlp:1MB", "--iters", "3", "--bw", "50",
                   "--controller-app", str(app), "--out", str(tmp_path / "run"), "--json", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout)
    assert summary["correct"] and summary["controller"]["kind"] == "app" and summary["packet_in"] == 0
    assert leftovers("star:4") == []
    assert not [p for p in os.listdir("/proc") if p.isdigit() and str(app) in _cmdline(p)]  # its ryu-manager stopped


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline") as f:
            return f.read().replace("\0", " ")
    except OSError:
        return ""
