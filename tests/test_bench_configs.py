"""The benchmark as configs: configs/bench/ checked before anything runs, targets parsed (a target that cannot be
missed refused) and judged by the one judge, repetitions judged each on its own, and `command:` rows run as a user
runs them (a command that needs no network in a process of its own, timed, with its own peak memory)."""

import csv
import glob
import json
import math
import os
import re
import subprocess
import sys

import pytest

from emulation.backends import matrix, matrix_rows
from emulation.commands.base import matrix_passed
import emulation.commands.cli  # noqa: F401 (the harness hands command rows its parser, as when dmlbed runs)
from emulation.commands.command_rows import COMMAND_ROWS
from emulation.results import targets
from emulation.results.claims import judge as judge_claim
from helpers import ROOT

BENCH = sorted(glob.glob(os.path.join(ROOT, "configs", "bench", "*.yaml")))
LABELS = ["a", "b"]


def test_every_benchmark_config_is_checked_before_anything_runs(tmp_path):
    assert {os.path.basename(p) for p in BENCH} >= {"timing.yaml", "low-rate.yaml", "overlap.yaml",
                                                    "rank-start.yaml", "scale.yaml"}
    for path in BENCH:
        job = matrix.prepare(path, str(tmp_path / os.path.basename(path)), command_rows=COMMAND_ROWS)
        assert job.targets, path
        labels = set(matrix.row_labels(job.entries))
        assert all(t["row"] in labels | {targets.EVERY_ROW} for t in job.targets), path


def target(**kw):
    return targets.target({"what": "w", "row": "a", "metric": "gst_ratio", **kw}, "targets[0]", LABELS)


@pytest.mark.parametrize("kw, words", [
    ({"at_most": 1.15, "at_least": 1.0}, "exactly one of"),
    ({}, "exactly one of"),
    ({"at_least": 0}, "cannot be missed"),
    ({"between": [0, 1e9], "metric": "gst_cv"}, None),
    ({"at_most": 1, "color": "red"}, "unknown key 'color'"),
    ({"at_most": 1, "row": "c"}, "row 'c' is not a run label"),
    ({"at_most": 1, "metric": "speed"}, "metric 'speed' is not one of"),
    ({"equals": "faithful"}, "'equals' is for"),
    ({"metric": "fidelity", "equals": "great"}, "fidelity takes 'equals' with one of faithful"),
    ({"metric": "fidelity", "at_most": 1}, "fidelity takes 'equals'"),
    ({"at_most": "low"}, "at_most needs a number"),
    ({"between": [2, 1]}, "between needs [low, high]"),
    ({"at_most": 1, "relation": "ratio"}, "needs 'relative_to'"),
    ({"at_least": -1, "relative_to": "b", "relation": "reduction"}, None),
    ({"at_least": -math.inf, "relative_to": "b", "relation": "reduction"}, "cannot be missed"),
])
def test_a_malformed_or_unfailable_target_is_refused_naming_the_key(kw, words):
    if words is None:
        if kw.get("between") == [0, 1e9]:  # the whole domain but a finite top: still can be missed (above 1e9)
            assert target(**kw)["bound"].high == 1e9
        else:
            assert target(**kw)["bound"].low == -1
        return
    with pytest.raises(targets.TargetError, match=words.replace("[", r"\[").replace("]", r"\]")):
        target(**kw)


def rows(*values):
    return [{"label": label, "mode": "simulate", "repeat": rep, **v} for label, rep, v in values]


def test_targets_are_judged_in_each_group_and_every_row_target_reads_only_rows_with_the_metric():
    data = [("a", 1, {"gst_ratio": 1.1, "jct_s": 6.0, "correct": True}),
            ("b", 1, {"gst_ratio": 1.0, "jct_s": 10.0, "correct": None}),
            ("a", 2, {"gst_ratio": 1.2, "jct_s": 5.0, "correct": False}),
            ("b", 2, {"gst_ratio": 1.0, "jct_s": 10.0, "correct": None})]
    checked = [target(at_most=1.15),
               targets.target({"what": "r", "row": "a", "relative_to": "b", "metric": "jct_s",
                               "relation": "reduction", "at_least": 0.45}, "t", LABELS),
               targets.target({"what": "c", "row": "*", "metric": "correct", "equals": True}, "t", LABELS)]
    table = targets.table(checked, rows(*data), ["repeat"])
    got = [(r["what"], r["repeat"], r["verdict"]) for r in table]
    assert got == [("w", 1, "met"), ("w", 2, "missed"), ("r", 1, "missed"), ("r", 2, "met"),
                   ("c", 1, "met"), ("c", 2, "missed")]
    assert table[2]["ours"] == pytest.approx(0.4) and table[4]["ours"] == "1/1 rows"
    assert targets.bench_line(table) == "3/6 targets met, 3 missed"
    assert matrix_passed({"rows": [], "targets": table}) == 1
    assert matrix_passed({"rows": [], "targets": [r for r in table if r["met"]]}) == 0


