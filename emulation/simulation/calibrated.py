"""The calibrated theory: an algorithm's plan in the flow model with the fitted per-level latency and bandwidth
of a `dmlbed calibrate` run, beside the paper's closed form."""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from emulation.simulation.flows import simulate_plan
from emulation.simulation.routes import Router
from emulation.core.calibration import Calibration, load
from emulation.core.impairment import Impairment
from emulation.core.tcp import GOODPUT
from emulation.core.topology import Topology
from workloads.engine import CHUNK_BYTES
from workloads.plan import PlanError

FORMULA = ("plan (or plans in sequence) in the flow model at the calibrated rate and alpha of each level (engine "
           "chunks, max-min fair)")
DELAY_FORMULA = ("plan in the flow model at the shaped rate x goodput, each message delayed by the links its path "
                 "crosses (engine chunks, max-min fair); loss is not modelled")


def plan_gst(algorithm, topo: Topology, servers: int, layer_sizes: Sequence[int], rates: Dict[int, float],
             latency=0.0, options=None, link_delay_s: Optional[Dict[int, float]] = None,
             bw: Optional[Sequence[float]] = None) -> Optional[float]:
    """Seconds of one synchronization of the algorithm's plan, or its plans one after another (for its options at the
    rates bw), in the flow model (None: not made of plans, or traffic that depends on the data)."""
    if not algorithm.simulable:
        return None
    try:
        phases = algorithm.simulation_phases(topo, layer_sizes, servers, options, bw)
    except PlanError:
        return None
    return sum(simulate_plan(plan, [n * 4 for n in pieces], Router(topo), rates, latency_s=latency,
                             chunk_bytes=CHUNK_BYTES, link_delay_s=link_delay_s).gst_s for plan, pieces in phases)


def calibrated_gst(algorithm, topo: Topology, servers: int, layer_sizes: Sequence[int],
                   calibration: Calibration, options=None) -> Optional[float]:
    """Seconds of one synchronization under the calibrated alpha-beta model (None: not a single plan). A
    calibration made with --delay has the delay in its alpha already."""
    rates, latency = calibration.link_model(topo.levels)
    return plan_gst(algorithm, topo, servers, layer_sizes, rates, latency, options, bw=calibration.bw_mbps)


def delay_fields(impairment: Impairment, algorithm, topo: Topology, servers: int, layer_sizes: Sequence[int],
                 bw: Sequence[float], options=None, goodput: float = GOODPUT) -> dict:
    """The summary keys of the theory with link delay as latency ({} without a delay); goodput: payload share of
    the shaped rate (full frames of the links' MTU)."""
    if impairment is None or not any(impairment.delay_ms):
        return {}
    rates = {level: b * 1e6 / 8 * goodput for level, b in enumerate(bw)}
    gst = plan_gst(algorithm, topo, servers, layer_sizes, rates, 0.0, options, impairment.link_delay_s(), bw)
    return {"gst_theory_delay_s": gst,
            "gst_formula_delay": DELAY_FORMULA if gst is not None else
            f"none: {algorithm.name} is not made of plans (the delay model runs plans)"}


def calibrated_fields(path: Optional[str], algorithm, topo: Topology, servers: int, layer_sizes: Sequence[int],
                      bw: Sequence[float], options=None) -> dict:
    """The summary keys of the calibrated theory ({} without a calibration file)."""
    if not path:
        return {}
    cal = load(path, topo.spec, bw)
    gst = calibrated_gst(algorithm, topo, servers, layer_sizes, cal, options)
    return {"calibration": path, "gst_theory_calibrated_s": gst,
            "gst_formula_calibrated": FORMULA if gst is not None else
            f"none: {algorithm.name} is not made of plans (the calibrated model runs plans)",
            "calibrated_levels": {f"L{f.level}": {"alpha_s": f.alpha_s, "rate_mbps": f.rate_mbps}
                                  for f in cal.loaded}}


def calibrated_ratio(summary: dict) -> Optional[float]:
    """Measured GST over the calibrated theory (None when either is missing)."""
    gst, cal = summary.get("gst_median_s"), summary.get("gst_theory_calibrated_s")
    return gst / cal if gst and cal else None
