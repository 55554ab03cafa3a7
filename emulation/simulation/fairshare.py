"""Max-min fair rates of flows over capacitated links, by progressive filling (vectorized)."""

from __future__ import annotations

import numpy as np

RELATIVE_TOLERANCE = 1e-9
TIME_TOLERANCE = 1e-9  # seconds: events this close are together; a flow this close to its end finishes with others


def finishing(finish: np.ndarray, dt: float) -> np.ndarray:
    """Which flows, due to finish after `finish` seconds, are done when the next event comes `dt` seconds on."""
    return finish <= dt * (1 + RELATIVE_TOLERANCE) + TIME_TOLERANCE


def max_min_rates(flow_of: np.ndarray, link_of: np.ndarray, capacity: np.ndarray, flows: int) -> np.ndarray:
    """Rates of `flows` flows: (flow_of[i], link_of[i]) says flow crosses link; capacity per link.

    Every unfrozen flow's rate rises equally until a link fills; the flows crossing it are frozen; repeat.
    A flow that crosses no link gets an infinite rate.
    """
    rates = np.zeros(flows)
    frozen = np.zeros(flows, dtype=bool)
    remaining = capacity.astype(float).copy()
    crossing = np.bincount(flow_of, minlength=flows) > 0
    frozen[~crossing] = True
    rates[~crossing] = np.inf
    links = len(capacity)
    while not frozen.all():
        active = ~frozen[flow_of]
        users = np.bincount(link_of[active], minlength=links)
        used = users > 0
        share = np.full(links, np.inf)
        share[used] = remaining[used] / users[used]
        step = share.min()
        rates[~frozen] += step
        remaining -= step * users
        full = used & (remaining <= capacity * RELATIVE_TOLERANCE)
        hit = np.zeros(flows, dtype=bool)
        hit[flow_of[active & full[link_of]]] = True
        frozen |= hit
    return rates
