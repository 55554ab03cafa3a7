"""Help that teaches: every subcommand's --help shows its options in sections with their defaults, and examples;
every example is valid input (parsed and checked as the command checks it, nothing started), and those that need no
network and little time run."""

import os
import shlex

import pytest

from emulation.commands.cli import build_parser, main
from emulation.commands.registry import COMMANDS
from emulation.run.flags import HELP_SECTIONS, argument_help, help_section
from emulation.run.options import described, in_groups
from helpers import ROOT

RUNS = {"topo", "rules", "theory", "simulate", "patterns", "schema", "timeline"}  # cheap, no network: run them
RUNS_WITH = {"reproduce": "--list", "bench": "--mode simulate", "jobs": "--mode simulate"}


def help_of(name, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([name, "--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_help_has_sections_defaults_and_examples(command, capsys):
    text = help_of(command.name, capsys)
    entries = [(o.name, o, o.default) for o in command.options()] + in_groups(command.groups)
    for title in {help_section(o, f"{command.name} options") for _, o, _ in entries if not o.positional}:
        assert f"\n{title}:\n" in text, title
    for name, opt, default in entries:  # every default shown, as argparse wraps it
        if default not in (None, False, "", []) and not opt.positional:
            shown = argument_help(opt, default).split("[default: ")[1].split("]")[0]
            assert f"[default: {shown}]" in " ".join(text.split()), (name, shown)
    assert len(command.examples) >= (2 if entries else 1)
    assert "\nexamples:\n" in text
    for what, arguments in command.examples:
        assert f"dmlbed {command.name} {arguments}".rstrip() in text and what in text


def test_the_sections_cover_every_option_group():
    covered = {g for _, groups in HELP_SECTIONS for g in groups}
    used = {o.group for _, o, _ in described() if not (o.algorithm_option or o.codec_option)}
    assert used <= covered


def localized(arguments, tmp_path):
    """An example's arguments, with the files and folders it writes placed in tmp_path."""
    out = []
    for token in shlex.split(arguments):
        if token.startswith("results/") or token.endswith((".png", ".json")) and "/" not in token:
            token = str(tmp_path / token)
        out.append(token)
    return out


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_every_example_is_valid_and_the_cheap_ones_run(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    if command.name == "timeline":  # it draws what the simulate example writes
        example = dict((c.name, c) for c in COMMANDS)["simulate"].examples[0][1]
        assert main(["simulate", *localized(example, tmp_path)]) == 0
    for _, arguments in command.examples:
        argv = [command.name, *localized(arguments, tmp_path)]
        args = build_parser().parse_args(argv)
        command.prepare(args)  # raises on bad input; starts nothing
        if command.name in RUNS or RUNS_WITH.get(command.name, "\0") in arguments:
            assert main(argv) == 0, argv
    capsys.readouterr()
    assert not os.path.exists(os.path.join(ROOT, "leafspine.json"))


def test_dmlbed_help_points_at_the_docs_and_the_labs(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--help"])
    text = capsys.readouterr().out
    assert "docs/" in text and "labs/" in text and "dmlbed NAME --help" in text


def test_a_shared_option_is_worded_for_each_command(capsys):
    from emulation.commands.cli import main
    texts = {}
    for command in ("run", "simulate", "launch"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        texts[command] = " ".join(capsys.readouterr().out.split())
    assert "(0 = real time)" in texts["run"] and "(0 = real time)" not in texts["simulate"]
    assert "added to the modelled iteration (0: none)" in texts["simulate"]
    assert "netem under the shaping" in texts["run"] and "netem" not in texts["simulate"].split("--delay")[1][:200]
    assert "results/launch/latest" in texts["launch"] and "results/simulate/latest" in texts["simulate"]
