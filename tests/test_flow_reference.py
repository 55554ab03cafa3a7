"""The flow model gives the results it gave before it was made faster: every case of tests/data/flow_reference.json
against the reference (its provenance names the commit that wrote it; scripts/flow_reference.py rewrites it)."""

import json
import math
import os
import sys

import pytest

from helpers import ROOT

sys.path.insert(0, os.path.join(ROOT, "scripts"))
from flow_reference import FIELDS, JOB_FIELDS, JOBS, run  # noqa: E402

REFERENCE = json.load(open(os.path.join(ROOT, "tests", "data", "flow_reference.json")))
SCALE = json.load(open(os.path.join(ROOT, "tests", "data", "flow_reference_scale.json")))
CASES, SCALE_CASES = list(REFERENCE["cases"]), list(SCALE["cases"])  # the cases are the files' own
# The slowest cases (13-60 s each) run in make benchmark; make test keeps each one's kind at a smaller size: background
# on fattree:4, hier on fattree:8, TernGrad on star:4, BML on bcube:4,2, two jobs in test_jobs.py.
SLOW = {"--topo leafspine:16,32,8 --algo ring --background h256-h31 --share-hosts --hosts h0..h255",
        "--topo fattree:16 --algo hier", "--topo leafspine:16,32,8 --algo ring --codec terngrad",
        "--topo bcube:8,2 --algo bml --model alexnet",
        "jobs --topo leafspine:16,32,1 --algo ring --model lenet5 --bw 1000 --iters 3 "
        "--job 'name=a hosts=interleaved ranks=256' --job 'name=b hosts=interleaved ranks=256'"}


def complete(case: str, result: dict) -> bool:
    """Whether a case's result holds every field (a jobs case: every job's)."""
    if case.startswith(JOBS):
        return len(result) >= 2 and all(set(job) == set(JOB_FIELDS) for job in result.values())
    return set(result) == set(FIELDS)


def cases(names) -> list:
    """The cases as parameters, the slow ones behind the benchmark marker."""
    return [pytest.param(c, marks=pytest.mark.benchmark) if c in SLOW else c for c in names]


def same(a, b, where: str = "") -> list:
    """Where a and b differ, numbers compared to a relative 1e-9."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in same(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return [] if math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) else [f"{where}: {a} != {b}"]
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def test_the_reference_holds_every_case_with_every_field():
    assert SLOW <= set(CASES) | set(SCALE_CASES) and len(CASES) >= 27
    assert all(complete(case, result) for case, result in REFERENCE["cases"].items())


@pytest.mark.parametrize("case", cases(CASES))
def test_the_flow_model_gives_its_reference_results(case):
    assert same(run(case), REFERENCE["cases"][case]) == []


def test_the_scale_reference_holds_every_case_by_events():
    assert len(SCALE_CASES) >= 11 and "--scale" in SCALE["provenance"]["command"]
    assert all(complete(case, result) for case, result in SCALE["cases"].items())
    assert any(case.startswith(JOBS) for case in SCALE_CASES)  # two jobs sharing the network


@pytest.mark.parametrize("case", cases(SCALE_CASES))
def test_the_flow_model_gives_the_event_models_results_at_512_to_1024_hosts(case):
    assert same(run(case), SCALE["cases"][case]) == []  # written by run(case + EVENTS)


def test_a_changed_result_is_seen():
    changed = json.loads(json.dumps(REFERENCE["cases"][CASES[0]]))
    changed["gst_median_s"] *= 1 + 1e-6
    assert same(changed, REFERENCE["cases"][CASES[0]]) != []