def test_a_median_over_repetitions_is_judged_once_per_group_of_the_other_keys():
    sweep = {"mode": ["simulate", "emulate"], "repeat": [1, 2, 3]}
    data = [{"label": "a", "mode": m, "repeat": rep, "slowdown": v, "fidelity": "faithful"}
            for m, values in (("emulate", (1.3, 1.5, 1.55)), ("simulate", (1.5, 1.5, 1.5)))
            for rep, v in zip((1, 2, 3), values)]
    held = targets.target({"what": "e", "row": "a", "metric": "slowdown", "in": {"mode": "emulate"},
                           "median_over": "repeat", "between": [1.4, 1.6]}, "t", LABELS, sweep)
    ratio = targets.target({"what": "s", "row": "a", "metric": "slowdown", "in": {"mode": "simulate"},
                            "relative_in": {"mode": "emulate"}, "median_over": "repeat", "between": [0.9, 1.1]},
                           "t", LABELS, sweep)
    each = targets.target({"what": "x", "row": "a", "metric": "slowdown", "in": {"mode": "emulate"},
                           "between": [1.4, 1.6]}, "t", LABELS, sweep)
    table = targets.table([held, ratio, each], data, ["mode", "repeat"])
    got = [(r["what"], r["mode"], r["repeat"], r["verdict"]) for r in table]
    assert got == [("e", "emulate", "median of 3", "met"), ("s", "simulate", "median of 3", "met"),
                   ("x", "emulate", 1, "missed"), ("x", "emulate", 2, "met"), ("x", "emulate", 3, "met")]
    assert table[0]["ours"] == pytest.approx(1.5) and table[1]["ours"] == pytest.approx(1.0)
    data[1]["slowdown"] = None  # a repetition without its value: the median has none
    assert targets.table([held], data, ["mode", "repeat"])[0]["verdict"] == "no value"
    for bad, words in ((dict(median_over="seed"), "is not a key the config sweeps"),
                       (dict(median_over="repeat", row="*"), "takes a named row's number"),
                       (dict(median_over="repeat", **{"in": {"repeat": 1}}), "cannot also be fixed")):
        with pytest.raises(targets.TargetError, match=words):
            targets.target({"what": "e", "row": "a", "metric": "slowdown", "at_most": 2, **bad}, "t", LABELS, sweep)


def test_an_every_row_target_reads_each_row_against_a_reference_row_or_its_own_label_elsewhere():
    data = [("a", 1, {"switch_rss_kb": 1000, "switch_pid": 7}), ("b", 1, {"switch_rss_kb": 1050, "switch_pid": 7}),
            ("a", 2, {"switch_rss_kb": 1080, "switch_pid": 7}), ("b", 2, {"switch_rss_kb": 1200, "switch_pid": 9})]
    growth = targets.target({"what": "g", "row": "*", "metric": "switch_rss_kb", "relative_to": "a",
                             "relative_in": {"repeat": 1}, "at_most": 1.10}, "t", LABELS, {"repeat": [1, 2]})
    same = targets.target({"what": "p", "row": "*", "metric": "switch_pid", "relative_to": "a",
                           "relative_in": {"repeat": 1}, "relation": "difference", "between": [0, 0]}, "t", LABELS,
                          {"repeat": [1, 2]})
    own = targets.target({"what": "o", "row": "*", "metric": "switch_rss_kb", "relative_in": {"repeat": 1},
                          "at_most": 1.10}, "t", LABELS, {"repeat": [1, 2]})
    table = targets.table([growth, same, own], rows(*data), ["repeat"])
    got = [(r["what"], r["repeat"], r["verdict"], r["ours"]) for r in table]
    # repetition 2: b grew 20% over the first run and its switch is another process; against its own label's
    # first repetition b grew 14%
    assert got == [("g", 1, "met", "2/2 rows"), ("g", 2, "missed", "1/2 rows"), ("p", 1, "met", "2/2 rows"),
                   ("p", 2, "missed", "1/2 rows"), ("o", 1, "met", "2/2 rows"), ("o", 2, "missed", "1/2 rows")]


