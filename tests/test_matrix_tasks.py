"""A matrix's rows as Dask tasks (--scheduler): the same comparison as the rows in turn, rows that landed kept by
--resume, bad schedulers and folders refused before anything starts, a row's folder shipped home intact."""

import csv
import json
import os
import time

import pytest

from emulation.backends.matrix_tasks import SchedulerError, Scheduler, packed, parse_scheduler, sees_folder, unpack, \
    waves, write_token
from helpers import ROOT, run_dmlbed

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
