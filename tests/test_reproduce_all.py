"""reproduce --all: every paper config in turn, one table of every claim (the docs' papers page), checked before running."""

import csv

import pytest

from emulation.results.claims import how_obtained
from emulation.commands.reproduce import claim_rows, execute_all, markdown, prepare_all
from emulation.run.options import OptionError
from helpers import run_dmlbed

CONFIG = ("name: {name}\ndefaults: {{model: 'mlp:1M', bw: 100, mode: simulate}}\nruns:\n"
          " - {{label: PS, topo: 'star:4', algo: ps}}\n - {{label: RING, topo: 'star:4', algo: ring}}\n"
          "paper:\n  source: 'test paper'\n  text: bml\n  claims:\n"
          "    - {{what: 'ring / PS', kind: model, from: m, row: RING, relative_to: PS, metric: gst_median_s, paper: 1.0}}\n"
          "    - {{what: 'far away', from: 'Fig. 9', quote: 'q', paper: 3.0, out_of_reach: 'needs GPUs'}}\n")


def configs(tmp_path, names=("one", "two")):
    out = {}
    for name in names:
        path = tmp_path / f"{name}.yaml"
        path.write_text(CONFIG.format(name=name))
        out[name] = str(path)
    return out


def test_every_config_runs_into_one_table_of_claims(tmp_path):
    job = prepare_all(configs(tmp_path), str(tmp_path / "all"))
    result = execute_all(job)
    rows = list(csv.DictReader(open(tmp_path / "all" / "papers.csv")))
    assert [(r["config"], r["what"], r["verdict"]) for r in rows] == [
        ("one", "ring / PS", "agrees"), ("one", "far away", "out of reach here"),
        ("two", "ring / PS", "agrees"), ("two", "far away", "out of reach here")]
    assert rows[0]["how"] == "simulated" and float(rows[0]["ours"]) == pytest.approx(1.0, abs=0.01)
    table = (tmp_path / "all" / "papers.md").read_text().splitlines()
    assert table[0].startswith("| config | claim | evidence | paper | source |") and len(table) == 2 + 4
    assert "| one | ring / PS (dmlbed's model) | model | 1 | m |" in table[2]
    assert table[-1].startswith("| two | far away |  | 3.0 | Fig. 9 | - | - |  | out of reach here | needs GPUs |")
    assert (tmp_path / "all" / "one" / "comparison.csv").exists() and set(result["configs"]) == {"one", "two"}


def test_a_bad_config_refuses_the_whole_reproduction_before_anything_runs(tmp_path):
    paths = configs(tmp_path)
    (tmp_path / "two.yaml").write_text(CONFIG.format(name="two").replace("metric: gst_median_s", "metric: speed"))
    with pytest.raises(ValueError, match="metric 'speed'"):
        prepare_all(paths, str(tmp_path / "all"))
    assert not (tmp_path / "all").exists()


def test_an_earlier_table_is_kept_unless_forced(tmp_path):
    (tmp_path / "all").mkdir()
    (tmp_path / "all" / "papers.md").write_text("old")
    with pytest.raises(OptionError, match="already holds a reproduction of every paper"):
        prepare_all(configs(tmp_path), str(tmp_path / "all"))


def test_claims_fold_their_sweep_group_into_the_name_and_pipes_are_escaped():
    result = {"sweep_keys": ["batch"], "paper": [
        {"what": "a|b", "kind": "paper", "evidence": "measurement", "paper": "0.5", "from": "Fig. 1", "ours": 0.25, "ours_over_paper": 0.5,
         "how": "measured (emulated, faithful)", "verdict": "differs", "why": "x", "batch": 16}]}
    rows = claim_rows([("cfg", result)])
    assert rows[0]["what"] == "a|b (batch=16)"
    assert "| cfg | a\\|b (batch=16) | measurement | 0.5 | Fig. 1 | 0.25 | 0.5 | measured (emulated, faithful) | differs " \
        "| x |" in markdown(rows)


def test_how_a_value_was_obtained():
    assert how_obtained({"mode": "simulate"}) == "simulated"
    assert how_obtained({"mode": "emulate", "fidelity": "not measured"}) == "measured (loopback)"
    assert how_obtained({"mode": "emulate", "fidelity": "degraded"}) == "measured (emulated, degraded)"
    bench = {"mode": "emulate", "fidelity.alltoall-direct.verdict": "faithful",  # a `bench` row: a verdict per op
             "fidelity.alltoall-gloo.verdict": "degraded", "fidelity.alltoall-gloo.cause": "CPU saturation"}
    assert how_obtained(bench) == "measured (emulated, degraded)"
    assert how_obtained({"mode": "emulate", "fidelity.allgather-ring.verdict": "not measured"}) == \
        "measured (loopback)"


def test_all_and_a_name_are_refused_together():
    r = run_dmlbed("reproduce", "--all", "bml-fig5")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "either --all or a name" in r.stderr


def test_the_table_is_rebuilt_from_saved_rows_with_corrected_claims(tmp_path):
    """scripts/papers_table.py: after a claim's reason is corrected, the table is rebuilt from what the runs saved
    (nothing runs again): same values, the new text."""
    import subprocess
    import sys
    from helpers import ROOT
    paths = configs(tmp_path)
    execute_all(prepare_all(paths, str(tmp_path / "all")))
    before = (tmp_path / "all" / "papers.md").read_text()
    (tmp_path / "one.yaml").write_text(CONFIG.format(name="one").replace("needs GPUs", "needs 192 GPUs"))
    r = subprocess.run([sys.executable, "scripts/papers_table.py", str(tmp_path / "all"), "--configs", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    after = (tmp_path / "all" / "papers.md").read_text()
    assert after == before.replace("| needs GPUs |", "| needs 192 GPUs |", 1) and after != before


def test_the_docs_page_comes_with_an_archive_it_is_rebuilt_from_alone(tmp_path):
    """--docs keeps every config's rows (not their run folders) and the run's provenance beside the page: the page
    is rebuilt from them alone, and a claim's text corrected in a config shows as a different page."""
    import json
    import os
    from emulation.commands.reproduce import page_from_archive, runs_digests
    from emulation.results import papers_archive
    folder = tmp_path / "configs"
    folder.mkdir()
    paths = configs(folder)
    page = tmp_path / "site" / "papers.md"
    execute_all(prepare_all(paths, str(tmp_path / "all"), docs=str(page)))
    archive = tmp_path / "site" / "papers"
    assert sorted(os.listdir(archive)) == ["configs.json", "one.json", "provenance.json", "two.json"]
    rows = json.load(open(archive / "one.json"))
    assert [r["label"] for r in rows] == ["PS", "RING"] and all("out" not in r for r in rows)
    assert page_from_archive(str(archive), str(folder)) == page.read_text()
    assert papers_archive.runs_of(str(archive)) == runs_digests(paths)
    (folder / "one.yaml").write_text(CONFIG.format(name="one").replace("needs GPUs", "needs 192 GPUs"))
    assert page_from_archive(str(archive), str(folder)) != page.read_text()
    assert papers_archive.runs_of(str(archive)) == runs_digests(paths)  # a claim's text is not what runs
    (folder / "two.yaml").write_text(CONFIG.format(name="two").replace("bw: 100", "bw: 50"))
    assert papers_archive.runs_of(str(archive))["two"] != runs_digests(paths)["two"]
