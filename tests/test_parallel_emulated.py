"""A transformer job under tensor, pipeline and data parallelism run by real processes on an emulated network
(`dmlbed run --parallel`, which launches `python -m workloads.parallel_train` on every host): every rank's weights
equal the unsplit model's, the bytes each kind's TCP connections delivered match the closed form's, and the run is
judged against the flow model of the same job."""

import glob
import json
import os

import pytest

from helpers import cli_json, run_dmlbed
from test_emulation import leftovers
from workloads.parallel_records import collect

pytestmark = pytest.mark.emulation

MODEL, LAYOUT = "gpt:4,128,4,64,512", "tp=2,pp=2,dp=2"
KINDS = ("tp", "pp", "dp")


def test_run_parallel_is_exact_sends_the_closed_forms_bytes_and_is_judged_against_the_flow_model(tmp_path):
    out = tmp_path / "job"
    job = ("--topo", "star:8", "--bw", "100", "--algo", "ring", "--model", MODEL, "--parallel", LAYOUT,
           "--micro-batches", "4", "--batch", "4", "--compute-time", "0.05")
    r = run_dmlbed("run", *job, "--iters", "3", "--out", str(out), "--wait", "--json", timeout=600, report=True)
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout)  # the file matches the parallel schema (helpers.check_summaries)
    assert summary["mode"] == "emulate" and summary["correct"] is True
    assert summary["max_weight_difference"] < 1e-5  # fp32 on the wire, fp32 unsplit on one process
    ranks = [json.load(open(f)) for f in glob.glob(os.path.join(out, "**", "parallel-rank-*.json"), recursive=True)]
    assert sorted(d["rank"] for d in ranks) == list(range(8))
    assert all(len(d["iterations_s"]) == 3 and d["spans"] for d in ranks)
    theory = cli_json("theory", *job)
    measured = summary["bytes_per_kind"]
    for kind in KINDS:  # gloo's message headers on top of the payload: a few per cent at most
        assert measured[kind] == pytest.approx(theory["bytes_per_kind"][kind], rel=0.03), (kind, measured)
    assert measured.get("other", 0) < 0.001 * sum(measured.values())
    assert summary["iteration_theory_s"] == pytest.approx(theory["iteration_s"])
    flow = cli_json("simulate", *job)
    assert summary["flow_model_iteration_s"] == pytest.approx(flow["iteration_s"])
    assert summary["over_flow_model"] == pytest.approx(summary["iteration_s"] / flow["iteration_s"])
    fidelity = summary["fidelity"]
    assert fidelity["scenario_model"]["measured_over_model"] == pytest.approx(summary["over_flow_model"], abs=1e-4)
    assert fidelity["verdict"] in ("faithful", "degraded", "not faithful")
    assert fidelity["cpu"]["scope"] == "measured iterations"  # the ranks said which seconds they measured
    assert len(summary["bubble_per_stage"]) == 2 and all(0 < b < 1 for b in summary["bubble_per_stage"])
    assert {span[1] for span in summary["timeline"]} == {"F", "B", "dp"}
    assert (out / "report.html").is_file() and (out / "launch" / "summary.json").is_file()
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
    emulator's own delay per message still shows in the sums: about 1.5x and 1.13x the flow model). Routed D-mod-k,
    so the emulated switches and the flow model put every connection on the same path (hashed ECMP collides by the
    luck of the ports)."""
    job = ("--topo", "fattree:4", "--routing", "dmodk", "--bw", "100", "--algo", "ring", "--model", MODEL,
           "--parallel", "tp=2,pp=2,dp=4", "--micro-batches", "8", "--batch", "8", "--compute-time", "0.05")
    r = run_dmlbed("run", *job, "--dilation", "8", "--iters", "6", "--out", str(tmp_path / "job"), "--wait", "--json",
                   "--no-report", timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    got, theory = json.loads(r.stdout), cli_json("theory", *job)
    fidelity = got["fidelity"]
    print(f"verdict {fidelity['verdict']} ({fidelity.get('cause')}); bytes over the closed form "
          f"{ {k: round(got['bytes_per_kind'][k] / theory['bytes_per_kind'][k], 4) for k in KINDS} }; iteration "
          f"{got['iteration_s']:.3f} s, flow model {got['flow_model_iteration_s']:.3f} s ({got['over_flow_model']:.3f}x)"
          f", closed form {got['iteration_theory_s']:.3f} s; bubble {[round(b, 3) for b in got['bubble_per_stage']]}")
    assert got["correct"] is True
    assert fidelity["verdict"] == "faithful", fidelity.get("cause")
    for kind in KINDS:
        assert got["bytes_per_kind"][kind] == pytest.approx(theory["bytes_per_kind"][kind], rel=0.02)
    assert got["over_flow_model"] == pytest.approx(1.0, abs=0.10)


def test_a_compare_config_runs_an_emulated_parallel_row_beside_its_flow_model(tmp_path):
    """A compare row with `parallel:` and mode emulate launches the ranks as `run --parallel` does, placed by
    `placement:`; its row carries the verdict, correctness and the measured bytes beside the flow model's row."""
    import csv
    config = tmp_path / "par.yaml"
    config.write_text(
        "name: par\n"
        "defaults: {topo: 'star:4', bw: 100, algo: ring, model: 'gpt:2,64,4,32,128', parallel: 'tp=2,pp=2,dp=1', "
        "placement: tp-in-rack, micro_batches: 4, batch: 8, compute_time: 0.05, iters: 3}\n"
        "runs:\n  - {label: emulated, mode: emulate, dilation: 2}\n  - {label: flow model, mode: simulate}\n")
    r = run_dmlbed("compare", str(config), "--out", str(tmp_path / "out"), "--wait", timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {x["label"]: x for x in csv.DictReader(open(tmp_path / "out" / "comparison.csv"))}
    emulated, flow = rows["emulated"], rows["flow model"]
    assert emulated["mode"] == "emulate" and emulated["correct"] == "True" and emulated["fidelity"], emulated
    assert emulated["placement"] == flow["placement"] == "tp-in-rack" and emulated["dilation"] == "2.0"
    assert float(emulated["bytes_per_kind.tp"]) == pytest.approx(float(flow["bytes_per_kind.tp"]), rel=0.1)
    assert float(emulated["flow_model_iteration_s"]) == pytest.approx(float(flow["iteration_median_s"]), rel=1e-6)
    assert json.load(open(tmp_path / "out" / "emulated" / "launch" / "summary.json"))["completed"] is True
    assert leftovers("star:4") == []


@pytest.mark.benchmark
def test_placement_on_an_oversubscribed_leaf_spine_changes_the_emulated_iteration_by_the_closed_forms_factor(tmp_path):
    """Tensor-parallel groups inside a leaf against across the 4:1 spine (issue 64): the emulated iterations' ratio
    within 10% of the closed form's, as the flow model's is. Each placement at the dilation it needs: inside a leaf
    the eight-way sums are small and many (the emulator's own delay per message shows below 16), across the spine the
    same sums are slow enough at 4."""
    common = ("--topo", "leafspine:2,8,1", "--bw", "100,25", "--algo", "ring", "--model", "gpt:2,64,8,256,128",
              "--micro-batches", "4", "--batch", "16", "--compute-time", "0.02")
    got, closed = {}, {}
    for name, rule, dilation in (("rack", "tp-in-rack", "16"), ("spine", "dp-in-rack", "4")):
        placed = ("--parallel", "tp=8,dp=2", "--placement", rule)
        r = run_dmlbed("run", *common, *placed, "--dilation", dilation, "--iters", "4", "--out",
                       str(tmp_path / name), "--wait", "--json", "--no-report", timeout=1200)
        assert r.returncode == 0, r.stderr[-2000:]
        got[name], closed[name] = json.loads(r.stdout), cli_json("theory", *common, *placed)
        print(f"{name}: iteration {got[name]['iteration_s']:.3f} s, flow model "
              f"{got[name]['flow_model_iteration_s']:.3f} s, closed form {closed[name]['iteration_s']:.3f} s, "
              f"verdict {got[name]['fidelity']['verdict']} ({got[name]['fidelity'].get('cause')})")
    factor = {how: got["spine"][key] / got["rack"][key] for how, key in
              (("emulated", "iteration_s"), ("flow model", "flow_model_iteration_s"))}
    factor["closed form"] = closed["spine"]["iteration_s"] / closed["rack"]["iteration_s"]
    print("TP across the spine over TP in a leaf: " + ", ".join(f"{k} {v:.3f}" for k, v in factor.items()))
    assert all(g["correct"] is True and g["fidelity"]["verdict"] == "faithful" for g in got.values())
    assert factor["emulated"] == pytest.approx(factor["closed form"], rel=0.10)
    assert factor["flow model"] == pytest.approx(factor["closed form"], rel=0.10)
