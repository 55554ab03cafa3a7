"""A matrix's rows as Dask tasks (--scheduler): the same comparison as the rows in turn, rows that landed kept by
--resume, bad schedulers and folders refused before anything starts, a row's folder shipped home intact."""

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from emulation.backends.matrix_tasks import SchedulerError, Scheduler, packed, parse_scheduler, sees_folder, unpack, \
    waves, write_token
from helpers import ROOT, free_port, run_dmlbed

SMALL = """name: small
defaults: {mode: simulate, iters: 2}
sweep:
  bw: [100, 1000]
runs:
  - {label: ring, algo: ring, topo: "star:4"}
  - {label: ps, algo: ps, topo: "fattree:4"}
  - {label: hd, algo: hd, topo: "star:8"}
"""


def comparison(folder):
    """comparison.csv's rows without the folder they point at."""
    rows = list(csv.DictReader(open(os.path.join(folder, "comparison.csv"))))
    for r in rows:
        r["out"] = os.path.basename(r["out"])
    return rows


def test_scheduler_values_parse_and_bad_ones_say_what_is_valid(monkeypatch):
    monkeypatch.delenv("DMLBED_SCHEDULER", raising=False)
    assert parse_scheduler(None) is None and parse_scheduler("") is None
    assert parse_scheduler("local:2") == Scheduler(workers=2)
    assert parse_scheduler("tcp://10.0.0.5:8786") == Scheduler(address="tcp://10.0.0.5:8786")
    monkeypatch.setenv("DMLBED_SCHEDULER", "local:3")
    assert parse_scheduler(None) == Scheduler(workers=3)
    for bad in ("local:0", "local:x", "10.0.0.5:8786", "tcp://host", "http://h:1"):
        with pytest.raises(SchedulerError, match="give local:N"):
            parse_scheduler(bad)


def test_rows_taking_an_earlier_rows_figure_or_ports_wait_for_every_row_before_them():
    specs = [{}, {}, {"derived": {"bw": {}}}, {}, {"sibling": True}, {}]
    assert waves(specs) == [[0, 1], [2, 3], [4, 5]]
    assert waves([{"sibling": True}, {}]) == [[0, 1]]


def test_a_row_folder_ships_home_intact(tmp_path):
    row = tmp_path / "far" / "out" / "ring-bw100"
    (row / "workers").mkdir(parents=True)
    (row / "summary.json").write_text('{"gst": 1}')
    (row / "workers" / "rank-0.csv").write_text("a,b\n1,2\n")
    home = tmp_path / "home" / "out" / "ring-bw100"
    home.mkdir(parents=True)
    (home / "stale.txt").write_text("from before")
    unpack(packed(str(row)), str(home))
    assert sorted(os.listdir(home)) == ["summary.json", "workers"]
    assert (home / "workers" / "rank-0.csv").read_text() == "a,b\n1,2\n"
    token = write_token(str(tmp_path / "home" / "out"))
    assert sees_folder(str(tmp_path / "home" / "out"), token)
    assert not sees_folder(str(tmp_path / "far" / "out"), token)


