"""report.html: written by run, simulate and compare, rendered by headless Chromium with no console error, every
plot loaded; the timeline keeps each link level in a lane of its own."""

import json
import os

import pytest

from browser import Page, browser
from emulation.commands.cli import written_report
from emulation.results.report import pyplot
from emulation.results.trace import timeline_figure
from helpers import run_dmlbed

needs_browser = pytest.mark.skipif(browser() is None, reason="no headless Chromium (make setup installs it)")
PLOTS = "JSON.stringify([...document.querySelectorAll('img.plot')].map(i => [i.complete, i.naturalWidth]))"


def rendered(path: str, shot: str):
    """(plots as [loaded, width], console errors, screenshot bytes) of a page opened in headless Chromium."""
    with Page("file://" + os.path.abspath(path)) as page:
        plots = json.loads(page.evaluate(PLOTS))
        return plots, page.errors(), page.screenshot(shot)


def assert_renders(path: str, shot: str, plots_expected: int) -> None:
    plots, errors, size = rendered(path, shot)
    assert errors == []
    assert len(plots) == plots_expected
    assert all(loaded and width > 100 for loaded, width in plots), plots
    assert size > 20_000 and os.path.getsize(shot) == size


def lanes(trace: dict):
    """The y-extent of each send level's bars in the timeline figure: {colour's level: {(y, height)}}."""
    plt = pyplot()
    fig = timeline_figure(trace, plt)
    ax = fig.axes[0]
    out = {}
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for collection in ax.collections:
        for path in collection.get_paths():
            ys = path.vertices[:, 1]
            out.setdefault(tuple(collection.get_facecolor()[0].round(3)), set()).add((ys.min(), ys.max()))
    plt.close(fig)
    return labels, out


def send(rank, level, start, it=0):
    return {"ph": "X", "pid": rank, "tid": 10, "ts": start, "dur": 10.0, "name": "s",
            "args": {"iteration": it, "level": level, "peer": 1 - rank, "bytes": 1}}


def test_the_timeline_draws_each_level_in_a_lane_of_its_own():
    trace = {"traceEvents": [send(0, 0, 0.0), send(0, 1, 0.0), send(1, 0, 5.0), send(1, 1, 5.0)]}
    labels, bars = lanes(trace)
    assert labels == ["compute (lane 1)", "sends on L0 (lane 2)", "sends on L1 (lane 3)"]
    extents = [e for e in bars.values() if e]
    assert len(extents) >= 2
    level_bands = [set(e) for e in extents if len(e) == 2]  # two ranks' bars per level
    assert len(level_bands) == 2 and not level_bands[0] & level_bands[1]  # the levels never share a band


@needs_browser
def test_the_browser_check_sees_a_broken_plot(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><img class="plot" src="data:image/png;base64,!!!">'
                    '<img class="plot" src="missing.png"></body></html>')
    plots, errors, _ = rendered(str(page), str(tmp_path / "shot.png"))
    assert [w for _, w in plots] == [0, 0]
    assert len(errors) == 2


@needs_browser
def test_a_simulated_bml_run_writes_a_report_that_renders(tmp_path):
    out = tmp_path / "bml"
    r = run_dmlbed("simulate", "--topo", "bcube:3,2", "--algo", "bml", "--bw", "100", "--model", "mlp:2MB",
                   "--compute-time", "0.2", "--iters", "4", "--out", str(out), report=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == f"report: {out / 'report.html'}"
    assert_renders(str(out / "report.html"), str(tmp_path / "shot.png"), 5)
    for stem in ("timeline", "links", "iterations", "cdf", "breakdown"):
        assert (out / "figures" / f"{stem}.png").stat().st_size > 0 and (out / "figures" / f"{stem}.svg").exists()
    svg = (out / "figures" / "timeline.svg").read_text()
    assert "sends on L0 (lane 2)" in svg and "sends on L1 (lane 3)" in svg  # BML's two levels, two lanes
    page = (out / "report.html").read_text()
    assert page.index('<p class="verdict neutral"><b>simulated</b>') < page.index("At a glance")  # verdict first


def test_no_report_writes_none(tmp_path):
    out = tmp_path / "ring"
    r = run_dmlbed("simulate", "--topo", "star:4", "--algo", "ring", "--model", "mlp:1MB", "--no-report",
                   "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert not (out / "report.html").exists() and "report:" not in r.stdout


def test_a_report_that_cannot_be_drawn_warns_and_leaves_the_results(capsys):
    class Failing:
        def report(self, result):
            raise KeyError("shaped_mbps")
    assert written_report(Failing(), {}) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "report.html not written" in err[0] and "shaped_mbps" in err[0]


@needs_browser
def test_a_comparison_writes_a_report_with_lines_against_the_sweep(tmp_path):
    config = tmp_path / "sweep.yaml"
    config.write_text('name: sweep\ndefaults: {model: "mlp:1MB", iters: 3, compute_time: 0.1}\nruns:\n'
                      '  - {label: ring, topo: "star:8", algo: ring, mode: simulate}\n'
                      '  - {label: ps, topo: "star:8", algo: ps, mode: simulate}\n'
                      '  - {label: ring-theory, topo: "star:8", algo: ring, mode: theory}\n'
                      'sweep: {bw: [10, 100, 1000]}\n')
    out = tmp_path / "out"
    r = run_dmlbed("compare", str(config), "--out", str(out), report=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == f"report: {out / 'report.html'}"
    assert_renders(str(out / "report.html"), str(tmp_path / "shot.png"), 4)  # GST against bw, breakdown, 2 spreads
    svg = (out / "figures" / "gst-vs-bw.svg").read_text()
    assert "bw (Mbit/s)" in svg and "ring (simulated)" in svg and "ring closed form" in svg


@pytest.mark.emulation
@needs_browser
def test_an_emulated_bml_run_writes_a_report_that_renders(tmp_path):
    out = tmp_path / "bml"
    r = run_dmlbed("run", "--topo", "bcube:3,2", "--algo", "bml", "--bw", "100", "--model", "mlp:2MB",
                   "--iters", "4", "--out", str(out), "--wait", report=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == f"report: {out / 'report.html'}"
    assert_renders(str(out / "report.html"), str(tmp_path / "shot.png"), 5)
    svg = (out / "figures" / "timeline.svg").read_text()
    assert "sends on L0 (lane 2)" in svg and "sends on L1 (lane 3)" in svg
    verdict = json.loads((out / "summary.json").read_text())["fidelity"]["verdict"]
    page = (out / "report.html").read_text()
    assert page.index(verdict) < page.index("At a glance")


def test_scaling_is_drawn_only_where_one_label_ran_at_several_worker_counts():
    from emulation.results.report import scaling_groups
    one_size_two_modes = [dict(label="PS", mode=m, workers=16, iteration_median_s=1.0) for m in ("emulate", "simulate")]
    assert scaling_groups(one_size_two_modes) == {}  # emulated beside simulated is not scaling
    swept = [dict(label="ring", mode="simulate", workers=w, iteration_median_s=1.0) for w in (4, 8, 16)]
    assert list(scaling_groups(swept + one_size_two_modes)) == [("ring", "simulate")]
