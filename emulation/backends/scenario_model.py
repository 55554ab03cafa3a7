"""The flow model of an emulated run's own scenario, simulated beside it (its folder's scenario-model/): the same
network, link rates, events, background flows, drawn compute and seed, each connection on the path the run's own TCP
ports hashed to. Its per-iteration GST is what the network under study gives; what the measured run loses against it
is the emulator's."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Dict, List

from emulation.backends.base import quiet
from emulation.backends.flow_model import emulated_ports, execute, prepare
from emulation.results.files import read_iterations
from emulation.run.options import RunConfig

FOLDER = "scenario-model"


def scenario_model(cfg: RunConfig, ranks: int) -> Dict[str, object]:
    """Per iteration the GST the flow model gives for a finished emulated run's scenario, in the run's own time (times
    the dilation) ({"gst_s": [...], "folder": ...}); or why there is no model ({"none": reason})."""
    out = os.path.join(cfg.out, FOLDER)
    try:
        job = prepare(replace(cfg, out=out, force=True, dilation=1.0, ecmp_ports=None, local=False, cpu_hog=0))
        try:
            job = replace(job, ports=emulated_ports(cfg.out, ranks), cfg=replace(job.cfg, ecmp_ports=cfg.out))
        except ValueError:
            pass  # no connection recorded its ports: the model spreads ECMP as it would
        execute(job, quiet)
    except (ValueError, OSError, RuntimeError) as exc:
        return {"none": f"no flow model of this run: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"}
    gsts: List[float] = [row["gst_s"] * cfg.dilation for row in read_iterations(out) if "gst_s" in row]
    return {"gst_s": gsts, "folder": FOLDER}

