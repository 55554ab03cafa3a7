"""The documentation has a home: a short README, a docs/ site that builds strictly (every internal link and anchor
resolves), reference pages generated from the code and current, and no hand-written page holding a table of
measured figures (those are generated from a results file, with its command, date and commit)."""

import os
import re
import shutil
import subprocess
import sys

import pytest

from helpers import ROOT

DOCS = os.path.join(ROOT, "docs")
MKDOCS = os.path.join(os.path.dirname(sys.executable), "mkdocs")
GENERATED_FROM_CODE = ("cli.md", "config.md", "summary.md", "algorithms.md", "layers.md", "limits.md", "errors.md")
API_PAGE = "python-api.md"  # generated from the dmlbed module (the api layer), by dmlbed/api_reference.py
GENERATED_FROM_RESULTS = {"papers.md": "dmlbed reproduce --all --docs", "benchmark.md": "scripts/benchmark_page.py"}
ENV = dict(os.environ, NO_MKDOCS_2_WARNING="1")


def build(docs_root: str, site: str):
    return subprocess.run([MKDOCS, "build", "--strict", "-f", os.path.join(docs_root, "mkdocs.yml"), "-d", site],
                          capture_output=True, text=True, timeout=300, env=ENV)


def test_the_readme_is_short_and_points_into_the_docs():
    text = open(os.path.join(ROOT, "README.md")).read()
    assert len(text.splitlines()) <= 200
    for target in re.findall(r"\]\((docs/[^)#]+)", text):
        assert os.path.exists(os.path.join(ROOT, target)), target


def test_the_site_builds_strictly(tmp_path):
    r = build(ROOT, str(tmp_path / "site"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").exists()


def test_a_broken_link_fails_the_strict_build(tmp_path):
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(os.path.join(ROOT, "mkdocs.yml"), tmp_path / "mkdocs.yml")
    with open(tmp_path / "docs" / "index.md", "a") as f:
        f.write("\n[gone](how-to/no-such-page.md)\n")
    assert build(str(tmp_path), str(tmp_path / "site")).returncode != 0


def test_the_generated_reference_is_the_code():
    """A flag, a config key, a summary field or an algorithm added without `make docs` fails here."""
    from emulation.commands.reference import pages
    generated = pages()
    assert set(GENERATED_FROM_CODE) == set(generated)
    for name, text in generated.items():
        assert open(os.path.join(DOCS, "reference", name)).read() == text, f"docs/reference/{name}: run make docs"


def test_the_python_api_reference_is_the_module():
    from dmlbed.api_reference import page
    assert open(os.path.join(DOCS, "reference", API_PAGE)).read() == page(), f"docs/reference/{API_PAGE}: run make docs"


def test_the_cli_reference_names_every_flag_of_every_command():
    from emulation.commands.registry import COMMANDS
    from emulation.run.options import flag_of, in_groups
    text = open(os.path.join(DOCS, "reference", "cli.md")).read()
    for command in COMMANDS:
        section = text[text.index(f"## dmlbed {command.name}\n"):]
        section = section[:section.find("\n## ", 1)] if "\n## " in section[1:] else section
        flags = [flag_of(n, o) for n, o, _ in in_groups(command.groups)]
        flags += [o.name.upper() if o.positional else flag_of(o.name, o) for o in command.options()]
        assert [f for f in flags if f"`{f}`" not in section] == [], command.name


def test_a_new_flag_makes_the_reference_stale(monkeypatch):
    from emulation.commands import reference
    from emulation.commands.registry import COMMANDS
    from emulation.run.options import command_option
    run = next(c for c in COMMANDS if c.name == "run")
    monkeypatch.setattr(type(run), "own", (command_option("frobnicate", "a flag nobody documented", kind=bool),))
    assert reference.pages()["cli.md"] != open(os.path.join(DOCS, "reference", "cli.md")).read()


def hand_written_pages():
    for folder, _, files in os.walk(DOCS):
        for name in files:
            rel = os.path.relpath(os.path.join(folder, name), DOCS)
            if name.endswith(".md") and not (rel.startswith("reference" + os.sep) and
                                             (name in GENERATED_FROM_CODE + (API_PAGE,) or name in GENERATED_FROM_RESULTS)):
                yield rel


MEASURED = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")  # a decimal figure, not a version or a section number


@pytest.mark.parametrize("page", sorted(hand_written_pages()))
def test_no_hand_written_page_holds_a_table_of_measured_figures(page):
    """Tables in hand-written pages explain (flags, keys, causes): a decimal figure in one was pasted from a run."""
    bad = [line for line in open(os.path.join(DOCS, page)) if line.startswith("|") and MEASURED.search(line)]
    assert bad == []


def test_the_checker_catches_a_pasted_figure():
    assert MEASURED.search("| ps star:9 | GST/theory 1.035 | faithful |")
    assert not MEASURED.search("| `--mtu` | integer in [576, 9000] | `3500` | eq. 9, sec. 4 |")


@pytest.mark.parametrize("page,writer", GENERATED_FROM_RESULTS.items())
def test_measured_pages_say_which_run_wrote_them(page, writer):
    text = open(os.path.join(DOCS, "reference", page)).read()
    assert "do not edit" in text.splitlines()[2]
    assert re.search(r"at commit `[0-9a-f]{7,12}", text) or "is missing: run" in text


def test_the_licence_and_the_citation_agree_with_the_package():
    import yaml
    licence = open(os.path.join(ROOT, "LICENSE")).read()
    assert licence.startswith("BSD 3-Clause License")
    cff = yaml.safe_load(open(os.path.join(ROOT, "CITATION.cff")))
    setup_py = open(os.path.join(ROOT, "setup.py")).read()
    assert cff["cff-version"] == "1.2.0" and cff["license"] == "BSD-3-Clause"
    assert f'version="{cff["version"]}"' in setup_py and 'license="BSD-3-Clause"' in setup_py
    titles = " ".join(r["title"] for r in cff["references"])
    for paper in ("BML", "BlueConnect", "TernGrad", "Batching Communication and Computation", "Parameter Flow"):
        assert paper in titles
