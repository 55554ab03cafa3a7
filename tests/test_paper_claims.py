"""Every claim the shipped configs score is the paper's own: its quote is in the cited paper's text and holds the
number claimed; claims of dmlbed's own model say so; no range can hold for every value."""

import glob
import math
import os
import re

import pytest
import yaml

from helpers import ROOT

from emulation.results import claims as paper

PAPERS_DIR = os.environ.get("DMLBED_PAPERS", os.path.join(ROOT, "..", "shared", "papers"))
CONFIGS = sorted(p for p in glob.glob(os.path.join(ROOT, "configs", "*.yaml"))
                 if "paper" in (yaml.safe_load(open(p)) or {}))
WORDS = {0.5: ("half",), 2.0: ("double", "twice"), 1.0: ("same", "similar")}
FORMULA_METRICS = ("gst_ratio", "switch_ratio_fat_tree")  # measured against the formula the quote states
# Each paper's headline numbers (its abstract's, and iBatch's introduction's: its text has no abstract), and the
# claim value that states each: a number, the end of a range, or the out-of-reach text.
HEADLINES = {"bml": [0.4, 0.564], "blueconnect": [1.871], "terngrad": ["< 2% on average", "no loss"],
             "ibatch": [1.73, 1.41], "parameter-flow": [5.7, 4.3, 8.2]}


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
                                                      "ibatch-72.yaml", "pflow-alexnet.yaml", "pflow.yaml", "terngrad-convergence.yaml",
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
    if "out_of_reach" in claim or claim["metric"] in FORMULA_METRICS or claim["evidence"] == "construction":
        return  # against the quoted formula, or a property of how dmlbed builds it: the number is not printed
    values = claim["paper"] if isinstance(claim["paper"], tuple) else (claim["paper"],)
    for v in values:
        if isinstance(claim["paper"], tuple) and v == 1.0:
            continue  # the floor of an "up to N x" claim is no speed-up, not a number the paper prints
        forms = printed_forms(v)
        assert any(re.search(rf"(?<![\d.]){re.escape(f)}(?![\d])", claim["quote"]) for f in forms) or \
            printed_ratio(v, claim["quote"]), f"none of {sorted(forms)} in the quote {claim['quote']!r}"


HEADING = re.compile(r"^(?:#+\s*)?(\d{1,2}(?:\.\d{1,2})*)\.?(?:\s+(\S.*))?$")
NAMED = ("Abstract", "Introduction", "Motivation", "Related Work", "Problem Formulation", "Algorithm Design",
         "Implementation", "Evaluation", "Conclusion")  # iBatch's sections are not numbered in its text


def sections(lines):
    """(line, section) of every heading: numbered ones, each later and deeper or next in order (page numbers,
    axis labels and footnotes are not), or a paper's named ones where its text numbers none."""
    numbered, last = [], ()
    for i, line in enumerate(lines):
        m = HEADING.match(line.strip())
        if not m or (m.group(2) is not None and (not m.group(2)[0].isupper() or len(m.group(2)) > 80)):
            continue
        number = tuple(int(x) for x in m.group(1).split("."))
        if number > last and number[0] <= (last[0] + 1 if last else 9):
            numbered.append((i, ".".join(map(str, number))))
            last = number
    if len(numbered) >= 3:
        first = int(numbered[0][1].split(".")[0])
        heads = [(0, "abstract")]
        if first > 1:  # a text whose introduction carries no number: it starts at its named heading
            intro = [i for i, line in enumerate(lines[:numbered[0][0]]) if re.match(
                r"^(?:#+\s*)?(?:\d\.?\s+)?introduction$", line.strip(), re.I)]
            heads.append((intro[0] if intro else 0, str(first - 1)))
        return heads + numbered
    return [(i, line.strip()) for i, line in enumerate(lines) if line.strip() in NAMED]


def quote_sections(text: str, quote: str):
    """The section of every place the quote appears in the text."""
    lines = text.splitlines()
    joined, starts = "", []
    for line in lines:
        starts.append(len(joined))
        joined += " ".join(line.split()) + " "
    heads, target, found = sections(lines), flat(quote), []
    pos = joined.find(target)
    while pos >= 0:
        line = max(i for i, s in enumerate(starts) if s <= pos)
        found.append([name for i, name in heads if i <= line][-1])
        pos = joined.find(target, pos + 1)
    return found


