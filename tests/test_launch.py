"""`dmlbed launch`: a user's unmodified DDP script on every emulated host with torchrun's variables; the opt-in
that puts dmlbed's algorithm into its DDP; a failing rank; and the Python API's example from the docs."""

import json
import os
import re
import subprocess
import sys

import jsonschema
import pytest

from emulation.commands.schema import schema
from helpers import ROOT, run_dmlbed

SCRIPT = os.path.join(ROOT, "tests", "scripts", "ddp_tutorial.py")
PYTHON = sys.executable


def launch(tmp_path, *options, command=(PYTHON, SCRIPT), env=None, timeout=600):
    """`dmlbed launch OPTIONS --json --out tmp_path/out -- COMMAND`; (completed process, summary or None)."""
    r = run_dmlbed("launch", *options, "--json", "--out", str(tmp_path / "out"), "--", *command, timeout=timeout,
                   env=dict(os.environ, **(env or {})))
    try:
        return r, json.loads(r.stdout)
    except ValueError:
        return r, None


def rank_outputs(tmp_path, ranks):
    return [open(tmp_path / "out" / "workers" / f"rank-{r}.stdout").read() for r in range(ranks)]


def test_a_tutorial_ddp_script_runs_on_loopback(tmp_path):
    r, s = launch(tmp_path, "--topo", "star:3", "--local")
    assert r.returncode == 0, r.stderr[-2000:]
    assert s["completed"] and s["exit_codes"] == {"0": 0, "1": 0, "2": 0}
    assert s["provenance"]["command"].startswith("dmlbed launch ") and s["controller"] is None
    jsonschema.Draft202012Validator(schema("launch")).validate(s)
    outputs = rank_outputs(tmp_path, 3)
    assert all(f"rank {i} done" in out for i, out in enumerate(outputs))
    assert len({re.search(r"parameters (\w+)", o).group(1) for o in outputs}) == 1  # DDP keeps replicas equal


