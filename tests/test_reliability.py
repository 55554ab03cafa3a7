"""Reliability: one network at a time, every signal handled, sizes checked first, inputs typed, inactivity
timeouts, results that cannot mislead. Loopback runs need no root; the lock test with the real state folder
is an emulation test."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import types

import pytest

from emulation.net.lock import NetworkBusy, NetworkLock
from emulation.core.topology import parse
from emulation.run.resources import AFXDP_PORT_BYTES, ResourceError, afxdp_port_budget, check_memory, memory_needed
from emulation.run.validation import afxdp_ports, plain_links
from helpers import ROOT, run_dmlbed, wait_for_iterations
from workloads.transport import send_all

HOLD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from emulation.net.lock import NetworkLock
    with NetworkLock(root={lockroot!r}):
        print("held", flush=True)
        time.sleep(60)
""")


def hold_lock(lockroot):
    """A process holding the network lock (as a live run does)."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD.format(root=ROOT, lockroot=str(lockroot))],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_lock_names_its_holder_and_frees_when_the_holder_dies(tmp_path):
    holder = hold_lock(tmp_path)
    try:
        with pytest.raises(NetworkBusy) as exc:
            with NetworkLock(root=str(tmp_path)):
                pass
        assert f"pid {holder.pid}" in str(exc.value) and "--wait" in str(exc.value)
        with pytest.raises(NetworkBusy):
            with NetworkLock(root=str(tmp_path), wait=True, timeout_s=1.0):
                pass
    finally:
        holder.kill()
        holder.wait()
    with NetworkLock(root=str(tmp_path)):  # the kernel released a dead holder's lock
        with NetworkLock(root=str(tmp_path)):  # re-entrant within one process
            pass


def test_wait_queues_behind_the_holder(tmp_path):
    holder = hold_lock(tmp_path)
    threading.Timer(1.0, holder.kill).start()
    t0 = time.monotonic()
    with NetworkLock(root=str(tmp_path), wait=True, timeout_s=30):
        assert time.monotonic() - t0 >= 0.9
    holder.wait()


@pytest.mark.emulation
def test_second_emulated_run_refuses_while_one_holds_the_network(tmp_path):
    from emulation.net.lock import LOCK_ROOT
    holder = hold_lock(LOCK_ROOT)
    try:
        for args in (["run", "--topo", "star:2", "--algo", "ring", "--iters", "2", "--out", str(tmp_path / "r")],
                     ["net", "star:2", "--bw", "50", "--check"]):
            r = run_dmlbed(*args, timeout=60)
            assert r.returncode == 75, r.stderr  # busy, apart from bad input's 2: a script may retry
            assert len(r.stderr.strip().splitlines()) == 1 and f"pid {holder.pid}" in r.stderr
        assert not (tmp_path / "r").exists()
    finally:
        holder.kill()
        holder.wait()


def test_memory_is_checked_before_anything_starts(tmp_path):
    assert memory_needed(2, 10, afxdp_ports=4) > memory_needed(2, 10, afxdp_ports=0)
    assert memory_needed(2, 10, afxdp_ports=270) - memory_needed(2, 10, afxdp_ports=4) == 266 * AFXDP_PORT_BYTES
    assert memory_needed(9, 10, 0, start="exec") > memory_needed(9, 10, 0, start="fork")
    with pytest.raises(ResourceError, match="GiB available"):
        check_memory(64, 500_000_000, 64, available=8 << 30)
    check_memory(9, 250_000, 9, available=8 << 30)
    r = run_dmlbed("run", "--topo", "star:64", "--algo", "ps", "--model", "mlp:500000000", "--local",
                   "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "memory" in r.stderr, r.stderr
    assert not (tmp_path / "x").exists()


def test_the_demo_fits_the_vagrant_vm():
    """The VM's kernel datapath needs no userspace switch; its 9 forked LeNet-5 ranks fit what the VM has free."""
    vagrantfile = open(os.path.join(ROOT, "vagrant", "Vagrantfile")).read()
    vm_mib = int(re.search(r"memory\s*=\s*(\d+)", vagrantfile).group(1))
    available = int((vm_mib << 20) * 0.88)  # MemAvailable of a freshly booted Debian VM of that size (measured 3.6 of 4 GiB)
    check_memory(9, 61_706 * 4, afxdp_ports=0, available=available)
    with pytest.raises(ResourceError):
        check_memory(9, 61_706 * 4, afxdp_ports=9, available=available, start="exec")


def test_the_userspace_switchs_af_xdp_ports_are_counted_before_a_network_comes_up():
    """Each AF_XDP port pins a 64 MiB umem: fattree:6's 270 switch ports, were they all AF_XDP, would not fit a
    24 GiB machine beside 54 ranks (the OOM killer took ovs-vswitchd), so its highest links use plain ports until
    the switch's AF_XDP ports fit its share, and the run fits; fattree:4 keeps AF_XDP everywhere; a refusal names
    the ports and the way out."""
    fat6 = parse("fattree:6")
    assert fat6.ports_on_switches() == 270 and parse("bcube:8,2").ports_on_switches() == 128
    available = 22 << 30
    budget = afxdp_port_budget(available)
    assert 54 < budget < 270 and plain_links(parse("fattree:4"), budget) == ()
    plain = plain_links(fat6, budget)
    network = types.SimpleNamespace(topo=fat6, emulated=True, datapath="user", plain_links=plain)
    assert budget - 1 <= afxdp_ports(network) <= budget
    core = {(l.lower, l.upper) for l in fat6.links if l.level == max(l.level for l in fat6.links)}
    assert core <= set(plain), "the core links go plain first"
    check_memory(54, 61_706 * 4, afxdp_ports(network), available=available)
    with pytest.raises(ResourceError, match="270 AF_XDP ports .* kernel datapath"):
        check_memory(54, 61_706 * 4, fat6.ports_on_switches(), available=available)
    with pytest.raises(ResourceError, match="this network needs about .* 2048 AF_XDP ports"):
        check_memory(0, 0, 2048, available=available)


