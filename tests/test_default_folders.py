"""Without --out every command writes a new folder of its own (results/<command>/<date-time>, latest pointing at
it), so a second command never finds the first's results; bad input makes no folder."""

import json
import os
import subprocess
import sys

import pytest

from emulation.run.options import OptionError
from emulation.run.outputs import FolderTaken, claim_folder, new_folder, planned_folder
from helpers import ROOT


def dmlbed(cwd, *args):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "emulation.commands.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)


def test_two_simulations_in_a_row_each_get_their_own_folder(tmp_path):
    outs = []
    for topo in ("bcube:4,2", "fattree:4"):
        r = dmlbed(tmp_path, "simulate", "--topo", topo, "--algo", "ring" if topo.startswith("fat") else "bml")
        assert r.returncode == 0, r.stderr
        line = next(l for l in r.stdout.splitlines() if l.startswith("results: "))
        outs.append(line.split()[1].rsplit("/", 1)[0])
    assert outs[0] != outs[1] and all(o.startswith("results/simulate/") for o in outs)
    assert json.load(open(tmp_path / outs[0] / "summary.json"))["topology"] == "bcube:4,2"
    assert json.load(open(tmp_path / outs[1] / "summary.json"))["topology"] == "fattree:4"
    assert os.readlink(tmp_path / "results" / "simulate" / "latest") == os.path.basename(outs[1])


def test_a_compare_without_out_runs_inside_its_own_folder(tmp_path):
    (tmp_path / "c.yaml").write_text("name: two\nruns:\n - {label: a, topo: 'star:4', algo: ring, mode: simulate}\n")
    for _ in range(2):
        r = dmlbed(tmp_path, "compare", "c.yaml", "--json")
        assert r.returncode == 0, r.stderr
    folders = sorted(p for p in os.listdir(tmp_path / "results" / "compare" / "two") if p != "latest")
    assert len(folders) == 2
    for f in folders:
        assert (tmp_path / "results" / "compare" / "two" / f / "a" / "summary.json").exists()


def test_bad_input_makes_no_folder(tmp_path):
    r = dmlbed(tmp_path, "simulate", "--topo", "star:4", "--algo", "nope")
    assert r.returncode == 2 and not (tmp_path / "results").exists()


def test_a_folder_taken_meanwhile_is_not_shared(tmp_path):
    planned = planned_folder(str(tmp_path))
    os.mkdir(planned)  # another command made it between planning and claiming
    with pytest.raises(FolderTaken, match="give --out"):
        claim_folder(planned)
    a, b = new_folder(str(tmp_path)), new_folder(str(tmp_path))
    assert len({planned, a, b}) == 3 and os.readlink(tmp_path / "latest") == os.path.basename(b)
    (tmp_path / "file").write_text("")
    with pytest.raises(OptionError, match="cannot make a results folder"):
        new_folder(str(tmp_path / "file"))
