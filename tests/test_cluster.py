"""Mininet Cluster Edition for real: a second "server" reached over SSH at 127.0.0.1 (a private sshd with a key
made for the test), hosts on both, traffic through SSH tunnels, and nothing left behind."""

import json
import os

import pytest

from helpers import run_dmlbed
from loopback_ssh import available, loopback_sshd
from test_emulation import leftovers

pytestmark = pytest.mark.emulation


def tunnel_leftovers():
    """Tap devices, ssh clients and sshd sessions a cluster run could leave."""
    found = [f"interface {i}" for i in os.listdir("/sys/class/net") if i.startswith("tap")]
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "Tunnel=Ethernet" in cmd or ("ssh" in cmd and "root@127.0.0.1" in cmd):
            found.append(f"process {pid}: {cmd[:80]}")
    return found


@pytest.fixture(scope="module")
def ssh_env():
    reason = available()
    if reason:
        pytest.skip(f"cluster test skipped: {reason}")
    with loopback_sshd() as env:
        yield dict(os.environ, **env)


def test_net_check_across_two_servers(ssh_env):
    r = run_dmlbed("net", "star:4", "--bw", "50", "--cluster", "127.0.0.1", "--check", "--json", "--duration", "3",
                   env=ssh_env)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads(r.stdout)
    assert report["pairs_reachable"] == report["pairs_tested"] == 12, report.get("unreachable")
    assert report["packet_in"] == 0
    cluster = report["cluster"]
    assert cluster["hosts_per_server"] == {"localhost": 2, "127.0.0.1": 2}
    assert cluster["tunnel"] == "ssh"
    assert cluster["tunnel_flows"] > 0 and cluster["local_flows"] >= 0
    for flow in report["flows"]:
        assert "error" not in flow, flow
        assert 0 < flow["measured_mbps"] and flow["fidelity"] <= 1.1, flow
    # The tunnels carry real traffic at a rate near the shaped one (a broken tunnel gives ~0 or an error).
    assert cluster["tunnel_fidelity_min"] > 0.5, report["flows"]
    assert leftovers("star:4") == [] and tunnel_leftovers() == []


def test_training_run_across_two_servers_is_correct(ssh_env, tmp_path):
    out = tmp_path / "run"
    r = run_dmlbed("run", "--topo", "star:4", "--algo", "ring", "--model", "mlp:1M", "--iters", "3", "--bw", "50",
                   "--cluster", "127.0.0.1", "--out", str(out), "--json", env=ssh_env)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout)
    assert s["completed"] and s["correct"] and s["sum_verified"]
    assert s["cluster"]["hosts_per_server"] == {"localhost": 2, "127.0.0.1": 2}
    tunnels = s["fidelity"]["tunnels"]
    assert tunnels["achieved_mbps"] > 0 and 0 < tunnels["fidelity"] <= 1.1, tunnels
    assert leftovers("star:4") == [] and tunnel_leftovers() == []


def test_unreachable_server_is_refused_before_anything_starts():
    # No sshd answers on this port: the precheck names the server and what it needs; nothing is left.
    env = dict(os.environ, DMLBED_SSH_OPTIONS="-p 9 -o ConnectTimeout=3 -o StrictHostKeyChecking=no")
    r = run_dmlbed("net", "star:4", "--bw", "50", "--cluster", "127.0.0.1", "--check", env=env)
    assert r.returncode == 1
    assert "cluster server 127.0.0.1 is not ready" in r.stderr and "passwordless ssh" in r.stderr
    assert leftovers("star:4") == [] and tunnel_leftovers() == []


def test_cluster_and_local_are_exclusive():
    r = run_dmlbed("run", "--topo", "star:4", "--algo", "ring", "--local", "--cluster", "127.0.0.1")
    assert r.returncode == 2 and "give one of them" in r.stderr and len(r.stderr.strip().splitlines()) == 1
