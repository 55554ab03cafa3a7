"""`--parallel` on theory and simulate: the closed form and the flow model answer the same job alike, placement
changes the iteration by the closed form's factor in both, bubbles follow (p-1)/(m+p-1), summaries match their
schema, and bad input is one line and exit 2."""

import json

import pytest

from helpers import cli_json, run_dmlbed

JOB = ("--algo", "ring", "--model", "gpt-mini", "--compute-time", "0.02")


def both(*args):
    """The closed form's and the flow model's summaries of one job."""
    return cli_json("theory", *JOB, *args), cli_json("simulate", *JOB, *args)


def test_theory_and_simulate_agree_on_a_job_without_contention():
    theory, simulated = both("--topo", "fattree:4", "--bw", "100", "--parallel", "tp=2,pp=2,dp=4",
                             "--micro-batches", "8", "--batch", "16", "--schedule", "gpipe")
    assert theory["mode"] == "theory" and simulated["mode"] == "simulate"
    assert theory["bytes_per_kind"] == simulated["bytes_per_kind"]
    assert simulated["iteration_s"] == pytest.approx(theory["iteration_s"], rel=0.05)
    assert set(theory["critical_path_s"]) == {"tp", "pp", "dp"}
    assert all(span[1] in ("F", "B", "send-F", "send-B", "dp") for span in simulated["timeline"])


def test_placement_changes_the_iteration_by_the_closed_forms_factor_in_the_flow_model_too():
    common = ("--topo", "leafspine:2,8,1", "--bw", "100,25", "--micro-batches", "4", "--batch", "8")
    rack = both(*common, "--parallel", "tp=8,dp=2")
    spine = both(*common, "--parallel", "tp=8,dp=2,order=dp-tp-pp")
    theory_factor = spine[0]["iteration_s"] / rack[0]["iteration_s"]
    flow_factor = spine[1]["iteration_s"] / rack[1]["iteration_s"]
    assert spine[0]["phase_s"]["tp_allreduce"] > 4 * rack[0]["phase_s"]["tp_allreduce"]  # TP across the spine
    assert flow_factor == pytest.approx(theory_factor, rel=0.10)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
def test_a_4_stage_pipelines_bubble_follows_p_minus_1_over_m_plus_p_minus_1(schedule):
    for m in (4, 8, 16):
        got = cli_json("simulate", *JOB, "--topo", "star:4", "--bw", "1000", "--parallel", "pp=4",
                       "--micro-batches", str(m), "--batch", str(m), "--schedule", schedule, "--compute-time", "0.4")
        assert max(got["bubble_per_stage"]) == pytest.approx(3 / (m + 3), rel=0.10)


def test_a_summary_goes_to_out_and_matches_its_schema(tmp_path):
    r = run_dmlbed("simulate", *JOB, "--topo", "star:4", "--parallel", "tp=2,pp=2", "--micro-batches", "2",
                   "--batch", "4", "--out", str(tmp_path / "job"), report=True)
    assert r.returncode == 0, r.stderr
    assert "pipeline.svg" in open(tmp_path / "job" / "report.html").read()
    assert (tmp_path / "job" / "pipeline.png").stat().st_size > 1000
    summary = json.load(open(tmp_path / "job" / "summary.json"))
    assert summary["parallel"] == "tp=2,pp=2,dp=1" and summary["provenance"]["command"]
    assert "iteration" in r.stdout and "bubble" in r.stdout


@pytest.mark.parametrize("args, said", [
    (("--topo", "star:4", "--parallel", "tp=2,dp=4"), "star:4 has 4 hosts"),
    (("--topo", "star:8", "--parallel", "tp=2,dp=2"), "the job has 8 hosts"),
    (("--topo", "star:4", "--parallel", "tp=3,dp=1", "--hosts", "h0..h2"), "8 attention heads do not split over tp=3"),
    (("--topo", "star:6", "--parallel", "pp=3,dp=2"), "8 layers do not split into pp=3"),
    (("--topo", "star:4", "--parallel", "pp=2,dp=2", "--batch", "5", "--micro-batches", "2"), "--batch 5"),
    (("--topo", "star:4", "--parallel", "tp=2,dp=2,zz=1"), "'zz=1' is not a degree"),
    (("--topo", "star:4", "--parallel", "dp=4", "--compute-time", "exp:0.1"), "one fixed time"),
    (("--topo", "star:4", "--parallel", "dp=4", "--schedule", "zb"), "--schedule"),
])
def test_bad_input_is_one_line_and_exit_2(args, said):
    for command in ("theory", "simulate"):
        r = run_dmlbed(command, *JOB, *args)
        assert r.returncode == 2 and said in r.stderr, (command, r.stderr)
        assert len([line for line in r.stderr.splitlines() if line.strip()]) == 1, r.stderr


def test_a_transformer_without_parallel_and_parallel_without_a_transformer_say_what_to_give():
    r = run_dmlbed("theory", "--topo", "star:4", "--algo", "ring", "--model", "gpt-tiny")
    assert r.returncode == 2 and "runs with --parallel" in r.stderr
    r = run_dmlbed("theory", "--topo", "star:4", "--algo", "ring", "--parallel", "dp=4")
    assert r.returncode == 2 and "--model lenet5 is not a transformer" in r.stderr
    r = run_dmlbed("theory", "--topo", "star:4", "--algo", "bml", "--model", "gpt-tiny", "--parallel", "dp=4")
    assert r.returncode == 2 and "runs ring here" in r.stderr