@pytest.mark.skipif(os.geteuid() != 0, reason="adds a veth pair (root)")
def test_the_matrix_watch_reports_what_a_run_left_beyond_what_was_there_before(tmp_path):
    from emulation.net import leftovers
    subprocess.run(["ip", "link", "add", "dmlbedsoakA", "type", "veth", "peer", "name", "dmlbedsoakA0"], check=True)
    try:
        watch = matrix_rows.MachineWatch()
        # only this test's own interfaces are judged: the suite's emulation group may start a network meanwhile
        assert [x for x in watch.after_run()["leftovers"] if "dmlbedsoak" in x] == []
        subprocess.run(["ip", "link", "add", "dmlbedsoakB", "type", "veth", "peer", "name", "dmlbedsoakB0"], check=True)
        try:
            after = watch.after_run()
            mine = [x for x in after["leftovers"] if "dmlbedsoak" in x]
            assert mine == ["interface dmlbedsoakB", "interface dmlbedsoakB0"]
            assert after["leftover_count"] == len(after["leftovers"]) >= 2
        finally:
            subprocess.run(["ip", "link", "del", "dmlbedsoakB"], check=False)
    finally:
        subprocess.run(["ip", "link", "del", "dmlbedsoakA"], check=False)
    assert leftovers.rss_kb(os.getpid()) > 0 and leftovers.rss_kb(None) is None


def test_a_topology_file_beside_a_config_is_read_from_there_in_runs_and_command_rows(tmp_path, monkeypatch):
    (tmp_path / "topos").mkdir()
    spec = "topos/ls.yaml"
    subprocess.run([sys.executable, "-m", "emulation.commands.cli", "topo", "leafspine:2,2,1", "--export",
                    str(tmp_path / spec)], cwd=ROOT, check=True, capture_output=True)
    config = tmp_path / "c.yaml"
    config.write_text(f"name: c\nruns:\n  - {{label: a, topo: {spec}, algo: ring, mode: simulate}}\n"
                      f"  - {{label: b, command: \"jobs --topo {spec} --algo ring --mode simulate --job 'name=x hosts=h0,h1' --job 'name=y hosts=h2,h3'\"}}\n"
                      f"  - {{label: c, topo: star:4, algo: ring, mode: simulate}}\n")
    monkeypatch.chdir(ROOT)  # not the config's folder
    data = matrix.load(str(config))
    assert data["runs"][0]["topo"] == str(tmp_path / spec) and data["runs"][2]["topo"] == "star:4"
    assert data["runs"][1]["command"] == (f"jobs --topo {tmp_path / spec} --algo ring --mode simulate "
                                        f"--job 'name=x hosts=h0,h1' --job 'name=y hosts=h2,h3'")
    matrix.prepare(str(config), str(tmp_path / "out"), command_rows=COMMAND_ROWS)  # every row checked: the file found


def test_the_shapes_benchmarks_topology_file_is_what_topo_export_writes(tmp_path):
    out = tmp_path / "ls.yaml"
    subprocess.run([sys.executable, "-m", "emulation.commands.cli", "topo", "leafspine:4,4,2", "--export", str(out)],
                   cwd=ROOT, check=True, capture_output=True)
    assert out.read_text() == open(os.path.join(ROOT, "configs", "bench", "topologies", "leafspine-4-4-2.yaml")).read()


def test_an_every_row_target_skips_groups_without_its_metric_and_says_when_no_row_has_it():
    data = [{"label": "net", "mode": "emulate", "exit_code": 0}, {"label": "a", "mode": "emulate", "exit_code": None},
            {"label": "a", "mode": "simulate"}]
    exits = targets.target({"what": "e", "row": "*", "metric": "exit_code", "between": [0, 0]}, "t", ["net", "a"])
    nowhere = targets.target({"what": "n", "row": "*", "metric": "leftover_count", "at_most": 0}, "t", ["net", "a"])
    table = targets.table([exits, nowhere], data, ["mode"])
    assert [(r["what"], r["mode"], r["verdict"], r["ours"]) for r in table] == [
        ("e", "emulate", "met", "1/1 rows"), ("n", None, "no value", "0/0 rows")]


