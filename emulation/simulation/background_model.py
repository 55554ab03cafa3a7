"""Background flows in the flow model: each injected flow as a Persistent flow on its path, with its cap and its
on/off schedule (the same draws as an emulated run's); and for the closed forms, the rate a job's flow gets on each
level's slowest link beside them, per on/off state."""

from __future__ import annotations

import itertools
from typing import Dict, List, Sequence, Tuple

from emulation.core.background import BackgroundFlow, ONOFF, job_share, schedule
from emulation.core.link_rates import factors, slowest_per_level
from emulation.core.topology import Topology
from emulation.simulation.flows import Persistent
from emulation.simulation.routes import Hop, Router


def persistent_flows(flows: Sequence[BackgroundFlow], router: Router, seed: int,
                     horizon_s: float) -> List[Persistent]:
    """The flows on their paths (to the destination's primary address, as the emulated sender connects), capped at
    their rate in payload bytes/s, on/off ones sending in their seeded periods up to horizon_s."""
    out = []
    for n, f in enumerate(flows):
        hops = router.between(f.src, f.dst, key=("background", n))
        intervals = tuple(schedule(f, n, seed, horizon_s)) if f.kind == ONOFF else None
        out.append(Persistent(hops, None if f.rate_mbps is None else f.rate_mbps * 1e6 / 8, intervals))
    return out


def varies(flows: Sequence[BackgroundFlow]) -> bool:
    """Whether any flow turns on and off (then every iteration is simulated at its own time)."""
    return any(f.kind == ONOFF for f in flows)


def level_rates(topo: Topology, bw: Sequence[float], overrides, flows: Sequence[BackgroundFlow],
                on: Sequence[bool]) -> Tuple[float, ...]:
    """Per level, the rate one job flow gets on the level's slowest directed link, with the flows marked on sending
    beside it (each link's max-min share; a group of parallel ECMP links as its spread share per link)."""
    out = list(slowest_per_level(topo, bw, overrides))
    if not any(on):
        return tuple(out)
    router = Router(topo, "spread", link_factors=factors(topo, bw, overrides))
    crossing: Dict[Hop, List[BackgroundFlow]] = {}
    for flow, sending in zip(flows, on):
        for hop in router.between(flow.src, flow.dst) if sending else ():
            crossing.setdefault(hop, []).append(flow)
    for hop, mine in crossing.items():  # a group of parallel links: its capacity, each link's share of it
        width = router.width.get(hop, 1)
        share = job_share(router.capacity(hop, bw), 1, sum(1 for f in mine if f.rate_mbps is None),
                          [f.rate_mbps for f in mine if f.rate_mbps is not None]) / width
        out[router.level_of[hop]] = min(out[router.level_of[hop]], share)
    return tuple(out)


def states(flows: Sequence[BackgroundFlow]) -> List[Tuple[float, Tuple[bool, ...]]]:
    """Every combination of the on/off flows' states with its probability (flows on and off independently, each
    on for its share of the time); the other flows are always on."""
    toggling = [n for n, f in enumerate(flows) if f.kind == ONOFF]
    out = []
    for mask in itertools.product((True, False), repeat=len(toggling)):
        on, p = [True] * len(flows), 1.0
        for n, sending in zip(toggling, mask):
            on[n] = sending
            p *= flows[n].on_fraction if sending else 1 - flows[n].on_fraction
        out.append((p, tuple(on)))
    return out