def cited(section: str, where: str) -> bool:
    """Whether a claim's `from` cites this section (or a section that holds it)."""
    numbers = re.findall(r"sec\. (\d+(?:\.\d+)*)", where)
    if not section[0].isdigit():
        return section.lower() in where.lower()
    return any(section == n or section.startswith(n + ".") for n in numbers)


@pytest.mark.parametrize("claim", list(shipped_claims()))
def test_a_claims_section_holds_its_quote(claim):
    """Not only is the quote somewhere in the paper: the section `from` cites holds it."""
    if not claim.get("quote"):
        return
    text_path = os.path.join(PAPERS_DIR, claim["text"] + ".txt")
    if not os.path.exists(text_path):
        pytest.skip(f"the paper texts are not at {PAPERS_DIR} (set DMLBED_PAPERS)")
    found = quote_sections(open(text_path).read(), claim["quote"])
    assert found and any(cited(section, claim["from"]) for section in found), (claim["from"], found)


def test_the_section_finder_places_a_quote():
    text = "1 Introduction\nwe claim 2x\n2 Method\n2.1 Details\nthe GST halves\n"
    assert quote_sections(text, "the GST halves") == ["2.1"] and cited("2.1", "sec. 2, Fig. 3")
    assert not cited("2.1", "sec. 3.1") and quote_sections(text, "we claim 2x") == ["1"]
    late = "Title\nAbstract: up to 5x\n#### Introduction\nwe claim 2x\n2. Method\n2.1 Details\nthe GST halves\n3 Results\n"
    assert quote_sections(late, "up to 5x") == ["abstract"] and quote_sections(late, "we claim 2x") == ["1"]
    assert cited("abstract", "sec. 2.4, restated in the abstract") and not cited("abstract", "sec. 2.4")


def test_every_papers_headline_numbers_are_claims():
    stated = {}
    for path in CONFIGS:
        data = yaml.safe_load(open(path))
        for c in data["paper"]["claims"]:
            value = c.get("paper")
            stated.setdefault(data["paper"]["text"], []).extend(value if isinstance(value, list) else [value])
    missing = {paper: [v for v in values if v not in stated.get(paper, [])] for paper, values in HEADLINES.items()}
    assert {p: v for p, v in missing.items() if v} == {}


def loaded(**claim):
    """One claim through the loader (rows a and b)."""
    base = {"what": "x", "from": "sec. 1", "quote": "q", "row": "a", "metric": "gst_median_s", "evidence": "measurement"}
    return paper.claim({**base, **claim}, "c", ["a", "b"], {"text": "bml"})


@pytest.mark.parametrize("bad,fragment", [
    ({"relative_to": "b", "paper": [1.0, 2.2]}, "holds 1, the ratio of no effect"),
    ({"relative_to": "b", "relation": "reduction", "paper": [-0.1, 0.5]}, "holds 0, the reduction of no effect"),
    ({"paper": 1.0, "evidence": None}, "needs 'evidence'"),
    ({"paper": 1.0, "evidence": "hunch"}, "needs 'evidence'"),
    ({"paper": 1.0, "tolerance": 0.9}, "tolerance 0.9 is invalid"),
    ({"paper": 1.0, "kind": "model", "evidence": "measurement"}, "not a paper's measurement"),
])
def test_a_claim_that_could_not_fail_is_refused(bad, fragment):
    with pytest.raises(paper.PaperError, match=re.escape(fragment)):
        loaded(**bad)


def test_claims_that_can_fail_load():
    assert loaded(relative_to="b", paper=1.0)["tolerance"] == 0.1  # no effect claimed: fails when ours shows one
    assert loaded(relative_to="b", paper=1.038)["paper"] == 1.038  # a small effect, judged on itself
    assert loaded(relative_to="b", relation="reduction", paper=[0.187, 0.564])["paper"] == (0.187, 0.564)
    assert loaded(relative_to="b", paper=2.2)["evidence"] == "measurement"


