"""The papers page cannot go stale: it is its archive rebuilt with the configs' claims as they are now, and no code
its claims run, nor what a paper config runs, changed after the run that wrote it."""

import os
import shutil
import subprocess

import pytest

from emulation.backends.matrix import reproducible
from emulation.commands.reproduce import (ARCHIVE, CONFIGS, DOCS_PAGE, claim_rows, page_from_archive, results_of,
                                          runs_digests)
from emulation.results import papers_archive
from helpers import ROOT

CODE = ("emulation", "workloads", "controllers")  # what every claim's value comes from
RERUN = "sudo .venv/bin/dmlbed reproduce --all --docs --force --wait (about 40 minutes), then commit the page"


def test_the_papers_page_is_its_archive_rebuilt_with_the_claims_as_the_configs_have_them():
    assert page_from_archive() == open(DOCS_PAGE).read(), (
        "docs/reference/papers.md is not what its archive and the configs' claims give: after a claim's text "
        "changed, run `.venv/bin/python scripts/papers_table.py docs/reference/papers --docs`; after what a config "
        f"runs changed, {RERUN}")


def test_what_each_paper_config_runs_is_what_it_ran_for_the_page():
    archived, now = papers_archive.runs_of(ARCHIVE), runs_digests(reproducible(CONFIGS))
    changed = sorted(n for n in set(archived) | set(now) if archived.get(n) != now.get(n))
    assert not changed, f"the papers page's runs predate these configs' current runs: {', '.join(changed)}: {RERUN}"


def test_no_code_the_claims_run_changed_after_the_run_that_wrote_the_page():
    origin = papers_archive.origin_of(ARCHIVE) or {}
    assert origin.get("commit") and not origin.get("dirty"), \
        f"the papers page was written from a modified or unknown checkout: {RERUN}"
    if shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")):
        pytest.skip("not a git checkout: the page's commit cannot be placed in its history")
    known = subprocess.run(["git", "cat-file", "-e", f"{origin['commit']}^{{commit}}"], cwd=ROOT, capture_output=True)
    if known.returncode != 0:
        pytest.skip(f"commit {origin['commit'][:12]} is not in this clone's history (a shallow clone)")
    later = subprocess.run(["git", "log", "--format=%h %s", f"{origin['commit']}..HEAD", "--", *CODE], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert not later, (f"the papers page was written at {origin['commit'][:12]}; since then {len(later)} commits "
                       f"changed the code its claims run (the latest: {later[0][:80]}): {RERUN}")


def test_every_claim_that_differs_says_why_and_every_unjudged_one_its_runs_cause():
    rows = claim_rows(results_of(ARCHIVE))  # the page's rows (the first test holds the page to them)
    assert len(rows) >= 50
    silent = [f"{r['config']}: {r['what']}" for r in rows  # the page's why cell: the why, then what it derives from
              if r["verdict"] == "differs" and not (r["why"] or r["derived"])]
    assert not silent, f"claims that differ from their paper without a why in their config: {silent}"
    causeless = [f"{r['config']}: {r['what']}" for r in rows
                 if r["verdict"].startswith("not judged (emulation") and "its cause:" not in r["how"]]
    assert not causeless, f"claims not judged without their run's fidelity cause: {causeless}"
