"""One lifecycle for every command that brings hosts up (run, launch, bench, calibrate, net): each takes the
network lock once and writes its summary once, when it succeeds and when its hosts fail to come up."""

import contextlib
import json
import os
import sys

import pytest

from helpers import keep_signal_handlers  # noqa: F401 (autouse: main() installs signal handlers)

from emulation.commands.cli import main
from emulation.run import lifecycle

COMMANDS = {
    "run": (["run", "--topo", "star:2", "--algo", "ring", "--model", "mlp:4K", "--iters", "2"], "summary.json"),
    "launch": (["launch", "--topo", "star:2", "--time-limit", "120"], "summary.json"),
    "bench": (["bench", "--topo", "star:2", "--algo", "ring", "--sizes", "4K", "--reps", "1", "--warmup", "0"],
              "bench.json"),
    "calibrate": (["calibrate", "--topo", "star:2", "--reps", "3", "--warmup", "0"], "calibration.json"),
    "net": (["net", "star:2", "--check", "--duration", "1"], "net.json"),
}
LOCAL = ("run", "launch", "bench", "calibrate")  # net has no loopback form: its success path is an emulation test


@pytest.fixture
def counted(monkeypatch):
    """Counts of lock acquisitions and of summary writes (by file name) the lifecycle makes."""
    counts = {"locks": 0, "writes": []}
    real_lock, real_write = lifecycle.network_lock, lifecycle.write_atomic

    @contextlib.contextmanager
    def lock(network):
        counts["locks"] += 1
        with real_lock(network):
            yield

    def write(path, text):
        counts["writes"].append(os.path.basename(path))
        real_write(path, text)

    monkeypatch.setattr(lifecycle, "network_lock", lock)
    monkeypatch.setattr(lifecycle, "write_atomic", write)
    return counts


def argv(name, out, local=True):
    args, _ = COMMANDS[name]
    args = args + ["--out", str(out), "--json"] + (["--local"] if local and name in LOCAL else [])
    return args + (["--", sys.executable, "-c", "pass"] if name == "launch" else [])


@pytest.mark.parametrize("name", LOCAL)
def test_a_command_that_succeeds_locks_once_and_writes_its_summary_once(name, tmp_path, counted, capsys):
    rc = main(argv(name, tmp_path / "out"))
    assert rc == 0, capsys.readouterr().err[-2000:]
    assert counted["locks"] == 1 and counted["writes"] == [COMMANDS[name][1]]
    written = json.load(open(tmp_path / "out" / COMMANDS[name][1]))
    assert written.get("error") is None


class FailingHosts:
    """Hosts whose bring-up fails (a switch that never gets programmed)."""

    def __init__(self, network, log):
        pass

    def __enter__(self):
        raise RuntimeError("switches not programmed within 90s: s0")

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_command_whose_hosts_fail_locks_once_and_still_writes_its_summary_once(name, tmp_path, counted,
                                                                                 monkeypatch, capsys):
    if name == "net" and os.geteuid() != 0:
        pytest.skip("dmlbed net needs root")
    monkeypatch.setattr(lifecycle, "hosts_for", FailingHosts)
    rc = main(argv(name, tmp_path / "out", local=name != "net"))
    assert rc == 1, capsys.readouterr().err[-2000:]
    assert counted["locks"] == 1 and counted["writes"] == [COMMANDS[name][1]]
    written = json.load(open(tmp_path / "out" / COMMANDS[name][1]))
    assert "switches not programmed" in written["error"]
    if name == "run":  # how far it got, and no verdict on timings it never measured
        assert written["hosts_up"] is False and written["iterations"] == 0
        assert written["fidelity"]["verdict"] == "not measured"


def test_a_bug_in_the_body_is_raised_after_the_summary_is_written(tmp_path, monkeypatch):
    from emulation.run.options import RunConfig
    from emulation.run.validation import check_network
    monkeypatch.setattr(lifecycle, "hosts_for", lambda network, log: contextlib.nullcontext(None))
    network = check_network(RunConfig(topology="star:2", local=True))
    life = lifecycle.Lifecycle(network, lambda m: None, str(tmp_path / "s.json"))

    def body(life):
        raise KeyError("a bug")

    with pytest.raises(KeyError):
        life.run(body, lambda life: {"error": life.error})
    assert json.load(open(tmp_path / "s.json"))["error"] == "KeyError: 'a bug'" and life.writes == 1