def test_host_cap_answers_at_once(tmp_path):
    t0 = time.monotonic()
    r = run_dmlbed("run", "--topo", "bcube:2,12", "--algo", "bml", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "at most" in r.stderr and time.monotonic() - t0 < 30


def local_run(out, *extra):
    return subprocess.Popen([sys.executable, "-m", "emulation.commands.cli", "run", "--topo", "star:3", "--algo",
                             "ring", "--model", "mlp:2M", "--iters", "500", "--batch", "8", "--local", "--json",
                             "--out", str(out), *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_every_signal_ends_a_run_the_same_way(tmp_path, sig):
    out = tmp_path / "run"
    proc = local_run(out)
    wait_for_iterations(str(out), 0, 3, proc)
    proc.send_signal(sig)
    proc.send_signal(sig)  # a second signal during teardown does not abort it
    _, stderr = proc.communicate(timeout=120)
    name = signal.Signals(sig).name
    assert proc.returncode == 128 + sig, stderr[-2000:]
    assert f"interrupted by {name}" in stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["error"] == f"interrupted by {name}" and summary["completed"] is False
    assert summary["iterations"] >= 3
    time.sleep(0.5)
    marker = str(out)
    alive = [p for p in os.listdir("/proc") if p.isdigit() and marker in _cmdline(p) and "workloads.worker" in _cmdline(p)]
    assert alive == []


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def test_results_of_an_earlier_run_are_not_replaced_without_force(tmp_path):
    out = tmp_path / "run"
    args = ["run", "--topo", "star:2", "--algo", "ring", "--model", "mlp:100K", "--iters", "3", "--local", "--json",
            "--out", str(out)]
    first = run_dmlbed(*args, timeout=300)
    assert first.returncode == 0, first.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] is True
    again = run_dmlbed(*args, timeout=300)
    assert again.returncode == 2 and "--force" in again.stderr and len(again.stderr.strip().splitlines()) == 1
    assert json.loads((out / "summary.json").read_text()) == summary  # untouched
    forced = run_dmlbed(*args, "--force", timeout=300)
    assert forced.returncode == 0, forced.stderr
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]


@pytest.mark.parametrize("body,fragment", [
    ("runs:\n  - {topo: 'star:2', algo: ring, batch: '32'}\n", "batch"),
    ("runs:\n  - {topo: 'star:2', algo: ring, iters: .nan}\n", "iters"),
    ("runs:\n  - {topo: 'star:2', algo: ring, bw: 1e400}\n", "bandwidth inf"),
    ("runs:\n  - {topo: 'star:2', algo: ring, itres: 3}\n", "did you mean 'iters'"),
    ("runs:\n  - {topo: 'star:2', algo: ring, label: a}\n  - {topo: 'star:3', algo: ring, label: a}\n", "label"),
])
def test_bad_compare_configs_are_one_line_exit_2(tmp_path, body, fragment):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("name: t\n" + body)
    r = run_dmlbed("compare", str(cfg), "--local", "--out", str(tmp_path / "out"))
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and fragment in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_send_timeout_measures_inactivity_not_the_whole_transfer():
    a, b = socket.socketpair()
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
    a.settimeout(0.5)
    got = []

    def slow_reader():  # drains 4 MB in about 2.5 s: longer than the timeout, never idle for it
        while sum(got) < 4 << 20:
            time.sleep(0.02)
            got.append(len(b.recv(65536)))

    t = threading.Thread(target=slow_reader)
    t.start()
    t0 = time.monotonic()
    send_all(a, memoryview(bytes(4 << 20)))
    t.join()
    assert time.monotonic() - t0 > 0.5 and sum(got) == 4 << 20
    with pytest.raises(socket.timeout):  # nobody reads: no byte moves for 0.5 s
        send_all(a, memoryview(bytes(8 << 20)))
    a.close()
    b.close()


@pytest.mark.emulation
def test_closing_the_terminal_tears_an_emulated_run_down(tmp_path):
    from test_emulation import leftovers
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "emulation.commands.cli", "run", "--topo", "star:3", "--algo",
                             "ring", "--model", "mlp:100K", "--iters", "500", "--bw", "50", "--json", "--out", str(out)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_iterations(str(out), 0, 2, proc, timeout=180)
    proc.send_signal(signal.SIGHUP)
    proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGHUP
    summary = json.loads((out / "summary.json").read_text())
    assert summary["error"] == "interrupted by SIGHUP" and summary["completed"] is False
    assert leftovers("star:3") == []
    assert not [p for p in os.listdir("/proc") if p.isdigit() and str(out) in _cmdline(p)]
