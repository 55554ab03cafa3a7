"""The rank fork server: ranks forked from one process that imported torch once, with their exit codes, stderr,
sessions, command lines and network namespaces as if each had been started by itself."""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from emulation.run.forkclient import ForkServer, ForkServerError, rank_start
from helpers import ROOT, run_dmlbed

PROBE = textwrap.dedent("""
    import os, sys
    mode = sys.argv[1]
    print("session leader:", os.getsid(0) == os.getpid(), file=sys.stderr)
    print("netns:", os.readlink("/proc/self/ns/net"), file=sys.stderr)
    print("cmdline:", open("/proc/self/cmdline").read().replace("\\0", " "), file=sys.stderr)
    if mode == "exit":
        sys.exit(int(sys.argv[2]))
    if mode == "raise":
        raise RuntimeError("the probe failed on purpose")
    if mode == "signal":
        os.kill(os.getpid(), int(sys.argv[2]))
""")


@pytest.fixture
def server(tmp_path, monkeypatch):
    """A fork server that can import the probe module from tmp_path."""
    (tmp_path / "fork_probe.py").write_text(PROBE)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    s = ForkServer(ROOT, str(tmp_path / "server.stderr")).start()
    yield s
    s.close()
    s.proc.wait(timeout=30)


def run_probe(server, tmp_path, name, *args, netns=None):
    """Fork the probe with args; (exit code, its stderr)."""
    err = tmp_path / f"{name}.stderr"
    rank = server.fork("fork_probe", list(args), str(err), netns)
    code = rank.wait(timeout=60)
    return code, err.read_text()


def test_forked_ranks_report_exit_codes_signals_and_tracebacks(server, tmp_path):
    assert run_probe(server, tmp_path, "ok", "exit", "0")[0] == 0
    code, err = run_probe(server, tmp_path, "three", "exit", "3")
    assert code == 3
    assert "session leader: True" in err  # stopped as a process group, like a rank started in its own session
    assert "-m fork_probe exit 3" in err  # ps and /proc show the rank, not the server
    code, err = run_probe(server, tmp_path, "raise", "raise")
    assert code == 1 and "RuntimeError: the probe failed on purpose" in err
    assert run_probe(server, tmp_path, "killed", "signal", str(int(signal.SIGKILL)))[0] == -signal.SIGKILL
    rank = server.fork("no_such_module_here", [], str(tmp_path / "missing.stderr"), None)
    assert rank.wait(timeout=60) == 1 and "No module named" in (tmp_path / "missing.stderr").read_text()


def test_the_server_leaves_after_its_last_rank(server, tmp_path):
    rank = server.fork("fork_probe", ["exit", "0"], str(tmp_path / "a.stderr"), None)
    server.close()
    assert rank.wait(timeout=60) == 0
    assert server.proc.wait(timeout=30) == 0
    with pytest.raises(ForkServerError):
        server.fork("fork_probe", ["exit", "0"], str(tmp_path / "b.stderr"), None)


@pytest.mark.skipif(os.geteuid() != 0, reason="entering another network namespace needs root")
def test_a_forked_rank_enters_its_hosts_network_namespace(server, tmp_path):
    holder = subprocess.Popen(["unshare", "--net", "sleep", "60"])
    try:
        import time
        deadline = time.monotonic() + 10
        mine = os.readlink("/proc/self/ns/net")
        while os.readlink(f"/proc/{holder.pid}/ns/net") == mine and time.monotonic() < deadline:
            time.sleep(0.05)
        theirs = os.readlink(f"/proc/{holder.pid}/ns/net")
        assert theirs != mine
        code, err = run_probe(server, tmp_path, "ns", "exit", "0", netns=holder.pid)
        assert code == 0 and f"netns: {theirs}" in err
        code, err = run_probe(server, tmp_path, "here", "exit", "0")
        assert f"netns: {mine}" in err
    finally:
        holder.kill()
        holder.wait()


def test_the_rank_start_method_is_validated(monkeypatch):
    monkeypatch.setenv("DMLBED_RANK_START", "spawn")
    with pytest.raises(ValueError, match="valid are fork, exec"):
        rank_start()
    r = run_dmlbed("run", "--topo", "star:2", "--algo", "ring", "--local", "--iters", "1",
                   env={**os.environ, "DMLBED_RANK_START": "spawn"})
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "DMLBED_RANK_START" in r.stderr


@pytest.mark.parametrize("start", ["fork", "exec"])
def test_a_run_starts_its_ranks_either_way_and_measures_them(tmp_path, start):
    r = run_dmlbed("run", "--topo", "star:3", "--algo", "ring", "--local", "--iters", "8", "--json",
                   "--out", str(tmp_path / start), env={**os.environ, "DMLBED_RANK_START": start})
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout)
    assert summary["correct"] and summary["rank_start"]["method"] == start
    assert summary["rank_start"]["first_iteration_s"] > 0
    memory = summary["rank_start"]["memory"]
    # sampled once every rank has finished an iteration: a fast loopback rank may have finished them all by then
    assert 1 <= memory["ranks_sampled"] <= 3 and 20 < memory["pss_mib_per_rank"] < 2000


def test_a_server_launched_ahead_serves_every_set_of_ranks_then_leaves(tmp_path, monkeypatch):
    """fork_server_ahead: launched before the hosts come up (its imports overlap the bring-up), it forks every set
    of ranks a bench or calibration starts, and is gone when its block ends, whether or not ranks ever came."""
    from emulation.run.hosts import LoopbackHosts
    from emulation.run.ranks import fork_server_ahead, start_ranks
    from workloads.rankconfig import RankConfig
    from workloads.runfolder import RankFiles
    (tmp_path / "fork_probe.py").write_text(PROBE)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    monkeypatch.setenv("DMLBED_RANK_START", "fork")
    with fork_server_ahead(RankFiles(str(tmp_path / "never"))) as unused:
        assert unused.proc.poll() is None
    assert unused.proc.poll() is not None  # hosts that failed to come up leave no server behind
    with fork_server_ahead(RankFiles(str(tmp_path / "workers"))) as server, LoopbackHosts() as hosts:
        for round in ("a", "b"):
            files = RankFiles(str(tmp_path / "workers" / round))
            procs = start_ranks(hosts, files, [RankConfig(rank=r, ranks=2) for r in range(2)], "fork_probe",
                                server)
            assert {r: p.wait(timeout=60) for r, p in procs.items()} == {0: 0, 1: 0}
            assert "session leader: True" in open(files.stderr(0)).read()
        assert server.proc.poll() is None  # still there for the next set
    assert server.proc.poll() is not None
    assert os.path.exists(tmp_path / "workers" / "forkserver.stderr")
