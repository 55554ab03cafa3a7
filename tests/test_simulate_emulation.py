"""Simulation against emulation on small cases: the same configuration run both ways in one compare matrix."""

import csv
import json

import pytest

from helpers import run_dmlbed
from test_emulation import leftovers

pytestmark = pytest.mark.emulation

# PS is left out since every emulated run is judged against its own scenario's flow model (test_run_emulation.py's
# algorithm runs assert that model for PS, BML, BlueConnect and two-level); here the compare matrix's two modes
CASES = [("ring", "star:4"), ("bml", "bcube:2,2")]


def test_simulated_gst_within_ten_percent_of_emulated(tmp_path):
    config = tmp_path / "sim-vs-emu.yaml"
    lines = ["name: sim-vs-emu", "defaults: {model: lenet5, bw: 50, iters: 4, batch: 8, compute_time: 0.3}", "runs:"]
    for algo, topo in CASES:
        for mode in ("emulate", "simulate"):
            lines.append(f"  - {{label: '{algo} {topo} {mode}', topo: '{topo}', algo: {algo}, mode: {mode}}}")
    config.write_text("\n".join(lines) + "\n")
    r = run_dmlbed("compare", str(config), "--out", str(tmp_path / "out"), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {row["label"]: row for row in csv.DictReader(open(tmp_path / "out" / "comparison.csv"))}
    for algo, topo in CASES:
        emulated, simulated = rows[f"{algo} {topo} emulate"], rows[f"{algo} {topo} simulate"]
        assert emulated["correct"] == "True" and simulated["mode"] == "simulate"
        ratio = float(simulated["gst_median_s"]) / float(emulated["gst_median_s"])
        if emulated["fidelity"] == "faithful":  # a run the emulator could not keep up with says so instead
            assert 0.9 <= ratio <= 1.1, (algo, topo, ratio)
        else:
            assert emulated["fidelity_cause"], emulated
    assert leftovers("star:4") == [] and leftovers("bcube:2,2") == []


def test_fat_tree_simulation_replays_the_emulated_connections_ports(tmp_path):
    """Fat-Tree ECMP: the simulated row takes the TCP ports the emulated workers' connections used, so both put
    every connection on the same core path; the emulated run's own verdict simulated the same scenario with the same
    ports (its scenario-model/), so the two models agree exactly, whatever the emulation's fidelity (it ran at dilation
    5 here and took 80 s of the suite when this test compared the timings themselves; a 500 KB model keeps it short,
    the ports and paths do not depend on the size)."""
    config = tmp_path / "ft.yaml"
    config.write_text(
        "name: ft\ndefaults: {model: 'mlp:500KB', bw: 50, iters: 4, batch: 8, compute_time: 0.1, topo: 'fattree:4', "
        "algo: ps}\nsweep: {mode: [emulate, simulate]}\nruns:\n"
        "  - {label: ps, sweep: {mode: [emulate]}}\n"
        "  - {label: ps, sweep: {mode: [simulate]}, ecmp: hash, ecmp_ports: emulated}\n")
    r = run_dmlbed("compare", str(config), "--out", str(tmp_path / "out"), timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "out" / "sim_vs_emu.csv")))
    assert len(rows) == 1
    summary = json.load(open(tmp_path / "out" / "ps-modesimulate" / "summary.json"))
    assert summary["model_settings"]["ecmp"] == "hash"
    assert summary["model_settings"]["ecmp_ports"].endswith("ps-modeemulate")
    emulated = tmp_path / "out" / "ps-modeemulate"
    scenario = json.load(open(emulated / "scenario-model" / "summary.json"))
    assert scenario["model_settings"]["ecmp"] == "hash"
    assert scenario["gst_median_s"] == pytest.approx(summary["gst_median_s"], rel=1e-9)
    verdict = json.load(open(emulated / "summary.json"))["fidelity"]
    scenario_gst = verdict["scenario_model"]["gst_median_s"]  # the verdict keeps 8 decimal places
    assert scenario_gst == pytest.approx(summary["gst_median_s"], rel=1e-9, abs=1e-8)
    assert leftovers("fattree:4") == []
