"""Compute time per rank and iteration (stragglers): the distributions and their draws, the expected slowest rank BSP
waits for (closed form and numeric), theory and simulate against each other, real workers keeping the drawn
times, and bad input refused before anything starts."""

import csv
import math
import statistics

import pytest

from emulation.core.compute import (EXP, FIXED, ComputeModel, SlowRank, compute_model, harmonic, parse_compute,
                                    parse_slow)
from emulation.results.iterations import straggler_report
from helpers import cli_json, run_dmlbed

HOSTS = {f"h{i}": i for i in range(16)}


@pytest.mark.parametrize("text,kind,mean,spread", [("0.3", FIXED, 0.3, 0.0), ("fixed:0.3", FIXED, 0.3, 0.0),
                                                    ("exp:0.2", EXP, 0.2, 0.0), ("lognormal:0.2,0.5", "lognormal", 0.2, 0.5),
                                                    ("normal:0.2,0.05", "normal", 0.2, 0.05), ("0", FIXED, 0.0, 0.0)])
def test_compute_forms_parse(text, kind, mean, spread):
    model = parse_compute(text)
    assert (model.kind, model.mean, model.spread) == (kind, mean, spread)
    assert parse_compute(model.text) == model


@pytest.mark.parametrize("text", ["exp:-1", "exp:nan", "exp:inf", "exp:", "exp:0.2,1", "lognormal:0.2", "normal:0.2,0",
                                  "gamma:1,2", "-0.5", "fast", "lognormal:0,1"])
def test_bad_compute_forms_are_refused_naming_the_valid_ones(text):
    with pytest.raises(ValueError, match="exp:MEAN"):
        parse_compute(text)


def test_slow_hosts_parse_and_resolve():
    assert parse_slow("h3:2x, h5:1.5x@10") == (("h3", 2.0, 0), ("h5", 1.5, 10))
    model = compute_model("exp:0.2", "h3:2x@4", HOSTS)
    assert model.slow == (SlowRank(3, 2.0, 4),) and model.varies
    assert model.factor(3, 3) == 1.0 and model.factor(3, 4) == 2.0 and model.factor(2, 9) == 1.0
    for bad in ("h3:2", "h3:0x", "h3:-1x", "h3:2x@-1", ":2x", "h3:nanx"):
        with pytest.raises(ValueError, match="HOST:FACTORx"):
            parse_slow(bad)
    with pytest.raises(ValueError, match="no such host.*h0, h1, h2, h3, ..., h15"):
        compute_model("0.1", "h99:2x", HOSTS)


def test_draws_are_seeded_per_rank_and_the_same_wherever_drawn():
    model = parse_compute("exp:0.2")
    assert model.times(3, 50, 7) == model.times(3, 50, 7)
    assert model.times(3, 50, 7) != model.times(4, 50, 7) != model.times(3, 50, 8)
    assert parse_compute("0.3").times(0, 3, 0) == [0.3, 0.3, 0.3]
    slow = ComputeModel(FIXED, 0.1, slow=(SlowRank(1, 3.0, 2),))
    assert slow.times(1, 4, 0) == pytest.approx([0.1, 0.1, 0.3, 0.3])
    assert all(t >= 0 for t in parse_compute("normal:0.1,0.2").times(0, 2000, 1))


def test_draws_have_the_asked_mean():
    for text in ("exp:0.2", "lognormal:0.2,0.5", "normal:0.2,0.03"):
        draws = parse_compute(text).times(0, 40000, 3)
        assert statistics.mean(draws) == pytest.approx(0.2, rel=0.03), text


def test_expected_slowest_is_h_n_times_the_mean_for_exponentials():
    assert harmonic(16) == pytest.approx(3.3807, abs=1e-4)
    mean, how = parse_compute("exp:0.2").expected_slowest(range(16))
    assert mean == pytest.approx(0.6761, abs=1e-4) and how.startswith("H_16")
    assert parse_compute("exp:0.2").expected_slowest(range(8))[0] == pytest.approx(0.5436, abs=1e-4)


