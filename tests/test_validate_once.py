"""Every command validates its configuration once and then runs the checked job (counted by watching calls of
options.validate's code, whatever name a module imported it under)."""

import json
import sys

from helpers import keep_signal_handlers  # noqa: F401 (autouse: main() installs signal handlers)
from emulation.run import validation as options
from emulation.commands.cli import main


def validations(argv):
    """(exit code, how many times validate ran) of `dmlbed ARGV` in this process."""
    calls = []
    code = options.validate.__code__

    def profiler(frame, event, arg):
        if event == "call" and frame.f_code is code:
            calls.append(frame.f_back.f_code.co_name)
    sys.setprofile(profiler)
    try:
        rc = main(argv)
    finally:
        sys.setprofile(None)
    return rc, calls


def test_a_run_validates_once(tmp_path, capsys):
    rc, calls = validations(["run", "--topo", "star:2", "--algo", "ring", "--model", "mlp:4K", "--iters", "2",
                             "--local", "--json", "--out", str(tmp_path)])
    assert rc == 0, capsys.readouterr().err
    assert json.loads(capsys.readouterr().out)["correct"] is True
    assert len(calls) == 1, calls


def test_a_simulation_validates_once(tmp_path, capsys):
    rc, calls = validations(["simulate", "--topo", "bcube:3,2", "--algo", "bml", "--json", "--out", str(tmp_path)])
    assert rc == 0 and json.loads(capsys.readouterr().out)["mode"] == "simulate"
    assert len(calls) == 1, calls


def test_a_comparison_validates_each_run_once(tmp_path, capsys):
    config = tmp_path / "matrix.yaml"
    config.write_text("defaults: {model: 'mlp:4K', iters: 2}\n"
                      "runs:\n"
                      "  - {label: ring, topo: 'star:2', algo: ring}\n"
                      "  - {label: ps, topo: 'star:2', algo: ps}\n"
                      "  - {label: sim, topo: 'star:2', algo: ring, mode: simulate}\n")
    rc, calls = validations(["compare", str(config), "--local", "--json", "--out", str(tmp_path / "out")])
    assert rc == 0, capsys.readouterr().err
    assert len(json.loads(capsys.readouterr().out)["rows"]) == 3
    assert len(calls) == 3, calls


def test_the_counter_sees_a_second_validation(tmp_path):
    calls = []
    code = options.validate.__code__
    sys.setprofile(lambda frame, event, arg: calls.append(1) if event == "call" and frame.f_code is code else None)
    try:
        from emulation.backends import emulator as experiment
        job = experiment.prepare(options.RunConfig(topology="star:2", algo="ring", out=str(tmp_path)))
        options.validate(job.cfg)
    finally:
        sys.setprofile(None)
    assert len(calls) == 2