def test_rows_on_two_local_workers_give_the_serial_comparison_and_resume_runs_only_what_is_missing(tmp_path):
    config = tmp_path / "small.yaml"
    config.write_text(SMALL)
    serial = run_dmlbed("compare", str(config), "--out", str(tmp_path / "serial"), "--json")
    spread = run_dmlbed("compare", str(config), "--out", str(tmp_path / "spread"), "--json", "--scheduler", "local:2")
    assert serial.returncode == 0 and spread.returncode == 0, spread.stderr[-2000:]
    assert comparison(tmp_path / "serial") == comparison(tmp_path / "spread")
    assert "6 rows sent to local:2" in spread.stderr
    records = tmp_path / "spread" / ".matrix"
    assert sorted(os.listdir(records)) == sorted(["matrix.json"] + [f"{n}-bw{b}.json" for n in ("ring", "ps", "hd")
                                                                    for b in (100, 1000)])
    os.remove(records / "ps-bw1000.json")  # as if the matrix had been stopped before that row landed
    kept = os.path.getmtime(tmp_path / "spread" / "ring-bw100" / "summary.json")
    again = run_dmlbed("compare", str(config), "--out", str(tmp_path / "spread"), "--json", "--resume",
                       "--scheduler", "local:2")
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resume: 5 of 6 rows landed before" in again.stderr and "1 row sent to local:2" in again.stderr
    assert os.path.getmtime(tmp_path / "spread" / "ring-bw100" / "summary.json") == kept
    assert comparison(tmp_path / "spread") == comparison(tmp_path / "serial")
    serial_again = run_dmlbed("compare", str(config), "--out", str(tmp_path / "serial"), "--json", "--resume")
    assert serial_again.returncode == 0 and "resume: 6 of 6 rows landed before" in serial_again.stderr
    assert comparison(tmp_path / "serial") == comparison(tmp_path / "spread")


def test_a_row_that_did_not_run_fails_the_matrix_and_says_how_to_run_it_again():
    from emulation.backends.matrix_rows import COLUMNS
    from emulation.backends.matrix_tasks import failed_row
    from emulation.commands.base import failed_rows, matrix_passed
    ran = {**dict.fromkeys(COLUMNS), "label": "a", "correct": True}
    lost = failed_row({"label": "b", "sweep": {"bw": 100}}, COLUMNS, "failed on host2: exit 1: out of memory")
    assert lost["bw"] == 100 and lost["correct"] is None
    assert matrix_passed({"rows": [ran]}) == 0 and failed_rows({"rows": [ran]}) is None
    assert matrix_passed({"rows": [ran, lost]}) == 1
    said = failed_rows({"rows": [ran, lost]})
    assert said.startswith("1 of 2 rows did not run (first: b: failed on host2") and "--resume" in said


def test_bad_schedulers_and_a_folder_of_another_config_are_refused_before_anything_starts(tmp_path):
    config = tmp_path / "small.yaml"
    config.write_text(SMALL)
    other = tmp_path / "other.yaml"
    other.write_text(SMALL.replace("name: small", "name: other"))
    assert run_dmlbed("compare", str(config), "--out", str(tmp_path / "a"), "--json").returncode == 0
    cases = [(("--resume",), "holds the rows of config 'small'", other, tmp_path / "a"),
             (("--scheduler", "local:0"), "give local:N", config, tmp_path / "b"),
             (("--scheduler", "tcp://127.0.0.1:9"), "cannot reach it", config, tmp_path / "c"),
             (("--resume",), "give that folder as --out", config, None)]
    for flags, said, cfg, out in cases:
        started = time.monotonic()
        r = run_dmlbed("compare", str(cfg), *flags, *(("--out", str(out)) if out else ()), timeout=120)
        assert r.returncode == 2 and said in r.stderr, (flags, r.stderr[-1500:])
        assert len([l for l in r.stderr.splitlines() if l.strip()]) == 1, r.stderr
        assert out is None or out == tmp_path / "a" or not os.path.exists(out)
        assert time.monotonic() - started < 60
    assert json.load(open(tmp_path / "a" / ".matrix" / "matrix.json"))["name"] == "small"


