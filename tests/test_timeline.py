"""Every run's timeline: trace.json in Chrome's trace event format, and `dmlbed timeline` drawing it."""

import json

import pytest

from emulation.results.trace import LINKS_PID, TRACK_COMPUTE, TRACK_SYNC, chrome_trace, transfer_track
from helpers import run_dmlbed

ROWS = {0: [{"iteration": 0, "start": 100.0, "end": 101.0, "compute_s": 0.2, "sync_start": 100.2,
             "sync_end": 100.9, "gst_s": 0.7, "loss": 2.3}],
        1: [{"iteration": 0, "start": 100.1, "end": 101.0, "compute_s": 0.1, "sync_start": 100.2,
             "sync_end": 100.9, "gst_s": 0.7, "loss": 2.3}]}
TRACES = [{"rank": 0, "iteration": 0, "stream": 0, "step": 0, "peer": 1, "dir": "send", "level": 1,
           "bytes": 1000, "wire_bytes": 1000, "start": 100.25, "end": 100.5, "phase": "allreduce"},
          {"rank": 1, "iteration": 0, "stream": 0, "step": 0, "peer": 0, "dir": "recv", "level": 1,
           "bytes": 1000, "wire_bytes": 1000, "start": 100.25, "end": 100.55, "phase": "allreduce"}]


def test_trace_has_a_track_per_rank_with_compute_sync_and_transfers():
    trace = chrome_trace(ROWS, TRACES, ["h0", "h1"], shaped_mbps=[100.0, 100.0])
    events = trace["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert {e["pid"] for e in complete} == {0, 1}
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in complete)
    compute = [e for e in complete if e["tid"] == TRACK_COMPUTE]
    assert [(e["pid"], e["ts"], e["dur"]) for e in compute] == [(0, 0.0, 200000.0), (1, 100000.0, 100000.0)]
    assert len([e for e in complete if e["tid"] == TRACK_SYNC]) == 2
    send = next(e for e in complete if e["tid"] == transfer_track(0, "send"))
    assert send["pid"] == 0 and send["args"]["peer"] == 1 and send["args"]["level"] == 1
    assert send["args"]["bytes"] == 1000 and send["dur"] == pytest.approx(250000.0)
    names = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert "rank 0 (h0)" in names and any("links" in n for n in names)
    counters = [e for e in events if e["ph"] == "C" and e["pid"] == LINKS_PID]
    # 1000 bytes on level 1 during a 0.7 s synchronization: 8000 bit / 0.7 s
    assert counters[0]["args"]["L1"] == pytest.approx(8000 / 0.7 / 1e6, abs=1e-3)
    assert counters[-1]["args"]["L1"] == 0
    json.dumps(trace)  # serializable as is
    untimed = dict(TRACES[0], start=None, end=None, bytes=7000, wire_bytes=7000)
    again = chrome_trace(ROWS, TRACES + [untimed], ["h0", "h1"], shaped_mbps=[100.0, 100.0])["traceEvents"]
    assert len([e for e in again if e["ph"] == "X"]) == len(complete)  # a side without its times is not drawn
    counted = [e for e in again if e["ph"] == "C" and e["pid"] == LINKS_PID]
    assert counted[0]["args"]["L1"] == pytest.approx(8 * 8000 / 0.7 / 1e6, abs=1e-3)  # but its bytes were sent


def test_local_run_writes_trace_and_timeline_draws_it(tmp_path):
    out = tmp_path / "run"
    r = run_dmlbed("run", "--topo", "star:3", "--algo", "ring", "--model", "mlp:1M", "--iters", "2", "--local",
                   "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    trace = json.loads((out / "trace.json").read_text())
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["pid"] for e in complete} == {0, 1, 2}
    for rank in range(3):  # every rank: 2 iterations, their compute and sync, and its transfers
        mine = [e for e in complete if e["pid"] == rank]
        assert sum(e["tid"] == TRACK_COMPUTE for e in mine) == 2
        assert sum(e["tid"] >= 10 for e in mine) >= 2 * 2 * 2  # 2(N-1) steps, send and receive, 2 iterations
    t = run_dmlbed("timeline", str(out))
    assert t.returncode == 0, t.stderr
    png = out / "timeline.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    first = run_dmlbed("timeline", str(out), "--iterations", "1", "--out", str(tmp_path / "first.png"))
    assert first.returncode == 0 and (tmp_path / "first.png").read_bytes()[:4] == b"\x89PNG", first.stderr


def test_timeline_refuses_a_folder_without_a_trace(tmp_path):
    r = run_dmlbed("timeline", str(tmp_path))
    assert r.returncode == 2 and "has no trace.json" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_simulated_run_writes_the_same_timeline(tmp_path):
    r = run_dmlbed("simulate", "--topo", "bcube:3,2", "--algo", "blueconnect", "--model", "lenet5", "--bw", "50",
                   "--iters", "2", "--out", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    trace = json.loads((tmp_path / "trace.json").read_text())
    sends = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["tid"] >= 10 and e["tid"] % 2 == 0]
    assert {e["pid"] for e in sends} == set(range(9)) and {e["args"]["level"] for e in sends} == {0, 1}
    # BlueConnect's stages overlap across the two NICs in the engine's chunk dataflow
    first_l1 = min(e["ts"] for e in sends if e["args"]["level"] == 1)
    last_l0 = max(e["ts"] + e["dur"] for e in sends if e["args"]["level"] == 0)
    assert first_l1 < last_l0
    assert run_dmlbed("timeline", str(tmp_path)).returncode == 0
