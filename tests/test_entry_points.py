"""Entry points Mininet and Ryu users know: `mn --custom emulation/net/topos.py`, ryu-manager with the app, and the
Vagrant VM definition (validated where vagrant is installed)."""

import os
import shutil
import signal
import subprocess
import sys

import pytest

from emulation.net.controller_process import free_ports
from helpers import ROOT, wait_listening

VENV_BIN = os.path.dirname(sys.executable)


def test_vagrant_provisioning_runs_the_project_setup():
    provision = open(os.path.join(ROOT, "vagrant", "provision.sh")).read()
    assert "scripts/setup.sh" in provision
    vagrantfile = open(os.path.join(ROOT, "vagrant", "Vagrantfile")).read()
    assert "provision.sh" in vagrantfile and "cpus = 2" in vagrantfile and "4096" in vagrantfile
    assert '"..", "/vagrant"' in vagrantfile


@pytest.mark.skipif(not shutil.which("vagrant"), reason="vagrant is not installed (apt-get install vagrant)")
def test_vagrant_validate():
    r = subprocess.run(["vagrant", "validate", "--ignore-provider"], cwd=os.path.join(ROOT, "vagrant"),
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, VAGRANT_CHECKPOINT_DISABLE="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "validated successfully" in r.stdout


def test_dmlbed_mn_checks_a_remote_controller_without_decoding_its_hello():
    """Ryu greets with a binary OpenFlow HELLO; its transaction id 0x9a... killed `mn` in Mininet's telnet check (CI).
    dmlbed-mn's `remote` controller connects and reads nothing, so any HELLO passes and a closed port warns."""
    import socket
    import threading
    from emulation.net import topos
    from emulation.net.nodes import ConnectCheckedController
    assert topos.controllers["remote"] is ConnectCheckedController
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def greet():
        conn, _ = server.accept()
        conn.sendall(bytes([0x04, 0x00, 0x00, 0x10, 0x9a, 0xff, 0xfe, 0x80]))
        conn.close()
    greeter = threading.Thread(target=greet, daemon=True)
    greeter.start()
    try:
        assert ConnectCheckedController.isListening(None, "127.0.0.1", port) is True
        greeter.join(timeout=10)  # a close while accept() blocks would leave the port listening
    finally:
        server.close()
    assert ConnectCheckedController.isListening(None, "127.0.0.1", port) is False


@pytest.mark.emulation
@pytest.mark.parametrize("spec,mn_topo", [("star:4", "star,4"), ("bcube:2,2", "bcube,2,2"), ("tree:2,2", "tree,2,2")])
def test_mn_custom_under_the_project_controller(spec, mn_topo, tmp_path):
    """`sudo dmlbed-mn --topo ...` (Mininet's mn with dmlbed's topologies) + `dmlbed-ryu-manager controllers/app.py`:
    every host pings every other (relayed ones included for BCube)."""
    port, = free_ports(1)
    status = tmp_path / "status.json"
    ctl = subprocess.Popen([os.path.join(VENV_BIN, "dmlbed-ryu-manager"), "--ofp-listen-host", "127.0.0.1",
                            "--ofp-tcp-listen-port", str(port), "controllers/app.py"], cwd=ROOT,
                           env=dict(os.environ, DMLBED_TOPOLOGY=spec, DMLBED_STATUS=str(status)),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_listening(port)
        r = subprocess.run([os.path.join(VENV_BIN, "dmlbed-mn"), "--topo", mn_topo,
                            "--controller", f"remote,ip=127.0.0.1,port={port}",
                            "--switch", "ovs,datapath=user,protocols=OpenFlow13", "--link", "tc,bw=10",
                            "--test", "pingall"], cwd=ROOT, capture_output=True, text=True, timeout=300)
        out = r.stdout + r.stderr
        assert "Results: 0% dropped" in out, out[-3000:]
    finally:
        os.killpg(ctl.pid, signal.SIGTERM)
        ctl.wait(timeout=10)