@pytest.mark.benchmark
def test_the_flow_model_answers_a_1024_gpu_3d_parallel_job_within_a_minute():
    import time
    started = time.monotonic()
    got = cli_json("simulate", "--topo", "fattree:16", "--bw", "100Gbit", "--algo", "ring", "--model", "gpt3-175b",
                   "--parallel", "tp=8,pp=8,dp=16", "--micro-batches", "32", "--batch", "32", "--compute-time", "2")
    took = time.monotonic() - started
    print(f"1,024 GPUs (gpt3-175b, tp=8,pp=8,dp=16 on fattree:16): {took:.1f} s")
    assert got["ranks"] == 1024 and got["over_theory"] == pytest.approx(1.0, rel=0.10)
    assert took < 60


@pytest.mark.benchmark
def test_the_flow_model_answers_an_8192_gpu_3d_parallel_job():
    import time
    started = time.monotonic()
    got = cli_json("simulate", "--topo", "fattree:32", "--bw", "100Gbit", "--algo", "ring", "--model", "gpt3-175b",
                   "--parallel", "tp=8,pp=8,dp=128", "--micro-batches", "32", "--batch", "32", "--compute-time", "2",
                   timeout=1800)
    took = time.monotonic() - started
    print(f"8,192 GPUs (gpt3-175b, tp=8,pp=8,dp=128 on fattree:32): {took:.1f} s, iteration "
          f"{got['iteration_s']:.3f} s, {got['over_theory']:.3f}x the closed form")
    assert got["ranks"] == 8192 and got["over_theory"] == pytest.approx(1.0, rel=0.10)
    assert took < 900


def test_a_compare_config_runs_parallel_jobs_in_closed_form_and_on_the_flow_model_side_by_side(tmp_path):
    """A compare row with `parallel:` runs the parallel job in its mode (schedule and placement as keys, swept like
    any other); its comparison row carries the iteration, the layout, the bubble and the bytes per kind."""
    import csv
    config = tmp_path / "par.yaml"
    config.write_text(
        "name: par\n"
        "defaults: {topo: 'leafspine:4,4,2', bw: '100,25', algo: ring, model: 'gpt:4,64,8,256,128', "
        "parallel: 'tp=4,pp=2,dp=2', micro_batches: 4, batch: 16, compute_time: 0.02, iters: 2}\n"
        "sweep: {schedule: [gpipe, 1f1b]}\n"
        "runs:\n"
        "  - {label: closed, mode: theory, placement: tp-in-rack}\n"
        "  - {label: flow, mode: simulate, placement: tp-in-rack}\n"
        "  - {label: flow across, mode: simulate, placement: tp-across-racks}\n"
        "targets:\n"
        "  - {what: across over in a rack, row: flow across, relative_to: flow, metric: iteration_median_s, "
        "at_least: 2}\n")
    r = run_dmlbed("compare", str(config), "--out", str(tmp_path / "out"), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "out" / "comparison.csv")))
    assert sorted((x["label"], x["schedule"]) for x in rows) == sorted(
        (label, s) for label in ("closed", "flow", "flow across") for s in ("gpipe", "1f1b"))
    for x in rows:
        alone = cli_json(x["mode"] if x["mode"] == "theory" else "simulate", "--topo", "leafspine:4,4,2", "--bw",
                         "100,25", "--algo", "ring", "--model", "gpt:4,64,8,256,128", "--parallel", "tp=4,pp=2,dp=2",
                         "--placement", x["placement"], "--schedule", x["schedule"], "--micro-batches", "4",
                         "--batch", "16", "--compute-time", "0.02", *(["--out", str(tmp_path / x["label"] / x["schedule"])]
                                                                     if x["mode"] == "simulate" else []))
        assert float(x["iteration_median_s"]) == pytest.approx(alone["iteration_s"], rel=1e-9), x["label"]
        assert x["parallel"] == alone["parallel"] and int(x["bytes_per_kind.tp"]) == alone["bytes_per_kind"]["tp"]
    across = {x["schedule"]: float(x["iteration_median_s"]) for x in rows if x["label"] == "flow across"}
    inside = {x["schedule"]: float(x["iteration_median_s"]) for x in rows if x["label"] == "flow"}
    assert all(across[s] > inside[s] for s in across)  # tensor parallelism over the 4:1 spine costs
    result = json.loads(r.stdout)
    assert [t["verdict"] for t in result["targets"]] == ["met", "met"], result["targets"]


def test_a_row_of_several_jobs_refuses_a_parallel_layout(tmp_path):
    config = tmp_path / "pj.yaml"
    config.write_text("name: pj\ndefaults: {topo: 'star:8', algo: ring, model: 'mlp:1MB', parallel: 'tp=2,dp=4', "
                      "mode: simulate}\nruns:\n  - {label: two, jobs: ['name=a hosts=h0..h3', 'name=b hosts=h4..h7']}\n")
    r = run_dmlbed("compare", str(config), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "runs[0] (two): 'parallel' is one job on its own row" in r.stderr
    assert not (tmp_path / "out").exists()
