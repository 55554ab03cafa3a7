"""The flow model of an emulated run's own scenario, simulated beside it (its folder's scenario-model/): the same
network, link rates, events, background flows, drawn compute and seed, each connection on the path the run's own TCP
ports hashed to. Its per-iteration GST is what the network under study gives; what the measured run loses against it
is the emulator's."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Dict, List, Optional, Sequence

from emulation.backends.base import quiet
from emulation.backends.flow_model import emulated_ports, execute, prepare
from emulation.core.events import LinkEvent, from_iteration
from emulation.results.files import read_iterations
from emulation.run.options import RunConfig

FOLDER = "scenario-model"


def replayed_events(events: Sequence[LinkEvent], effect: Sequence[Optional[int]]) -> List[str]:
    """The run's link events as its flow model applies them: each from the iteration it took effect in on the wire.
    At the time given, the event would fall in another of the model's iterations (they are not the measured ones'
    length), pairing a measured iteration after it with a modelled one before it; one that took effect in no
    iteration is left out."""
    return [from_iteration(e, k) for e, k in zip(events, effect) if k is not None]


def scenario_model(cfg: RunConfig, ranks: int, events: Optional[List[str]] = None) -> Dict[str, object]:
    """Per iteration the GST the flow model gives for a finished emulated run's scenario, in the run's own time (times
    the dilation) ({"gst_s": [...], "folder": ...}); or why there is no model ({"none": reason}). events: the link
    events as the run applied them (replayed_events), in place of those asked for."""
    out = os.path.join(cfg.out, FOLDER)
    try:
        job = prepare(replace(cfg, out=out, force=True, dilation=1.0, ecmp_ports=None, local=False, cpu_hog=0,
                              event=cfg.event if events is None else list(events)))
        try:
            job = replace(job, ports=emulated_ports(cfg.out, ranks), cfg=replace(job.cfg, ecmp_ports=cfg.out))
        except ValueError:
            pass  # no connection recorded its ports: the model spreads ECMP as it would
        execute(job, quiet)
    except (ValueError, OSError, RuntimeError) as exc:
        return {"none": f"no flow model of this run: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"}
    gsts: List[float] = [row["gst_s"] * cfg.dilation for row in read_iterations(out) if "gst_s" in row]
    return {"gst_s": gsts, "folder": FOLDER}