def test_a_benchmarks_runs_are_judged_again_without_running_anything(tmp_path):
    folder = tmp_path / "patterns"
    folder.mkdir()
    row = {"label": "net fattree:4 patterns", "mode": "emulate", "exit_code": 0,
           "pattern_summary.stride:1.measured_over_flow_model_range": [0.95, 1.02],
           "pattern_summary.stride:2.measured_over_flow_model_range": [0.85, 1.0]}
    (folder / "comparison.json").write_text(json.dumps([row]))
    r = subprocess.run([sys.executable, "-m", "emulation.commands.cli", "reproduce", "--bench", "patterns", "--judge",
                        "--out", str(tmp_path), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr[-2000:]  # one missed, three without a value
    verdicts = {t["what"].split(":")[0]: t["verdict"] for t in json.loads(r.stdout)["targets"]}
    assert verdicts["stride 1"] == "met" and verdicts["stride 2"] == "missed" and verdicts["stride 4"] == "no value"
    with open(folder / "targets.csv") as f:
        assert len(list(csv.DictReader(f))) == 6
    assert json.loads((tmp_path / "provenance.json").read_text())["judged_only"] is True
    again = subprocess.run([sys.executable, "-m", "emulation.commands.cli", "reproduce", "--bench", "shapes",
                            "--judge", "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "holds no run of shapes" in again.stderr


def test_paper_claims_and_targets_share_the_judge():
    claim = {"paper": 2.0, "tolerance": 0.1}
    assert judge_claim(claim, 2.19)[0] and not judge_claim(claim, 2.21)[0]
    assert judge_claim({"paper": (1.0, 2.0)}, 1.5)[0] and judge_claim({"paper": 0.0, "tolerance": 0.1}, -0.05)[0]
    assert target(between=[1.8, 2.2])["bound"].holds(2.19) and not target(between=[1.8, 2.2])["bound"].holds(2.21)


def write_config(tmp_path, text):
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return str(path)


def test_a_row_runs_again_until_its_figure_is_there_and_a_runs_link_events_are_its_figures(tmp_path):
    path = write_config(tmp_path, "defaults: {topo: 'fattree:4', algo: ring, model: 'mlp:4MB', mode: theory, "
                        "iters: 12, compute_time: 0.2}\nruns:\n"
                        "  - {label: never, event: ['h5=50@5it'], "
                        "until: {metric: link_events.0.connections_across_before, attempts: 3}}\n"
                        "  - {label: at-once, event: ['h5=50@5it'], until: {metric: link_events.0.after_over_before, "
                        "attempts: 3}}\n  - {label: plain}\n")
    logged = []
    rows = {r["label"]: r for r in matrix.execute(matrix.prepare(path, str(tmp_path / "out")), logged.append)["rows"]}
    assert rows["never"]["attempts"] == 3 and rows["at-once"]["attempts"] == 1 and "attempts" not in rows["plain"]
    assert sum(": again (" in m for m in logged) == 2, logged  # the first two attempts of "never"
    assert rows["at-once"]["link_events.0.after_over_before"] == pytest.approx(2.0)
    assert rows["at-once"]["link_events.0.link"] == "h5-e1_0" and "link_events.0.link" not in rows["plain"]


@pytest.mark.parametrize("until", ["{metric: x}", "{metric: x, attempts: 0}", "{metric: x, attempts: 21}", "[x]",
                                   "{metric: 3, attempts: 2}", "{metric: x, attempts: 2, after: 1}"])
def test_a_malformed_until_is_refused_naming_what_it_takes(tmp_path, until):
    path = write_config(tmp_path, f"runs:\n  - {{topo: 'star:4', algo: ring, mode: theory, until: {until}}}\n")
    with pytest.raises(matrix.ConfigError, match=r"runs\[0\]: 'until' needs \{metric: FIGURE, attempts: N\}"):
        matrix.prepare(path, str(tmp_path / "out"))


def test_a_key_taken_from_an_earlier_rows_figure_is_set_when_the_row_runs(tmp_path):
    path = write_config(tmp_path, "defaults: {topo: 'star:4', algo: ring, model: 'mlp:4MB', mode: theory}\nruns:\n"
                        "  - {label: alone}\n"
                        "  - {label: twice, compute_time: {from: alone, metric: gst_median_s, times: 2}}\n"
                        "  - {label: nothing, compute_time: {from: alone, metric: accuracy}}\n")
    rows = {r["label"]: r for r in matrix.execute(matrix.prepare(path, str(tmp_path / "out")))["rows"]}
    assert rows["twice"]["compute_median_s"] == pytest.approx(2 * rows["alone"]["gst_median_s"], rel=1e-5)
    assert rows["nothing"]["error"] == "not run: compute_time: row 'alone' has no accuracy (got None)"


@pytest.mark.parametrize("value, words", [
    ("{from: later, metric: gst_median_s}", "is taken from row 'later', which is not listed before it"),
    ("{from: a, metric: gst_median_s, times: 0}", "needs {from: LABEL, metric: FIGURE, times: F}"),
    ("{from: a, metric: gst_median_s, plus: 1}", "needs {from: LABEL, metric: FIGURE, times: F}"),
    ("{from: a}", "needs {from: LABEL, metric: FIGURE, times: F}")])
def test_a_malformed_key_from_another_row_is_refused(tmp_path, value, words):
    path = write_config(tmp_path, "defaults: {topo: 'star:4', algo: ring, mode: theory}\nruns:\n  - {label: a}\n"
                        f"  - {{label: b, compute_time: {value}}}\n  - {{label: later}}\n")
    with pytest.raises(matrix.ConfigError, match=re.escape(f"runs[1] (b): 'compute_time' ") + ".*" + re.escape(words)):
        matrix.prepare(path, str(tmp_path / "out"))


def test_repeat_runs_every_row_that_many_times_each_in_its_own_folder(tmp_path):
    path = write_config(tmp_path, "repeat: 3\nruns:\n  - {label: a, topo: 'star:4', algo: ring, mode: theory}\n"
                        "  - {label: b, topo: 'star:4', algo: ps, mode: theory}\n"
                        "targets:\n  - {what: w, row: a, metric: gst_median_s, at_most: 100}\n")
    job = matrix.prepare(path, str(tmp_path / "out"))
    # round-robin: the whole matrix, then again
    assert [(e["label"], e["sweep"]["repeat"]) for e in job.entries] == [("a", 1), ("b", 1), ("a", 2), ("b", 2),
                                                                          ("a", 3), ("b", 3)]
    assert len({e["config"].out for e in job.entries}) == 6
    result = matrix.execute(job)
    assert [t["verdict"] for t in result["targets"]] == ["met"] * 3
    with open(tmp_path / "out" / "targets.csv") as f:
        assert [r["repeat"] for r in csv.DictReader(f)] == ["1", "2", "3"]
    only = write_config(tmp_path, "repeat: 3\nruns:\n  - {label: a, topo: 'star:4', algo: ring, mode: theory}\n"
                        "targets:\n  - {what: w, row: a, metric: gst_median_s, at_most: 100, in: {repeat: 2}}\n")
    assert [t["repeat"] for t in matrix.execute(matrix.prepare(only, str(tmp_path / "only")))["targets"]] == [2]
    with pytest.raises(matrix.ConfigError, match="is not a value the config sweeps"):
        matrix.prepare(write_config(tmp_path, "repeat: 3\nruns:\n  - {label: a, topo: 'star:4', algo: ring}\n"
                                    "targets:\n  - {what: w, row: a, metric: gst_ratio, at_most: 2, "
                                    "in: {repeat: 4}}\n"), str(tmp_path / "bad"))


@pytest.mark.parametrize("text, words", [
    ("repeat: 0\nruns:\n  - {topo: 'star:4', algo: ring}\n", "'repeat' must be a whole number"),
    ("repeat: 2\nsweep: {repeat: [1]}\nruns:\n  - {topo: 'star:4', algo: ring}\n", "unknown key .repeat."),
    ("runs:\n  - {label: n, command: 'net star:4 --check', topo: 'star:4'}\n", "takes only a 'label'"),
    ("runs:\n  - {command: 'theory --topo star:4 --algo ring'}\n", "needs a 'label'"),
    ("runs:\n  - {label: n, command: 'compare x.yaml'}\n", "a matrix does not nest"),
    ("runs:\n  - {label: n, command: 'theory --topo star:4 --algo ring --colour red'}\n", "unrecognized arguments"),
    ("runs:\n  - {label: n, command: 'theory --topo star:4 --algo ring'}\n"
     "targets:\n  - {what: w, row: m, metric: wall_s, at_most: 1}\n", "row 'm' is not a run label"),
])
def test_a_bad_benchmark_config_is_refused_before_anything_runs(tmp_path, text, words):
    with pytest.raises(matrix.ConfigError, match=words):
        matrix.prepare(write_config(tmp_path, text), str(tmp_path / "out"), command_rows=COMMAND_ROWS)
    assert not (tmp_path / "out").exists()


def test_command_rows_run_as_a_user_runs_them_and_are_judged(tmp_path):
    out = tmp_path / "bench"
    r = subprocess.run([sys.executable, "-m", "emulation.commands.cli", "reproduce", "--config",
                        os.path.join(ROOT, "tests", "data", "bench-scale-quick.yaml"), "--out", str(out), "--json"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stderr[-2000:]  # one target is set to be missed, one row is refused
    result = json.loads(r.stdout)
    verdicts = {t["what"]: t["verdict"] for t in result["targets"]}
    assert verdicts == {"BML BCube(8,2): seconds": "met", "BML BCube(8,2): MiB": "met",
                        "BML BCube(8,2): GST / closed form at goodput": "met",
                        "PS Fat-Tree(8) / hier Fat-Tree(8): GST": "met",
                        "PS Fat-Tree(8): a target no run meets": "missed",
                        "PS Fat-Tree(48): refused by the size check": "no value"}
    rows = {row["label"]: row for row in json.loads((out / "comparison.json").read_text())}
    assert rows["bml bcube:8,2"]["ranks"] == 64 and rows["bml bcube:8,2"]["exit_code"] == 0
    assert 0 < rows["bml bcube:8,2"]["wall_s"] < 300 and 20 < rows["bml bcube:8,2"]["peak_rss_mib"] < 8192
    assert rows["ps fattree:48"]["error"].startswith("refused: fattree:48: ps over")
    assert (out / "targets.csv").exists() and (out / "bml_bcube_8_2" / "summary.json").exists()


def test_a_target_reads_its_reference_in_another_sweep_group_three_ways(tmp_path):
    sweep = {"mode": ["emulate", "simulate", "theory"]}
    data = rows(("a", None, {"gst_median_s": 2.0}), ("b", None, {"gst_median_s": 1.0}))
    data = [dict(r, mode=m, gst_median_s=r["gst_median_s"] * f) for m, f in (("emulate", 1.0), ("simulate", 1.05),
                                                                             ("theory", 0.8)) for r in data]
    within = targets.target({"what": "sim/emu", "row": "a", "metric": "gst_median_s", "in": {"mode": "simulate"},
                             "relative_in": {"mode": "emulate"}, "between": [0.9, 1.1]}, "t", LABELS, sweep)
    over = targets.target({"what": "emu/theory", "row": "a", "relative_to": "b", "metric": "gst_median_s",
                           "in": {"mode": "emulate"}, "relative_in": {"mode": "theory"}, "at_most": 2.0}, "t",
                          LABELS, sweep)
    table = targets.table([within, over], data, ["mode"])
    assert [(r["what"], r["mode"], r["verdict"]) for r in table] == [("sim/emu", "simulate", "met"),
                                                                    ("emu/theory", "emulate", "missed")]
    assert table[0]["ours"] == pytest.approx(1.05) and table[1]["ours"] == pytest.approx(2.5)
    for bad, words in (({"in": {"mode": "measure"}}, "is not a value the config sweeps"),
                       ({"relative_in": {"seed": 1}}, "is not a value the config sweeps"),
                       ({"in": "simulate"}, "must be a mapping")):
        with pytest.raises(targets.TargetError, match=words):
            targets.target({"what": "w", "row": "a", "metric": "gst_ratio", "at_most": 2, **bad}, "t", LABELS, sweep)


def test_the_straggler_wait_is_read_from_the_iterations_past_warm_up(tmp_path):
    (tmp_path / "iterations.csv").write_text("iteration,iteration_s,gst_s\n0,9,1\n1,9,1\n2,1.5,1.0\n3,2.5,1.5\n")
    assert matrix_rows.bsp_wait(str(tmp_path), {}) == pytest.approx(0.75)
    assert matrix_rows.bsp_wait(str(tmp_path / "none"), {"iteration_mean_s": 3.0, "gst_median_s": 1.0}) == 2.0
    assert targets.target({"what": "w", "row": "a", "metric": "most_waited_for", "equals": "h3"}, "t",
                          LABELS)["bound"].holds("h3")


def test_a_command_rows_nested_figures_are_flattened_and_a_list_holds_when_every_value_does():
    result = {"verdict": "faithful", "pattern_summary": {"stride:4": {"measured_over_flow_model_range": [0.95, 1.04],
                                                                      "seeds": 5}},
              "patterns": [{"seed": 1}], "cpu": {"median": 0.5}}
    figures = matrix_rows.flat(result)
    assert figures == {"verdict": "faithful", "pattern_summary.stride:4.measured_over_flow_model_range": [0.95, 1.04],
                       "pattern_summary.stride:4.seeds": 5, "cpu.median": 0.5}
    t = targets.target({"what": "w", "row": "a", "metric": "pattern_summary.stride:4.measured_over_flow_model_range",
                        "between": [0.9, 1.1]}, "t", LABELS)
    assert t["bound"].holds([0.95, 1.04]) and not t["bound"].holds([0.85, 1.04]) and t["bound"].holds([]) is None
    with pytest.raises(targets.TargetError, match="cannot be missed"):
        targets.target({"what": "w", "row": "a", "metric": "x.y", "between": [-math.inf, math.inf]}, "t", LABELS)


def test_reproduce_lists_the_benchmark_configs_and_refuses_an_unknown_one():
    r = subprocess.run([sys.executable, "-m", "emulation.commands.cli", "reproduce", "--list", "--bench"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and [line.split()[0] for line in r.stdout.splitlines()] == \
        [os.path.basename(p)[:-5] for p in BENCH]
    r = subprocess.run([sys.executable, "-m", "emulation.commands.cli", "reproduce", "--bench", "nosuch"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and ("valid are " + ", ".join(os.path.basename(p)[:-5] for p in BENCH)) in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_a_benchmark_of_several_configs_writes_one_table_of_every_target(tmp_path):
    from emulation.commands import reproduce
    a = write_config(tmp_path, "runs:\n  - {label: r, topo: 'star:4', algo: ring, mode: theory}\n"
                     "targets:\n  - {what: fast, row: r, metric: gst_median_s, at_most: 100}\n")
    (tmp_path / "b.yaml").write_text("runs:\n  - {label: p, topo: 'star:4', algo: ps, mode: theory}\n"
                                     "targets:\n  - {what: instant, row: p, metric: gst_median_s, at_most: 0.000000001}\n")
    out = tmp_path / "bench"
    jobs = tuple((name, matrix.prepare(path, str(out / name), command_rows=COMMAND_ROWS))
                 for name, path in (("a", a), ("b", str(tmp_path / "b.yaml"))))
    result = reproduce.execute_all(reproduce.AllJob(jobs, str(out), bench=True))
    assert [(t["config"], t["verdict"]) for t in result["targets"]] == [("a", "met"), ("b", "missed")]
    assert matrix_passed(result) == 1 and reproduce.COMMAND.report(result) is None
    text = (out / "targets.md").read_text()
    assert text.startswith("1/2 targets met, 1 missed") and text.index("instant") < text.index("fast")  # missed first
    with open(out / "targets.csv") as f:
        assert [r["config"] for r in csv.DictReader(f)] == ["a", "b"]
    assert (out / "provenance.json").exists() and (out / "a" / "targets.csv").exists()


def test_a_command_rows_peak_memory_is_its_own_not_its_parents():
    from emulation.commands.command_rows import in_child
    ballast = bytearray(400 * 1024 * 1024)  # this process grows by 400 MiB: a child forked from it starts there
    ballast[::4096] = b"\1" * len(ballast[::4096])
    got = in_child(["theory", "--topo", "star:4", "--algo", "ring"])
    assert got["exit_code"] == 0 and got["gst_theory_s"] > 0
    assert 5 < got["peak_rss_mib"] < 350, got["peak_rss_mib"]  # the interpreter and dmlbed's imports, no ballast
    del ballast


def test_a_run_command_rows_verdict_its_cause_and_its_scenario_are_the_rows_columns():
    result = {"correct": True, "fidelity": {"verdict": "degraded", "cause": "CPU saturation: all cores busy",
                                            "scenario_note": "stragglers: 3 of 9 transfers waited"}}
    entry = {"label": "r", "job": type("Job", (), {"emulated": True})(), "out": "o", "sweep": {}}
    row = matrix_rows.command_row(entry, result)
    assert (row["fidelity"], row["fidelity_cause"], row["fidelity_scenario_note"]) == (
        "degraded", "CPU saturation: all cores busy", "stragglers: 3 of 9 transfers waited")