def test_the_numeric_expectation_meets_a_closed_form_and_the_draws():
    # max of exp(m) and exp(2m): 3m - E[min] = 3m - 2m/3
    model = ComputeModel(EXP, 0.3, slow=(SlowRank(1, 2.0),))
    mean, how = model.expected_slowest([0, 1])
    assert mean == pytest.approx(7 * 0.3 / 3, rel=1e-3) and "numeric" in how
    for text in ("lognormal:0.2,0.5", "normal:0.2,0.05", "exp:0.2"):
        model = parse_compute(text)
        table = model.table(range(8), 20000, 5)
        sampled = statistics.mean(max(c) for c in zip(*table.values()))
        assert model.expected_slowest(range(8))[0] == pytest.approx(sampled, rel=0.02), text
        median = statistics.median(max(c) for c in zip(*table.values()))
        assert model.slowest_quantile(range(8), 0.5) == pytest.approx(median, rel=0.03), text
    n, m = 16, 0.2  # the median of the max of n exponentials: F^-1(2^(-1/n))
    assert parse_compute("exp:0.2").slowest_quantile(range(n)) == pytest.approx(-m * math.log(1 - 0.5 ** (1 / n)),
                                                                              rel=1e-6)


def test_straggler_report_names_the_rank_waited_for():
    ends = {0: [1.0, 1.0, 1.0, 2.0], 1: [1.5, 1.2, 1.9, 1.0], 2: [0.5, 0.5, 0.5, 0.5]}
    report = straggler_report(ends, ends, ["h0", "h1", "h2"], skip=1)
    assert report["iterations"] == 3 and report["most_waited_for"] == "h1"
    assert report["waited_for"] == {"h0": 1, "h1": 2} and report["most_waited_for_share"] == pytest.approx(2 / 3)
    h2 = next(r for r in report["ranks"] if r["host"] == "h2")
    assert h2["wait_mean_s"] == pytest.approx(statistics.mean([0.7, 1.4, 1.5]))
    assert straggler_report({}, {}, []) == {}


@pytest.mark.parametrize("ranks,expected", [(16, 0.676), (8, 0.544)])
def test_theory_and_simulate_agree_on_bsp_under_exponential_compute(tmp_path, ranks, expected):
    common = ("--topo", f"star:{ranks}", "--algo", "ring", "--model", "mlp:64KB", "--bw", "1000", "--compute-time",
              "exp:0.2", "--iters", "200")
    theory = cli_json("theory", *common)
    simulated = cli_json("simulate", *common, "--out", str(tmp_path / "sim"))
    assert theory["iteration_mean_s"] - theory["gst_median_s"] == pytest.approx(expected, abs=0.001)
    assert "H_" in theory["compute"]["formula"]
    assert simulated["iteration_mean_s"] == pytest.approx(theory["iteration_mean_s"], rel=0.05)
    assert simulated["iteration_median_s"] == pytest.approx(theory["iteration_median_s"], rel=0.10)
    rows = list(csv.DictReader(open(tmp_path / "sim" / "iterations.csv")))
    assert len(rows) == 200 and len({r["iteration_s"] for r in rows}) > 100  # each iteration its own draws
    assert 0 < simulated["stragglers"]["most_waited_for_share"] < 0.3  # i.i.d.: no rank stands out


def test_a_persistent_slow_rank_is_the_one_waited_for_in_simulation_and_theory(tmp_path):
    common = ("--topo", "star:8", "--algo", "ring", "--model", "mlp:64KB", "--bw", "1000", "--compute-time",
              "normal:0.1,0.01", "--slow", "h5:2x", "--iters", "50")
    simulated = cli_json("simulate", *common, "--out", str(tmp_path / "sim"))
    assert simulated["stragglers"]["most_waited_for"] == "h5"
    assert simulated["stragglers"]["most_waited_for_share"] == 1.0
    theory = cli_json("theory", *common)
    assert theory["iteration_mean_s"] == pytest.approx(simulated["iteration_mean_s"], rel=0.02)
    assert theory["iteration_mean_s"] - theory["gst_median_s"] == pytest.approx(0.2, rel=0.05)


def test_fixed_compute_keeps_the_summary_as_it_was():
    s = cli_json("theory", "--topo", "star:4", "--algo", "ring", "--compute-time", "0.3")
    assert s["compute_median_s"] == 0.3 and s.get("iteration_mean_s") is None and "stragglers" not in s


@pytest.mark.parametrize("args,message", [
    (("--compute-time", "exp:-1"), "--compute-time exp:-1 is not valid"),
    (("--compute-time", "lognormal:0.2"), "lognormal:MEAN,SIGMA"),
    (("--slow", "h9:2x"), "--slow h9: no such host"),
    (("--slow", "h1:2"), "--slow h1:2 is not valid"),
    (("--servers", "1", "--algo", "ps", "--slow", "h0:2x"), "--slow h0: that host does not compute"),
])
def test_bad_compute_input_is_one_line_and_exit_2(tmp_path, args, message):
    base = {"--algo": "ring"}
    given = dict(zip(args[::2], args[1::2]))
    r = run_dmlbed("run", "--topo", "star:4", "--algo", given.pop("--algo", base["--algo"]), "--local",
                   *[x for kv in given.items() for x in kv], "--out", str(tmp_path / "r"), timeout=60)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "r").exists()


