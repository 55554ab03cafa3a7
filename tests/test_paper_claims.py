"""Every claim the shipped configs score is the paper's own: its quote is in the cited paper's text and holds the
number claimed; claims of dmlbed's own model say so; no range can hold for every value."""

import glob
import math
import os
import re

import pytest
import yaml

from helpers import ROOT

from emulation.run import claims as paper

PAPERS_DIR = os.environ.get("DMLBED_PAPERS", os.path.join(ROOT, "..", "shared", "papers"))
CONFIGS = sorted(p for p in glob.glob(os.path.join(ROOT, "configs", "*.yaml"))
                 if "paper" in (yaml.safe_load(open(p)) or {}))
WORDS = {0.5: ("half",), 2.0: ("double", "twice"), 1.0: ("same", "similar")}


def shipped_claims():
    for path in CONFIGS:
        data = yaml.safe_load(open(path))
        for c in paper.claims(data, [r["label"] for r in data["runs"]]):
            yield pytest.param(c, id=f"{os.path.basename(path)}:{c['what']}")


def flat(text: str) -> str:
    return " ".join(text.split())


def printed_forms(x: float):
    """How a paper prints the value x: itself, its inverse (a factor), as a percentage, or as a percent gain or
    cut; and the words for 1/2, 2 and 1."""
    forms = {x, 1 / x if x else math.inf, 100 * x, 100 * (x - 1), 100 * (1 - x)}
    return {f"{round(v, 4):g}" for v in forms if math.isfinite(v) and v > 0} | set(WORDS.get(x, ()))


def printed_ratio(x: float, quote: str) -> bool:
    """Whether x is the ratio of two numbers the quote prints (45x against 26x), to the claim's 3 decimals."""
    numbers = [float(n) for n in re.findall(r"(?<![\d.])\d+(?:\.\d+)?", quote)]
    return any(b and round(a / b, 3) == round(x, 3) for a in numbers for b in numbers)


def test_the_shipped_configs_have_claims():
    assert [os.path.basename(p) for p in CONFIGS] == ["blueconnect-fig5.yaml", "blueconnect-fig6.yaml",
                                                      "blueconnect.yaml", "bml-fig5.yaml", "bml-fig6.yaml", "bml-fig7.yaml",
                                                      "ibatch-72.yaml", "ibatch.yaml", "pflow.yaml", "terngrad-convergence.yaml",
                                                      "terngrad-fig5.yaml", "terngrad.yaml"]


@pytest.mark.parametrize("claim", list(shipped_claims()))
def test_a_paper_claim_quotes_its_paper_and_the_number(claim):
    if claim["kind"] == "model":
        assert "dmlbed" in claim["from"], "a claim of dmlbed's model says so where it comes from"
        return
    text_path = os.path.join(PAPERS_DIR, claim["text"] + ".txt")
    if not os.path.exists(text_path):
        pytest.skip(f"the paper texts are not at {PAPERS_DIR} (set DMLBED_PAPERS)")
    assert flat(claim["quote"]) in flat(open(text_path).read()), f"not in {claim['text']}.txt: {claim['quote']}"
    assert re.search(r"\b(sec\.|Fig\.|Table|App\.)", claim["from"]), claim["from"]
    if "out_of_reach" in claim or claim["metric"] == "gst_ratio":  # gst_ratio: against the quoted formula
        return
    values = claim["paper"] if isinstance(claim["paper"], tuple) else (claim["paper"],)
    for v in values:
        if isinstance(claim["paper"], tuple) and v == 1.0:
            continue  # the floor of an "up to N x" claim is no speed-up, not a number the paper prints
        forms = printed_forms(v)
        assert any(re.search(rf"(?<![\d.]){re.escape(f)}(?![\d])", claim["quote"]) for f in forms) or \
            printed_ratio(v, claim["quote"]), f"none of {sorted(forms)} in the quote {claim['quote']!r}"


def test_a_ratio_counts_only_when_the_quote_prints_both_numbers():
    assert printed_ratio(1.136, "iBatch 25x against the default PS's 22x")
    assert not printed_ratio(1.5, "iBatch 25x against the default PS's 22x")


def test_a_quote_that_is_not_in_the_paper_is_caught():
    if not os.path.isdir(PAPERS_DIR):
        pytest.skip(f"the paper texts are not at {PAPERS_DIR}")
    text = flat(open(os.path.join(PAPERS_DIR, "terngrad.txt")).read())
    assert flat("the reduction factor is still $16\\times$") in text
    assert flat("the reduction factor is still $32\\times$") not in text
    assert not any(re.search(rf"(?<![\d.]){re.escape(f)}(?![\d])", "cuts traffic 16x") for f in printed_forms(0.1))


def test_reproduce_blueconnect_fig5_in_the_flow_model(tmp_path):
    import json
    from helpers import run_dmlbed
    r = run_dmlbed("reproduce", "blueconnect-fig5", "--json", "--out", str(tmp_path / "out"), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    claims = {c["what"]: c for c in json.loads(r.stdout)["paper"]}
    fig5 = claims["all-reduce time flat ring / BlueConnect (10:1)"]
    assert fig5["kind"] == "paper" and fig5["verdict"] == "agrees" and 1.4 < fig5["ours"] < 1.7


def test_reproduce_terngrad_fig5_evaluates_app_b_beside_the_flow_model(tmp_path):
    import json
    from helpers import run_dmlbed
    from emulation.core import terngrad_model
    from workloads.models import tensor_sizes
    r = run_dmlbed("reproduce", "terngrad-fig5", "--json", "--out", str(tmp_path / "out"), timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    claims = {c["what"]: c for c in out["paper"]}
    app_b = claims["AlexNet throughput TernGrad / fp32, 8 GPUs at 1 Gbit/s (App. B with dmlbed's inputs)"]
    # eq. 17-18 by hand from the config's inputs: 2 machines of 4 GPUs, 128 images each
    cluster = terngrad_model.Cluster(gpus=4, machines=2, batch=128, step_s=0.144, gpu_bps=12e9, cpu_bps=12e9,
                                     net_bps=125e6, latency_s=50e-6)
    sizes = tensor_sizes("alexnet")
    fp32, tern = 4 * sum(sizes), terngrad_model.ternary_bytes(sizes)
    speedup = cluster.t_weak(fp32, fp32) / cluster.t_weak(tern, fp32)
    assert app_b["ours"] == pytest.approx(speedup, rel=1e-6) and app_b["how"] == "closed form"
    assert app_b["paper"] == "3.04" and app_b["verdict"] == "differs"
    simulated = claims["AlexNet throughput TernGrad / fp32, 2 machines at 1 Gbit/s (flow model)"]
    assert simulated["how"] == "simulated" and simulated["ours"] > 1
