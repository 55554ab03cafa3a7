"""CLI behaviour without root or a network: output formats and one-line errors with exit code 2."""

import json
import os

import pytest

from emulation.commands.reference import BAD_INPUTS
from helpers import run_dmlbed


def test_topo_json_lists_hosts_switches_links_and_fat_tree_comparison():
    r = run_dmlbed("topo", "bcube:3,2", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["counts"] == {"hosts": 9, "switches": 6, "links": 18, "switch_ports": 3,
                              "fat_tree_switches_same_hosts": 15.0}
    h0 = data["hosts"][0]
    assert [i["ip"] for i in h0["interfaces"]] == ["10.0.0.1", "10.1.0.1"]


def test_topo_text_shows_addresses_by_level():
    r = run_dmlbed("topo", "tree:3,2,2")
    assert r.returncode == 0
    assert "12 hosts, 7 switches" in r.stdout
    assert "L0 h0-eth0 10.0.0.1" in r.stdout


@pytest.mark.parametrize("args,fragment", [
    (["topo", "bcube:1,2"], "n (switch ports) must be >= 2"),
    (["topo", "fattree:3"], "even and >= 4"),
    (["topo", "tree:"], "fanouts are empty"),
    (["topo", "mesh:4"], "unknown topology 'mesh'"),
    (["net", "star:9", "--bw", "0", "--check"], "out of range"),
    (["net", "star:9", "--bw", "5000", "--check"], "[2, 1000]"),
    (["net", "tree:3,2,2", "--bw", "10,20", "--check"], "needs 1 or 3"),
    (["net", "star:9", "--bw", "100"], "one of the arguments --check --cli is required"),
    (["net", "star:9", "--check", "--duration", "0"], "--duration"),
    (["net", "star:300", "--check"], "at most 256"),
    (["simulate", "--topo", "fattree:34", "--algo", "ps"], "dmlbed theory answers at this size"),
    (["simulate", "--topo", "fattree:74", "--algo", "hier"], "dmlbed theory answers at this size"),
    (["theory", "--topo", "star:8", "--algo", "ring", "--tg-gpus", "2"], "is an input of TernGrad's App. B"),
    (["theory", "--topo", "star:8", "--algo", "ring", "--bw", "2e6"], "the models take any rate above 0 up to 1.6"),
    (["run", "--topo", "star:8", "--algo", "ring", "--bw", "10gbit"], "the shaper honours rates from 2 Mbit/s"),
    (["frobnicate"], "unknown command 'frobnicate': valid are topo, rules"),
    (["simulate", "--topo", "star:4", "--algo", "ring", "--out", "/proc/dmlbed-results"], "cannot be written"),
    (["simulate", "--topo", "star:4", "--algo", "ring", "--out", "/etc/hostname/results"], "is a file, not a folder"),
    ([], "a command is required"),
])
def test_bad_input_is_one_line_exit_2(args, fragment):
    from emulation.net.runstate import STATE_ROOT  # this process's (make test gives its pure tests their own)
    before = os.listdir(STATE_ROOT) if os.path.isdir(STATE_ROOT) else []
    r = run_dmlbed(*args)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("dmlbed: error:") and fragment in lines[0]
    assert r.stdout == ""
    after = os.listdir(STATE_ROOT) if os.path.isdir(STATE_ROOT) else []
    assert after == before  # nothing started


def test_every_commands_help_prints(capsys):
    from emulation.commands.cli import build_parser
    from emulation.commands.registry import COMMANDS
    for command in [c.name for c in COMMANDS]:
        with pytest.raises(SystemExit) as exit:
            build_parser().parse_args([command, "--help"])
        assert exit.value.code == 0 and f"usage: dmlbed {command}" in capsys.readouterr().out, command


def test_reproduce_help_names_every_paper_config(capsys):
    from emulation.backends import matrix as compare
    from emulation.commands.cli import build_parser
    from emulation.commands.reproduce import CONFIGS
    with pytest.raises(SystemExit):
        build_parser().parse_args(["reproduce", "--help"])
    help_text = " ".join(capsys.readouterr().out.split()).replace("- ", "-")  # argparse wraps at hyphens
    names = compare.reproducible(CONFIGS)
    assert len(names) >= 10 and all(name in help_text for name in names)


def test_a_busy_network_exits_75_apart_from_bad_input(monkeypatch, capsys):
    from emulation.commands import cli
    from emulation.commands.theory import Theory
    from emulation.net.lock import NetworkBusy

    def busy(self, job, args):
        raise NetworkBusy("an emulated network is in use by pid 1: one network at a time (pass --wait)")
    monkeypatch.setattr(Theory, "execute", busy)
    assert cli.main(["theory", "--topo", "star:4", "--algo", "ring"]) == cli.EXIT_BUSY == 75
    assert capsys.readouterr().err.startswith("dmlbed: error: an emulated network is in use")
    assert cli.main(["theory", "--topo", "star:4", "--algo", "nosuch"]) == 2


def test_the_models_take_data_center_rates_the_shaper_cannot():
    gst = {}
    for bw in ("100", "100gbit"):
        r = run_dmlbed("theory", "--topo", "star:8", "--algo", "ring", "--bw", bw, "--json")
        assert r.returncode == 0, r.stderr
        gst[bw] = json.loads(r.stdout)["gst_theory_s"]
    assert gst["100"] == pytest.approx(1000 * gst["100gbit"])


@pytest.mark.parametrize("line", [line for line, _ in BAD_INPUTS])
def test_the_error_reference_inputs_are_refused_in_one_line_with_exit_2(line, capsys):
    """docs/reference/errors.md's bad inputs, through the CLI's own path: exit 2, one line, the line the page shows."""
    import shlex
    from emulation.commands.cli import main
    from emulation.commands.reference import refusal
    assert main(shlex.split(line)) == 2
    out = capsys.readouterr()
    assert out.err.strip().splitlines() == [refusal(line)] and out.out == ""


def test_theory_answers_at_ten_thousand_servers():
    r = run_dmlbed("theory", "--topo", "leafspine:250,40,16", "--algo", "ring", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["workers"] == 10000
    assert data["gst_theory_s"] == pytest.approx(2 * 9999 / 10000 * data["tf_s"])