def test_an_effect_is_judged_on_itself_not_on_the_ratio():
    """The issue's case: a 2% gain does not reproduce a 13.6% one (within a tenth of 1.136 it did); a slowdown, a
    reduction and a difference of points are held to a tenth of their effect too; a value or no effect as before."""
    gain = loaded(relative_to="b", paper=1.136)
    assert paper.bound(gain).low == pytest.approx(1.1224) and paper.bound(gain).high == pytest.approx(1.1496)
    assert paper.judge(gain, 1.02)[0] is False and paper.judge(gain, 1.14)[0] is True
    assert paper.judge(loaded(relative_to="b", paper=3.2), 3.0)[0] is True  # 2.0 of a 2.2 effect
    slower = paper.bound(loaded(relative_to="b", paper=0.6))
    assert (slower.low, slower.high) == pytest.approx((0.56, 0.64))
    cut = paper.bound(loaded(relative_to="b", relation="reduction", paper=0.3))
    assert (cut.low, cut.high) == pytest.approx((0.27, 0.33))
    points = paper.bound(loaded(relative_to="b", relation="difference", metric="accuracy", paper=-0.02))
    assert (points.low, points.high) == pytest.approx((-0.022, -0.018))
    none = paper.bound(loaded(relative_to="b", paper=1.0))
    assert (none.low, none.high) == pytest.approx((0.9, 1.1))
    value = paper.bound(loaded(paper=2.0))
    assert (value.low, value.high) == pytest.approx((1.8, 2.2))


def test_a_claim_resting_on_an_unfaithful_run_is_not_judged():
    claim = loaded(relative_to="b", paper=0.5)
    rows = [{"label": "a", "mode": "emulate", "gst_median_s": 1.0, "fidelity": "faithful"},
            {"label": "b", "mode": "emulate", "gst_median_s": 2.0, "fidelity": "not faithful"}]
    row, = paper.table([claim], rows, [])
    assert row["verdict"] == paper.NOT_JUDGED and row["agrees"] is None and row["ours"] == 0.5
    assert row["how"] == "measured (emulated, not faithful)"
    rows[1]["fidelity"] = "degraded"  # said in the verdict's own word, with the run's cause
    rows[1]["fidelity_cause"] = "CPU saturation: all cores busy in 92% of samples " + "and more " * 30
    row, = paper.table([claim], rows, [])
    assert row["verdict"] == "not judged (emulation degraded)" and row["agrees"] is None
    assert row["how"].startswith("measured (emulated, degraded); its cause: CPU saturation: all cores busy in 92%")
    assert row["how"].endswith(" ...") and len(row["how"]) < len("measured (emulated, degraded); its cause: ") + 170
    del rows[1]["fidelity_cause"]
    rows[1]["fidelity"] = "faithful"
    row, = paper.table([claim], rows, [])
    assert row["verdict"] == "agrees" and row["how"] == "measured (emulated, faithful)"
    simulated = [dict(r, mode="simulate", fidelity="simulated") for r in rows]
    assert paper.table([claim], simulated, [])[0]["how"] == "simulated"


def test_a_time_measured_on_loopback_is_not_judged_but_what_the_network_does_not_set_is():
    claim = loaded(relative_to="b", paper=0.5)
    rows = [{"label": "a", "mode": "emulate", "gst_median_s": 1.0, "fidelity": "not measured"},
            {"label": "b", "mode": "emulate", "gst_median_s": 2.0, "fidelity": "not measured"}]
    row, = paper.table([claim], rows, [])
    assert row["verdict"] == paper.NOT_JUDGED_LOOPBACK and row["agrees"] is None
    assert row["how"] == "measured (loopback)"
    wire = dict(claim, metric="wire_ratio")
    rows = [dict(r, wire_ratio=w) for r, w in zip(rows, (0.1, 0.2))]
    assert paper.table([wire], rows, [])[0]["verdict"] == "agrees"  # bytes on the wire: loopback measures them


def test_why_shows_on_every_row_and_derived_claims_say_so():
    claim = loaded(relative_to="b", paper=0.5, why="because", derived="follows from x")
    rows = [{"label": "a", "gst_median_s": 1.0, "mode": "simulate"}, {"label": "b", "gst_median_s": 2.0,
                                                                       "mode": "simulate"}]
    row, = paper.table([claim], rows, [])
    assert row["verdict"] == "agrees" and row["why"] == "because" and row["derived"] == "follows from x"


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
    assert fig5["kind"] == "paper" and 1.4 < fig5["ours"] < 1.7
    # a 50% gain against the paper's 60%: within a tenth of 1.6, not of its effect, so it differs and says why
    assert fig5["verdict"] == "differs" and "NCCL" in fig5["why"]


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