def test_models_refuse_varying_compute_they_cannot_model():
    r = run_dmlbed("simulate", "--topo", "star:4", "--algo", "ring", "--compute-time", "exp:0.2", "--overlap",
                   "--out", "/tmp/never-written-by-dmlbed-test", timeout=60)
    assert r.returncode == 2 and "without --overlap" in r.stderr
    r = run_dmlbed("theory", "--topo", "star:4", "--algo", "ibatch", "--slow", "h2:2x")
    assert r.returncode == 2 and "forward phase" in r.stderr


def test_real_workers_keep_their_drawn_compute_times_and_the_slow_rank_is_waited_for(tmp_path):
    out = tmp_path / "run"
    s = cli_json("run", "--topo", "star:4", "--algo", "ring", "--model", "mlp:64KB", "--batch", "4", "--iters", "8",
                 "--compute-time", "exp:0.05", "--slow", "h2:6x", "--seed", "11", "--local", "--out", str(out))
    assert s["correct"] is True and s["iteration_mean_s"] > 0
    model = compute_model("exp:0.05", "h2:6x", {f"h{i}": i for i in range(4)})
    rows = list(csv.DictReader(open(out / "workers.csv")))
    late = []
    for row in rows:
        drawn = model.times(int(row["rank"]), 8, 11)[int(row["iteration"])]
        late.append(float(row["compute_s"]) - drawn)
        # a sleep is never early, and late by a few ms (tens on a machine busy with make test's emulated networks)
        assert -0.005 <= late[-1] <= 0.15, row
    assert statistics.median(late) <= 0.02, late  # most iterations keep their draw closely
    assert s["stragglers"]["most_waited_for"] == "h2" and s["stragglers"]["iterations"] == 6  # past warm-up


@pytest.mark.emulation
def test_emulated_stragglers_keep_their_draws_and_the_slow_rank_is_waited_for(tmp_path):
    from test_emulation import leftovers
    out = tmp_path / "run"
    s = cli_json("run", "--topo", "star:4", "--algo", "ring", "--model", "mlp:64KB", "--batch", "4", "--iters", "10",
                 "--bw", "100", "--compute-time", "exp:0.1", "--slow", "h1:4x", "--seed", "3", "--out", str(out),
                 timeout=600)
    assert s["correct"] is True and s["sum_verified"] is True
    model = compute_model("exp:0.1", "h1:4x", {f"h{i}": i for i in range(4)})
    for row in csv.DictReader(open(out / "workers.csv")):
        drawn = model.times(int(row["rank"]), 10, 3)[int(row["iteration"])]
        assert float(row["compute_s"]) == pytest.approx(drawn, abs=0.05), row
    assert s["stragglers"]["most_waited_for"] == "h1"
    assert s["iteration_mean_s"] > s["gst_median_s"]
    assert leftovers("star:4") == []


def test_fidelity_leaves_transfers_that_waited_for_a_computing_receiver_to_the_scenario():
    from emulation.core.topology import parse
    from emulation.results.links import iteration_links
    topo, mb = parse("star:2"), 1_000_000

    def traces(recv_start):
        return [{"iteration": 0, "dir": "send", "rank": 0, "peer": 1, "level": 0, "stream": 0, "step": 0,
                 "start": 0.0, "end": 0.1, "wire_bytes": mb, "ports": None},
                {"iteration": 0, "dir": "recv", "rank": 1, "peer": 0, "level": 0, "stream": 0, "step": 0,
                 "start": recv_start, "end": recv_start + 0.02, "wire_bytes": mb, "ports": None}]
    rows = {0: [{"tx_bytes": {"h0-eth0": mb}}], 1: [{}]}
    waited = iteration_links(topo, rows, traces(0.5), 0, (100.0,))
    assert waited[0]["busy_s"] == pytest.approx(0.52)  # counted as the emulator's: 0.08 s of need in 0.52 s busy
    skipped = []
    assert iteration_links(topo, rows, traces(0.5), 0, (100.0,), receiver_late_s=0.005, skipped=skipped) == []
    assert skipped == [1]
    on_time = iteration_links(topo, rows, traces(0.001), 0, (100.0,), receiver_late_s=0.005, skipped=skipped)
    assert on_time and skipped == [1]  # a receiver ready within 5 ms: the link is judged