@pytest.mark.parametrize("args,fragment", [
    ([], "a command is required after --"),
    (["--", "no-such-program-xyz"], "'no-such-program-xyz' is not found"),
    (["--env", "NOEQUALS", "--", "true"], "--env 'NOEQUALS' is invalid"),
    (["--algo", "ibatch", "--", "true"], "has none"),
])
def test_bad_launch_input_is_one_line_exit_2(tmp_path, args, fragment):
    r = run_dmlbed("launch", "--topo", "star:2", "--local", "--out", str(tmp_path / "x"), *args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and fragment in r.stderr, r.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.emulation
@pytest.mark.parametrize("topo,levels", [("star:4", ["L0"]), ("bcube:2,2", ["L0", "L1"])])
def test_an_unmodified_ddp_script_trains_across_the_emulated_network(tmp_path, topo, levels):
    from test_emulation import leftovers
    r, s = launch(tmp_path, "--topo", topo, "--bw", "100")
    assert r.returncode == 0, r.stderr[-3000:]
    assert s["completed"] and all(c == 0 for c in s["exit_codes"].values())
    assert sorted(s["bytes_by_level"]) == levels and s["bytes_by_level"]["L0"] > 0
    assert s["fidelity"]["verdict"] in ("faithful", "degraded", "not faithful") and "cpu" in s["fidelity"]
    assert s["wall_s"] > 0 and s["datapath"] in ("kernel", "user")
    trace = json.load(open(tmp_path / "out" / "trace.json"))
    assert any(e.get("ph") == "C" for e in trace["traceEvents"])  # link rates over time
    outputs = rank_outputs(tmp_path, len(s["exit_codes"]))
    assert len({re.search(r"parameters (\w+)", o).group(1) for o in outputs}) == 1
    assert leftovers(topo) == []


@pytest.mark.emulation
def test_a_failing_rank_ends_the_launch_in_one_line_and_leaves_nothing(tmp_path):
    from test_emulation import leftovers
    command = f'if [ "$RANK" = 2 ]; then echo "rank two gives up" >&2; exit 3; fi; exec {PYTHON} {SCRIPT}'
    r = run_dmlbed("launch", "--topo", "star:4", "--bw", "100", "--out", str(tmp_path / "out"), "--", "sh", "-c",
                   command, timeout=600)
    assert r.returncode == 1
    errors = [l for l in r.stderr.splitlines() if l.startswith("dmlbed: error")]
    summary = json.load(open(tmp_path / "out" / "summary.json"))
    assert summary["completed"] is False and summary["exit_codes"]["2"] == 3
    assert "rank 2 (h2) exited with code 3: rank two gives up" in summary["error"]
    assert len(errors) == 1 and r.stderr.strip().splitlines()[-1] == errors[0]  # the last line says why
    assert "rank 2 (h2) exited with code 3: rank two gives up" in errors[0]
    assert leftovers("star:4") == []


@pytest.mark.emulation
def test_the_opt_in_runs_bml_in_the_scripts_ddp_and_replicas_stay_identical(tmp_path):
    r, s = launch(tmp_path, "--topo", "bcube:3,2", "--bw", "100", "--algo", "bml",
                  env={"DMLBED_TEST_REGISTER": "1", "EPOCHS": "5"})  # 5 epochs x 2 batches per rank: 10 iterations
    assert r.returncode == 0, r.stderr[-3000:]
    assert s["algo"] == "bml" and s["buckets"]["iterations"] == 10 and s["buckets"]["same_average_on_every_rank"]
    assert s["checks"] and all(s["checks"].values())  # exact sums of the buckets in the first two iterations
    buckets = [json.loads(l) for l in open(tmp_path / "out" / "workers" / "rank-4.buckets.jsonl")]
    assert len(buckets) == 10 and all(set(b["sent_by_level"]) == {"L0", "L1"} for b in buckets)  # BML: both NICs
    outputs = rank_outputs(tmp_path, 9)
    assert len({re.search(r"parameters (\w+)", o).group(1) for o in outputs}) == 1


@pytest.mark.parametrize("codec", [("powersgd",), ("topk", "--k-ratio", "0.1", "--error-feedback"), ("fp16",)])
def test_a_codec_runs_in_the_scripts_ddp_hook(tmp_path, codec):
    r, s = launch(tmp_path, "--topo", "star:3", "--local", "--algo", "ring", "--codec", *codec,
                  env={"DMLBED_TEST_REGISTER": "1", "EPOCHS": "2"})
    assert r.returncode == 0, r.stderr[-3000:]
    assert f"with codec {codec[0]}" in s["synchronization"] and s["buckets"]["same_average_on_every_rank"]
    assert s["checks"] and all(s["checks"].values())  # every all-reduce (PowerSGD: both factors) summed exactly
    assert len({re.search(r"parameters (\w+)", o).group(1) for o in rank_outputs(tmp_path, 3)}) == 1


def test_a_codec_without_an_algorithm_is_refused(tmp_path):
    r = run_dmlbed("launch", "--topo", "star:2", "--local", "--codec", "fp16", "--out", str(tmp_path / "x"), "--",
                   "true")
    assert r.returncode == 2 and "give --algo too" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def readme_example():
    """The Python API example of the documentation (docs/how-to/python-api.md)."""
    text = open(os.path.join(ROOT, "docs", "how-to", "python-api.md")).read()
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


@pytest.mark.emulation
def test_the_readme_python_example_runs(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(readme_example())
    r = subprocess.run([PYTHON, str(script)], capture_output=True, text=True, cwd=str(tmp_path), timeout=900,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "theory" in r.stdout and "run correct: True" in r.stdout and "unanswered pings: 0.0 %" in r.stdout
    assert "1 received" in r.stdout and "Mbit/s of payload" in r.stdout


def test_a_rank_aborting_at_teardown_is_diagnosed(tmp_path):
    aborts = ("import os, signal, sys; sys.stderr.write('terminate called without an active exception\\n'); "
              "sys.stderr.flush(); os.kill(os.getpid(), signal.SIGABRT)")
    r, s = launch(tmp_path, "--topo", "star:2", "--local", command=(PYTHON, "-c", aborts))
    assert r.returncode == 1 and not s["completed"]
    assert "exited with code -6" in s["error"] and "gc.collect() before destroy_process_group" in s["error"]
    assert r.stderr.strip().splitlines()[-1] == f"dmlbed: error: {s['error']}"  # why, last on stderr


def test_launch_says_when_every_rank_has_gone_idle(tmp_path):
    # a rank blocked as in a collective no peer joined: no CPU, no bytes (long beside the 2 s warning: a loaded
    # machine starts the interpreters slowly)
    waits = "import time; time.sleep(15)"
    r, s = launch(tmp_path, "--topo", "star:2", "--local", "--idle-warning", "2", command=(PYTHON, "-c", waits))
    assert r.returncode == 0 and s["completed"], r.stderr[-2000:]
    said = [l for l in r.stderr.splitlines() if "every rank has been idle" in l]
    assert len(said) == 1 and "may be hung" in said[0]
    busy = "import time\nend = time.time() + 4\nwhile time.time() < end: pass"
    r, s = launch(tmp_path, "--topo", "star:2", "--local", "--idle-warning", "2", "--force",
                  command=(PYTHON, "-c", busy))
    assert r.returncode == 0 and "every rank has been idle" not in r.stderr


def test_torchs_own_fsdp_example_trains_sharded_with_identical_full_parameters(tmp_path):
    r, s = launch(tmp_path, "--topo", "star:4", "--local", "--env", "STEPS=2",
                  command=(PYTHON, os.path.join(ROOT, "examples", "fsdp_train.py")))
    assert r.returncode == 0, r.stderr[-2000:]
    assert s["completed"] and all(c == 0 for c in s["exit_codes"].values())
    outputs = rank_outputs(tmp_path, 4)
    assert len({re.search(r"parameters (\w+)", o).group(1) for o in outputs}) == 1
    shards = [float(re.search(r"shard ([\d.]+)", o).group(1)) for o in outputs]
    assert sum(shards) == pytest.approx(1.0, abs=0.01) and max(shards) < 0.3  # each rank holds a quarter


def test_the_ranks_measured_seconds_scope_the_cpu_and_their_overruns_are_judged():
    from types import SimpleNamespace

    from emulation.backends.launcher import launch_fidelity, measured_window
    from emulation.run.sampling import CpuSampler
    assert measured_window({}) is None
    assert measured_window({0: {"start": 10.0, "end": 20.0}, 1: {"start": 11.0, "end": 22.0}}) == (10.0, 22.0)
    assert measured_window({0: {"start": 10.0}}) is None  # a rank that never finished says nothing
    cpu = CpuSampler()
    cpu.samples = [(0.0, 0.5, 1.0), (0.5, 1.0, 1.0), (10.5, 11.0, 0.3), (11.0, 11.5, 0.4)]  # busy importing torch
    cfg = SimpleNamespace(local=False)
    measured = {0: {"start": 10.0, "end": 12.0, "compute_over_budget": 0, "rank_iterations": 4}}
    fid = launch_fidelity(cfg, None, [100.0], {}, None, cpu, {}, measured)
    assert fid["cpu"]["scope"] == "measured iterations" and fid["cpu"]["saturated_share"] == 0
    assert fid["verdict"] == "faithful"
    assert launch_fidelity(cfg, None, [100.0], {}, None, cpu, {})["cpu"]["saturated_share"] == 0.5  # whole run
    measured[1] = {"start": 10.0, "end": 12.0, "compute_over_budget": 3, "rank_iterations": 4}
    fid = launch_fidelity(cfg, None, [100.0], {}, None, cpu, {}, measured)
    assert fid["verdict"] == "degraded" and "exceeded --compute-time in 3 of 8" in fid["cause"]
