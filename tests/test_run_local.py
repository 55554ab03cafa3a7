"""`dmlbed run --local`: real torch workers over TCP on 127.0.0.1 (no root), every algorithm, summary schema,
bad input, and a worker killed midway."""

import csv
import json

import pytest

from helpers import kill_worker, kill_worker_midway, run_dmlbed

SUMMARY_KEYS = {"topology", "algo", "model", "workers", "gradient_bytes", "bw_mbps", "iterations", "gst_median_s",
                "gst_theory_s", "gst_ratio", "compute_median_s", "iteration_median_s", "jct_s", "bytes_by_level",
                "correct", "replicas_identical", "sum_verified", "error"}


@pytest.mark.parametrize("algo,topo,extra", [("ps", "star:4", []), ("ring", "star:3", []), ("bml", "bcube:2,2", []),
                                             ("hier", "tree:2,2", []), ("gloo", "star:3", []),
                                             ("ps", "star:4", ["--servers", "1"])])
def test_local_run_is_correct(tmp_path, algo, topo, extra):
    out = tmp_path / "run"
    r = run_dmlbed("run", "--topo", topo, "--algo", algo, "--model", "mlp:100K", "--iters", "4", "--batch", "8",
                   "--local", "--json", "--out", str(out), *extra, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert SUMMARY_KEYS <= set(s)
    assert s["correct"] and s["replicas_identical"] and s["sum_verified"] is True and s["error"] is None
    assert s["iterations"] == 4 and s["gst_median_s"] > 0 and s["gst_theory_s"] > 0
    assert json.load(open(out / "summary.json"))["correct"] is True
    rows = list(csv.DictReader(open(out / "iterations.csv")))
    assert [int(r["iteration"]) for r in rows] == [0, 1, 2, 3]


def test_digits_training_reports_accuracy_and_loss_falls(tmp_path):
    r = run_dmlbed("run", "--topo", "star:2", "--algo", "ring", "--model", "lenet5", "--data", "digits", "--iters",
                   "40", "--batch", "32", "--lr", "0.05", "--local", "--json", "--out", str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout)
    assert s["correct"] and 0 <= s["accuracy"] <= 1
    assert s["loss_last"] < s["loss_first"]


def test_a_recipe_with_momentum_and_a_schedule_gives_an_accuracy_curve(tmp_path):
    r = run_dmlbed("run", "--topo", "star:3", "--algo", "ring", "--model", "lenet5", "--data", "digits", "--iters",
                   "12", "--batch", "16", "--lr", "0.02", "--momentum", "0.9", "--weight-decay", "0.0005",
                   "--lr-schedule", "step:4:0.5", "--eval-every", "4", "--local", "--json", "--out", str(tmp_path),
                   timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    s = json.loads(r.stdout)
    assert s["correct"] and [i for i, _ in s["accuracy_curve"]] == [4, 8, 12]
    assert all(0 <= a <= 1 for _, a in s["accuracy_curve"])
    assert s["accuracy_curve"][-1][1] == pytest.approx(s["accuracy"])  # the last point is the final model's


def test_learning_rate_schedules():
    from workloads.schedule import lr_factor
    assert [lr_factor("constant", i, 10) for i in (0, 9)] == [1.0, 1.0]
    assert [lr_factor("step:4:0.5", i, 12) for i in (0, 3, 4, 8, 11)] == [1.0, 1.0, 0.5, 0.25, 0.25]
    assert lr_factor("poly:2", 5, 10) == pytest.approx(0.25) and lr_factor("poly:1", 10, 10) == 0.0


@pytest.mark.parametrize("args,fragment", [
    (["--topo", "star:9", "--algo", "bml"], "valid combinations"),
    (["--topo", "bcube:3,2", "--algo", "hier"], "valid combinations"),
    (["--topo", "star:9", "--algo", "sgd"], "--algo sgd is unknown"),
    (["--topo", "star:9", "--algo", "ps", "--model", "resnet"], "unknown model"),
    (["--topo", "star:9", "--algo", "ps", "--data", "digits", "--model", "vgg19"], "use it with lenet5"),
    (["--topo", "star:9", "--algo", "ring", "--servers", "2"], "--servers applies to"),
    (["--topo", "star:9", "--algo", "ps", "--servers", "9"], "--servers 9 is invalid"),
    (["--topo", "star:9", "--algo", "ps", "--batch", "0"], "--batch"),
    (["--topo", "star:9", "--algo", "ps", "--bw", "0"], "out of range"),
    (["--topo", "tree:3,2", "--algo", "pflow", "--momentum", "0.9"], "--momentum applies to algorithms whose"),
    (["--topo", "star:3", "--algo", "ibatch", "--lr-schedule", "poly:1"], "not ibatch: its servers apply"),
    (["--topo", "star:3", "--algo", "ring", "--eval-every", "5"], "give a real data set"),
    (["--topo", "star:3", "--algo", "ring", "--lr-schedule", "step:0:0.5"], "schedule 'step:0:0.5' is invalid"),
    (["--topo", "star:3", "--algo", "ring", "--momentum", "1.5"], "--momentum"),
])
def test_bad_run_input_is_one_line_exit_2(tmp_path, args, fragment):
    r = run_dmlbed("run", *args, "--out", str(tmp_path / "x"))
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and fragment in r.stderr
    assert not (tmp_path / "x").exists()


def test_killed_worker_ends_run_with_named_error_and_keeps_partial_results(tmp_path):
    out = tmp_path / "run"
    s, elapsed = kill_worker_midway(out, 1, ["--topo", "star:3", "--algo", "ring", "--model", "mlp:2M", "--iters",
                                             "500", "--batch", "8", "--local", "--timeout", "20"])
    assert elapsed < 60
    assert not s["correct"]
    assert "rank 1" in s["error"] and "iteration" in s["error"]
    assert s["iterations"] >= 3  # partial results kept
    assert len(list(csv.DictReader(open(out / "iterations.csv")))) >= 3
    # every worker of this run is gone
    for rank in range(3):
        with pytest.raises(AssertionError):
            kill_worker(str(out), rank, sig=0)


@pytest.mark.parametrize("pull", ["default", "layer", "ibatch"])
def test_local_ibatch_modes(tmp_path, pull):
    r = run_dmlbed("run", "--topo", "star:3", "--algo", "ibatch", "--pull", pull, "--model", "lenet5", "--iters",
                   "4", "--batch", "8", "--local", "--json", "--out", str(tmp_path), timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert s["correct"] and s["replicas_identical"] and s["iterations"] == 4
    split = s["split_median_s"]
    assert split["forward_phase_s"] > 0 and split["overlapped_s"] >= 0
    ib = s["ibatch"]
    assert ib["mode"] == pull and [i for a, b in ib["batches"] for i in range(a, b + 1)] == [0, 1, 2, 3]
    assert set(ib["predicted"]) == {"greedy_forward", "greedy_backward", "default", "layer"}


@pytest.mark.parametrize("extra", [[], ["--staleness", "2"], ["--pf-tree", "none", "--pf-dvf", "none"],
                                   ["--servers", "2", "--pf-tree", "2,2"]])
def test_local_pflow(tmp_path, extra):
    r = run_dmlbed("run", "--topo", "star:5", "--algo", "pflow", "--model", "lenet5", "--data", "digits", "--iters",
                   "10", "--lr", "0.05", "--local", "--json", "--out", str(tmp_path), *extra, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert s["correct"] and s["replicas_identical"] and s["iterations"] == 10
    assert s["loss_last"] < s["loss_first"]
    wire = s["wire_by_phase"]
    if "--pf-dvf" in extra:
        assert wire["push"]["ratio"] == 1.0  # no filter: fp32 on the wire
    else:
        assert wire["push"]["ratio"] < 0.9 and s["split_median_s"]["dropped"] > 0


def test_pflow_bad_tree_is_refused(tmp_path):
    r = run_dmlbed("run", "--topo", "star:9", "--algo", "pflow", "--pf-tree", "2,2", "--out", str(tmp_path))
    assert r.returncode == 2 and "raise T or H" in r.stderr
