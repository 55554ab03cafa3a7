"""Real torch workers on emulated hosts (root + OVS), a few iterations each so CI keeps them working."""

import csv
import json
import subprocess

import pytest

from emulation.run.faults import BUSY_LOOP
from helpers import kill_worker_midway, run_dmlbed
from test_emulation import leftovers

pytestmark = pytest.mark.emulation

CASES = [("bml", "bcube:2,2", []), ("ps", "bcube:2,2", []), ("ps", "star:4", []), ("ring", "star:4", []),
         ("hier", "tree:2,2", []), ("gloo", "star:3", []), ("ps", "star:4", ["--servers", "1"]),
         ("ps", "star:4", ["--ps-placement", "tensor", "--ps-barrier", "server"])]


@pytest.mark.parametrize("algo,topo,extra", CASES, ids=[f"{a}-{t}{''.join(e[:1]).replace('--', '-')}" for a, t, e in CASES])
def test_emulated_run_is_correct(tmp_path, algo, topo, extra):
    r = run_dmlbed("run", "--topo", topo, "--algo", algo, "--model", "mlp:300K", "--iters", "4", "--batch", "8",
                   "--bw", "50", "--json", "--out", str(tmp_path), *extra, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert s["correct"] and s["sum_verified"] is True, s["error"]
    assert s["packet_in"] == 0
    assert s["gst_median_s"] > 0 and s["gst_ratio"] > 0
    levels = s["bytes_by_level"]
    if topo.startswith("bcube"):
        # every level's links carried gradient traffic
        assert set(levels) == {"L0", "L1"} and min(levels.values()) > 0
    # the plans move at least 2(N-1)/N of the gradient per worker and iteration (payload, no headers)
    workers = s["workers"]
    if algo != "gloo" and not extra:
        expected = 2 * (workers - 1) / workers * s["gradient_bytes"] * workers * s["iterations"]
        assert sum(levels.values()) >= expected
    assert leftovers(topo) == []


def test_bml_pins_each_transfer_to_its_level(tmp_path):
    """BML on bcube:2,2 sends each thread's step over the level it names: both levels carry equal shares."""
    r = run_dmlbed("run", "--topo", "bcube:2,2", "--algo", "bml", "--model", "mlp:1M", "--iters", "3", "--batch",
                   "4", "--bw", "50", "--json", "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    levels = json.loads(r.stdout)["bytes_by_level"]
    assert levels["L0"] == pytest.approx(levels["L1"], rel=0.1)


def test_killed_worker_on_emulated_network(tmp_path):
    out = tmp_path / "run"
    s, elapsed = kill_worker_midway(out, 2, ["--topo", "star:3", "--algo", "ring", "--model", "mlp:1M", "--iters",
                                             "300", "--batch", "4", "--bw", "50", "--timeout", "20"],
                                    start_timeout=180)
    assert elapsed < 60
    assert not s["correct"] and "h2 (rank 2)" in s["error"]
    assert s["iterations"] >= 3
    assert len(list(csv.DictReader(open(out / "iterations.csv")))) >= 3
    assert leftovers("star:3") == []


ISSUE4 = [  # correctness, not timing: a 2 MB model where a 20 Mbit/s level would make LeNet-5 take a minute
    ("blueconnect", "tree:2,2", ["--bw", "50,20", "--model", "mlp:2MB"]),
    ("twolevel", "tree:2,2", ["--bw", "50,20", "--model", "mlp:2MB"]),
    ("blueconnect", "bcube:2,2", []),
    ("ps", "star:3", ["--codec", "terngrad"]),
    ("bml", "bcube:2,2", ["--codec", "terngrad"]),
    ("ibatch", "star:3", ["--pull", "ibatch"]),
    ("pflow", "star:4", ["--pf-tree", "2,2"]),
    ("pflow", "star:4", ["--staleness", "1", "--pf-tree", "none"]),
]


@pytest.mark.parametrize("algo,topo,extra", ISSUE4, ids=[f"{a}-{t}-{'-'.join(e)}" for a, t, e in ISSUE4])
def test_emulated_issue4_algorithms(tmp_path, algo, topo, extra):
    args = ["run", "--topo", topo, "--algo", algo, "--iters", "4", "--batch", "8", "--json", "--out", str(tmp_path),
            *extra]
    if "--model" not in extra:
        args += ["--model", "lenet5"]
    if "--bw" not in extra:
        args += ["--bw", "50"]
    r = run_dmlbed(*args, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert s["correct"] and s["replicas_identical"], s["error"]
    assert s["packet_in"] == 0 and s["iterations"] == 4
    if "terngrad" in extra:
        assert s["sum_verified"] is True and s["wire_ratio"] < 0.2
        assert s["split_median_s"]["codec_s"] > 0 and s["fidelity"]["codec_cpu_s"] > 0
        assert s["split_median_s"]["codec_staged_s"] > 0  # on the device, in the compute time
    if algo == "pflow":
        assert s["wire_by_phase"]["push"]["ratio"] < 1 and s["split_median_s"]["broadcast_s"] > 0
    if algo == "ibatch":
        assert s["split_median_s"]["forward_phase_s"] > 0
    # judged against the flow model of its own scenario, simulated beside it (or told why there is none)
    model = s["fidelity"]["scenario_model"]
    assert algo not in ("blueconnect", "twolevel", "ps", "bml") or "none" not in model, model  # plans it simulates
    assert "none" in model or (model["measured_over_model"] > 0 and s["fidelity"]["judged_against"].startswith(
        "the flow model") and (tmp_path / "scenario-model" / "summary.json").exists()), model
    assert leftovers(topo) == []


def worker_pid(out_dir, rank):
    """The pid of rank's worker process of the run writing to out_dir (its command line names its config)."""
    import os
    marker = os.path.join(os.path.abspath(out_dir), "workers", f"rank-{rank}.config.json")
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if marker in f.read().decode(errors="replace"):
                        return int(pid)
            except OSError:
                continue
    raise AssertionError(f"no worker for rank {rank} under {out_dir}")


def test_a_link_left_unshaped_is_not_faithful(tmp_path):
    """Take the shaper off both hosts' links after the first iteration: the links then carry far more than their
    rate, and the verdict must say so rather than call the fast timings faithful."""
    import os
    import subprocess
    import sys
    from helpers import ROOT, wait_for_iterations
    out = tmp_path / "unshaped"
    proc = subprocess.Popen([sys.executable, "-m", "emulation.commands.cli", "run", "--topo", "star:2", "--algo",
                             "ring", "--model", "mlp:500000", "--bw", "20", "--iters", "14", "--json", "--out",
                             str(out)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_iterations(str(out), 0, 1, proc)
    for rank in (0, 1):
        config = json.load(open(os.path.join(out, "workers", f"rank-{rank}.config.json")))
        subprocess.run(["nsenter", "-t", str(worker_pid(out, rank)), "-n", "tc", "qdisc", "del", "dev",
                        config["ifname"], "root"], check=True)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-2000:]
    summary = json.loads(stdout)
    fidelity = summary["fidelity"]
    assert summary["correct"]
    assert fidelity["verdict"] == "not faithful", fidelity
    assert "times their shaped rate" in fidelity["cause"] or "of theory" in fidelity["cause"], fidelity["cause"]
    assert leftovers("star:2") == []


@pytest.mark.benchmark
def test_a_machine_short_of_cpu_is_caught_and_named(tmp_path):
    """--cpu-hog takes the cores from the ranks and the switch (an emulator fault on purpose): the run stays correct,
    its verdict is not faithful to the machine and names the CPU, and the busy processes are gone afterwards. Behind
    `make benchmark` (with configs/bench/verdicts.yaml): alone it passes in 17 s, but in two CI runs beside the pure
    group the CPU sampler read the machine 47-70% busy with six busy processes running, not yet explained."""
    # at 20 Mbit/s the six judged iterations take about 5 s: several CPU samples (at 100 one second held one sample)
    r = run_dmlbed("run", "--topo", "star:2", "--algo", "ring", "--model", "mlp:2MB", "--bw", "20", "--iters", "8",
                   "--batch", "4", "--cpu-hog", "6", "--json", "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert s["correct"] and s["config"]["cpu_hog"] == 6
    assert s["fidelity"]["verdict"] in ("degraded", "not faithful"), s["fidelity"]
    assert "CPU" in s["fidelity"]["cause"], s["fidelity"]["cause"]
    assert subprocess.run(["pgrep", "-f", BUSY_LOOP], capture_output=True).returncode == 1  # none left running
    assert leftovers("star:2") == []


def test_shape_ingress_holds_incast_into_one_server_to_its_rate(tmp_path):
    """With --shape-ingress every host link runs through a bridging namespace that shapes switch->host: eight
    workers pushing into one iBatch server get its downlink's rate, not eight times it (without it the downlink is
    unshaped), and the run finishes without stalls (the former IFB shaping held packets for seconds)."""
    r = run_dmlbed("run", "--topo", "star:9", "--algo", "ibatch", "--model", "mlp:1M", "--bw", "100", "--iters", "4",
                   "--batch", "8", "--compute-time", "0.3", "--shape-ingress", "--json", "--out", str(tmp_path),
                   timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert s["correct"] and "bridging namespace per host link" in s["shaping"]
    level = s["fidelity"]["levels"]["L0"]
    assert level["critical_fidelity"] < 1.15, level  # the server's downlink held its shaped rate
    assert 0.8 < s["gst_ratio"] < 1.5, s["fidelity"]  # 8 x 4 MB into one 100 Mbit/s port: about 2.6 s, no stall
    assert leftovers("star:9") == []


def test_expert_parallel_moe_is_exact_across_the_emulated_network(tmp_path):
    """The MoE layer's all-to-alls cross real links: each exact, the dense layers identical, every byte on the wire."""
    r = run_dmlbed("run", "--topo", "star:4", "--algo", "moe", "--model", "moe:4x64", "--moe-capacity", "64",
                   "--iters", "4", "--bw", "50", "--json", "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    s = json.loads(r.stdout)
    assert s["correct"] and s["checks"] == {"allreduce": True, "alltoall": True}, s["error"]
    assert s["packet_in"] == 0 and s["gst_ratio"] > 0
    # four all-to-alls of (N-1)/N of experts x capacity x width x 4 B per rank and iteration, on the wire
    exchanged = 4 * 3 / 4 * 4 * 64 * 64 * 4 * 4 * s["iterations"]
    assert sum(s["bytes_by_level"].values()) >= exchanged
    assert leftovers("star:4") == []
