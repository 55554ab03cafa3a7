"""A transformer job under tensor, pipeline and data parallelism run by real processes on an emulated network
(`dmlbed launch ... -- python -m workloads.parallel_train`): every rank's weights equal the unsplit model's, and the
bytes each kind's TCP connections delivered match the closed form's."""

import glob
import json
import os

import pytest

from helpers import cli_json, run_dmlbed
from test_emulation import leftovers
from workloads.parallel_train import collect

pytestmark = pytest.mark.emulation

MODEL, LAYOUT = "gpt:4,128,4,64,512", "tp=2,pp=2,dp=2"
KINDS = ("tp", "pp", "dp")


def test_a_3d_parallel_job_on_the_emulated_network_is_exact_and_sends_the_closed_forms_bytes(tmp_path):
    out = tmp_path / "job"
    r = run_dmlbed("launch", "--topo", "star:8", "--bw", "100", "--out", str(out), "--wait", "--",
                   "python", "-m", "workloads.parallel_train", "--model", MODEL, "--parallel", LAYOUT,
                   "--iterations", "3", "--micro-batches", "4", "--batch", "4", "--schedule", "1f1b", timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    ranks = [json.load(open(f)) for f in glob.glob(os.path.join(out, "**", "parallel-rank-*.json"), recursive=True)]
    assert sorted(d["rank"] for d in ranks) == list(range(8))
    assert all(d["max_weight_difference"] < 1e-5 for d in ranks)  # fp32 on the wire, fp32 unsplit on one process
    assert all(len(d["iterations_s"]) == 3 and d["spans"] for d in ranks)
    measured = {}
    for d in ranks:
        for kind, sent in d["bytes_per_iteration_by_kind"].items():
            measured[kind] = measured.get(kind, 0) + sent
    theory = cli_json("theory", "--topo", "star:8", "--bw", "100", "--algo", "ring", "--model", MODEL,
                      "--parallel", LAYOUT, "--micro-batches", "4", "--batch", "4")
    for kind in ("tp", "pp", "dp"):  # gloo's message headers on top of the payload: a few per cent at most
        assert measured[kind] == pytest.approx(theory["bytes_per_kind"][kind], rel=0.03), (kind, measured)
    assert measured.get("other", 0) < 0.001 * sum(measured.values())
    collected = collect(str(out))
    assert collected["bytes_per_iteration_by_kind"] == pytest.approx(measured)
    launched = json.load(open(out / "summary.json"))
    assert launched["fidelity"]["cpu"]["scope"] == "measured iterations"  # the ranks said which seconds they measured
    assert len(collected["bubble_per_stage"]) == 2 and all(0 < b < 1 for b in collected["bubble_per_stage"])
    assert leftovers("star:8") == []


@pytest.mark.benchmark
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_an_emulated_4_stage_pipelines_bubble_is_p_minus_1_over_m_plus_p_minus_1(schedule, tmp_path):
    for m in (4, 8, 16):
        out = tmp_path / f"m{m}"
        r = run_dmlbed("launch", "--topo", "star:4", "--bw", "100", "--out", str(out), "--wait", "--", "python", "-m",
                       "workloads.parallel_train", "--parallel", "pp=4", "--micro-batches", str(m), "--batch", str(m),
                       "--schedule", schedule, "--iterations", "3", "--compute-time", "0.4", "--no-check",
                       timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        bubbles = collect(str(out))["bubble_per_stage"]
        print(f"{schedule} m={m}: bubble per stage {[round(b, 3) for b in bubbles]}, formula {3 / (m + 3):.3f}")
        assert max(bubbles) == pytest.approx(3 / (m + 3), rel=0.10)


@pytest.mark.benchmark
def test_a_dilated_3d_job_on_a_fat_tree_is_faithful_and_follows_the_closed_form_and_the_flow_model(tmp_path):
    """Issue 64's emulated target: tp=2, pp=2, dp=4 on fattree:4, 8 micro-batches, dilated 8 times (at 1 and 4 the
    emulator's own delay per message still shows in the sums: 1.5x and 1.13x the flow model, which launch's
    verdict, judging from outside the ranks, does not see). Routed D-mod-k, so the emulated switches and the flow
    model put every connection on the same path (hashed ECMP collides by the luck of the ports)."""
    job = ["--model", MODEL, "--parallel", "tp=2,pp=2,dp=4", "--micro-batches", "8", "--batch", "8"]
    out = tmp_path / "job"
    r = run_dmlbed("launch", "--topo", "fattree:4", "--routing", "dmodk", "--bw", "100", "--dilation", "8", "--out",
                   str(out), "--wait", "--", "python", "-m", "workloads.parallel_train", *job, "--iterations", "6",
                   "--compute-time", "0.05", timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    fidelity = json.load(open(out / "summary.json"))["fidelity"]
    got = collect(str(out))
    network = ["--topo", "fattree:4", "--routing", "dmodk", "--bw", "100", "--algo", "ring", *job, "--compute-time",
               "0.05"]
    theory, flow = cli_json("theory", *network), cli_json("simulate", *network)
    over = got["iteration_median_s"] / flow["iteration_s"]
    print(f"verdict {fidelity['verdict']} ({fidelity.get('cause')}); bytes over the closed form "
          f"{ {k: round(got['bytes_per_iteration_by_kind'][k] / theory['bytes_per_kind'][k], 4) for k in KINDS} }; "
          f"iteration {got['iteration_median_s']:.3f} s, flow model {flow['iteration_s']:.3f} s ({over:.3f}x); bubble "
          f"{[round(b, 3) for b in got['bubble_per_stage']]}, flow model {[round(b, 3) for b in flow['bubble_per_stage']]}")
    assert got["max_weight_difference"] < 1e-5
    assert fidelity["verdict"] == "faithful", fidelity.get("cause")
    for kind in KINDS:
        assert got["bytes_per_iteration_by_kind"][kind] == pytest.approx(theory["bytes_per_kind"][kind], rel=0.02)
    assert over == pytest.approx(1.0, abs=0.10)