def dask_process(*args):
    """A Dask scheduler or worker process (distributed.cli.dask_NAME ARGS), quiet."""
    return subprocess.Popen([sys.executable, "-m", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": ROOT})


def test_a_running_scheduler_without_a_worker_is_refused_and_with_one_gives_the_serial_comparison(tmp_path):
    config = tmp_path / "small.yaml"
    config.write_text(SMALL)
    address = f"tcp://127.0.0.1:{free_port()}"
    scheduler = dask_process("distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port",
                             address.rsplit(":", 1)[1], "--no-dashboard")
    worker = None
    try:
        deadline = time.monotonic() + 60
        while True:
            r = run_dmlbed("compare", str(config), "--out", str(tmp_path / "none"), "--scheduler", address)
            if "cannot reach it" not in r.stderr or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert r.returncode == 2 and "has no worker" in r.stderr, r.stderr[-1500:]
        assert not os.path.exists(tmp_path / "none")
        worker = dask_process("distributed.cli.dask_worker", address, "--nthreads", "1", "--no-dashboard")
        deadline = time.monotonic() + 60
        while True:
            r = run_dmlbed("compare", str(config), "--out", str(tmp_path / "remote"), "--json", "--scheduler", address)
            if "has no worker" not in r.stderr or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert r.returncode == 0, r.stderr[-2000:]
        assert run_dmlbed("compare", str(config), "--out", str(tmp_path / "serial"), "--json").returncode == 0
        assert comparison(tmp_path / "remote") == comparison(tmp_path / "serial")
    finally:
        for p in (worker, scheduler):
            if p is not None:
                p.terminate()
                p.wait(timeout=60)


@pytest.mark.benchmark
def test_a_24_row_simulated_matrix_on_two_local_workers_takes_at_most_065_of_the_serial_time(tmp_path):
    config = os.path.join(ROOT, "configs", "sweep-simulate.yaml")
    took = {}
    for name, flags in (("serial", ()), ("spread", ("--scheduler", "local:2"))):
        started = time.monotonic()
        r = run_dmlbed("compare", config, "--out", str(tmp_path / name), "--json", *flags, timeout=1800)
        took[name] = time.monotonic() - started
        assert r.returncode == 0, r.stderr[-2000:]
    assert comparison(tmp_path / "serial") == comparison(tmp_path / "spread")
    ratio = took["spread"] / took["serial"]
    print(f"24 simulated rows: serial {took['serial']:.1f} s, local:2 {took['spread']:.1f} s, ratio {ratio:.2f}")
    assert ratio <= 0.65


EMULATED = """name: emulated
defaults: {iters: 4, bw: 100, model: "mlp:1MB"}
runs:
  - {label: ring-4, algo: ring, topo: "star:4"}
  - {label: ps-4, algo: ps, topo: "star:4"}
  - {label: ring-3, algo: ring, topo: "star:3"}
  - {label: sim-ring, algo: ring, topo: "fattree:4", mode: simulate}
  - {label: sim-hd, algo: hd, topo: "fattree:4", mode: simulate}
"""
EMULATED_LABELS = ["ps-4", "ring-3", "ring-4", "sim-hd", "sim-ring"]


def parent_of(pid):
    """A process's parent PID (0 when it is gone)."""
    try:
        return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def processes(pattern, under=None):
    """PIDs of processes whose command line holds pattern (under: only those descending from that PID, so the
    tests running beside this one are not counted)."""
    r = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    found = [int(p) for p in r.stdout.split()]
    if under is None:
        return found

    def descends(pid):
        while pid > 1:
            if pid == under:
                return True
            pid = parent_of(pid)
        return False
    return [p for p in found if descends(p)]


def cmdline(pid):
    try:
        return open(f"/proc/{pid}/cmdline").read()
    except OSError:
        return None


class Sampler(threading.Thread):
    """Every process a matrix started (seen while it ran), and the most controllers (one per emulated network) and
    row processes it had up at once."""

    def __init__(self, under):
        super().__init__(daemon=True)
        self.under, self.controllers, self.rows, self.seen = under, 0, 0, {}
        self.halt = threading.Event()
        self.start()

    def run(self):
        while not self.halt.is_set():
            mine = processes(".", self.under)
            self.seen.update({p: cmdline(p) for p in mine if p not in self.seen})
            self.controllers = max(self.controllers, sum("controllers.ryu_manager" in (self.seen[p] or "")
                                                         for p in mine))
            self.rows = max(self.rows, sum("emulation.commands.matrix_child" in (self.seen[p] or "") for p in mine))
            time.sleep(0.2)

    def stopped(self):
        self.halt.set()
        self.join()
        return self

    def left(self):
        """The processes it started that are still there, and the bridges."""
        alive = [c for p, c in self.seen.items() if c and cmdline(p) == c]
        return alive + subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout.split()


def start_compare(config, out, *flags):
    return subprocess.Popen([sys.executable, "-m", "emulation.commands.cli", "compare", str(config), "--out", str(out),
                             "--no-report", *flags], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def first_row_process(proc, timeout=120):
    """The PID of the first row process a matrix started."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        rows = processes("emulation.commands.matrix_child", proc.pid)
        if rows:
            return rows[0]
        time.sleep(0.2)
    raise AssertionError("no row process started")


@pytest.mark.emulation
def test_two_workers_on_one_machine_never_bring_two_networks_up_and_a_killed_workers_row_runs_again(tmp_path):
    config = tmp_path / "emulated.yaml"
    config.write_text(EMULATED)
    proc = start_compare(config, tmp_path / "out", "--scheduler", "local:2", "--json")
    sampler = Sampler(proc.pid)
    child = first_row_process(proc)
    time.sleep(3)
    worker = parent_of(child)
    os.kill(worker, signal.SIGKILL)  # the worker running the row dies: its row process tears its network down
    out, err = proc.communicate(timeout=600)
    sampler.stopped()
    assert proc.returncode == 0, err[-3000:]
    rows = json.loads(out)["rows"]
    assert sorted(r["label"] for r in rows) == EMULATED_LABELS  # each once
    assert all(r["correct"] is True and r["fidelity"] for r in rows if r["mode"] == "emulate")
    # one network at a time; the killed worker's row, tearing its network down, may still be there when its rerun
    # starts and waits on the machine's network lock, so two row processes can be seen for those seconds
    assert sampler.controllers == 1 and sampler.rows <= 2
    records = [json.load(open(tmp_path / "out" / ".matrix" / name))
               for name in os.listdir(tmp_path / "out" / ".matrix") if name != "matrix.json"]
    emulated = [(r["started"], r["finished"]) for r in records if r["rows"][0]["mode"] == "emulate"]
    simulated = [(r["started"], r["finished"]) for r in records if r["rows"][0]["mode"] == "simulate"]
    assert len(emulated) == 3 and len(simulated) == 2
    # nothing ran beside a network: every simulated row before or after every emulated one
    assert all(s_end <= e_start or e_end <= s_start for s_start, s_end in simulated for e_start, e_end in emulated)
    time.sleep(2)
    assert sampler.left() == []


@pytest.mark.emulation
def test_ctrl_c_stops_every_row_and_resume_runs_only_the_rows_that_had_not_landed(tmp_path):
    config = tmp_path / "emulated.yaml"
    config.write_text(EMULATED)
    proc = start_compare(config, tmp_path / "out", "--scheduler", "local:2")
    sampler = Sampler(proc.pid)
    first_row_process(proc)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    sampler.stopped()
    assert proc.returncode == 130 and "interrupted by SIGINT" in err, err[-3000:]
    assert sampler.rows == 1 and any("matrix_child" in (c or "") for c in sampler.seen.values())
    time.sleep(2)
    assert sampler.left() == []
    landed = len([n for n in os.listdir(tmp_path / "out" / ".matrix") if n != "matrix.json"])
    assert landed < 5
    again = run_dmlbed("compare", str(config), "--out", str(tmp_path / "out"), "--resume", "--json", timeout=900)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resume: {landed} of 5 rows landed before" in again.stderr
    rows = json.loads(again.stdout)["rows"]
    assert sorted(r["label"] for r in rows) == EMULATED_LABELS
    assert all(r["correct"] is not False for r in rows)
    assert subprocess.run(["ovs-vsctl", "list-br"], capture_output=True, text=True).stdout.split() == []
