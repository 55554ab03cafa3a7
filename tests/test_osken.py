"""dmlbed's controller app under os-ken on Python 3.12 (where Ryu 4.34 cannot install), launched the way dmlbed
launches it, programs a real Open vSwitch bridge: every rule in, confirmed by a barrier, no PacketIn."""

import json
import os
import signal
import subprocess
import time

import pytest

from emulation.net.controller_process import free_ports
from emulation.core.topology import parse
from helpers import ROOT
from test_rules import OSKEN_PYTHON

pytestmark = pytest.mark.emulation
BRIDGE = "dmlbedosk0"  # not a name any topology gives a switch


@pytest.mark.skipif(not os.path.exists(OSKEN_PYTHON), reason="no Python 3.12 with os-ken (make setup installs it "
                                                               "where a python3.12 exists)")
def test_the_app_programs_a_switch_under_os_ken(tmp_path):
    switch = parse("star:3").switches[0]
    port = free_ports(1)[0]
    status = tmp_path / "status.json"
    env = {**os.environ, "DMLBED_TOPOLOGY": "star:3", "DMLBED_STATUS": str(status), "PYTHONPATH": ROOT}
    log = open(tmp_path / "controller.log", "w")
    proc = subprocess.Popen([OSKEN_PYTHON, "-m", "controllers.ryu_manager", "--ofp-listen-host", "127.0.0.1",
                             "--ofp-tcp-listen-port", str(port), "controllers.app"], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        subprocess.run(["ovs-vsctl", "add-br", BRIDGE, "--", "set", "bridge", BRIDGE, "datapath_type=netdev",
                        f"other-config:datapath-id={switch.dpid_hex}", "protocols=OpenFlow13", "--",
                        "set-controller", BRIDGE, f"tcp:127.0.0.1:{port}"], check=True)
        deadline, state = time.monotonic() + 60, {}
        while time.monotonic() < deadline and not state.get("installed"):
            time.sleep(0.3)
            if status.exists():
                state = json.loads(status.read_text())["switches"].get(switch.dpid_hex, {})
        assert state.get("installed"), (tmp_path / "controller.log").read_text()[-2000:]
        flows = subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", BRIDGE], capture_output=True,
                               text=True).stdout
        assert state["flows"] == 4 and flows.count("priority=100") == 3 and "actions=CONTROLLER" in flows
        assert json.loads(status.read_text())["packet_in"] == 0
    finally:
        subprocess.run(["ovs-vsctl", "--if-exists", "del-br", BRIDGE])
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        log.close()
