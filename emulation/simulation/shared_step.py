"""A step's messages that share a link with another message of the step, moved as the event model moves them: max-min
fair shares recomputed whenever one of them starts or finishes (exact where no message of another step crosses their
links while they send: stepwise.py checks that every step)."""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from emulation.simulation.fairshare import TIME_TOLERANCE, finishing, max_min_rates


class Sharing:
    """The messages of a step that share a link (units, as indices into the step's messages), every link they
    cross, and their durations per distinct set of message sizes and relative starts (solved once each)."""

    def __init__(self, units: np.ndarray, flow_of: np.ndarray, link_of: np.ndarray, links: np.ndarray,
                 capacity: np.ndarray, messages: int):
        self.units, self.flow_of, self.link_of, self.links, self.capacity = units, flow_of, link_of, links, capacity
        self.mask = np.zeros(messages, dtype=bool)
        self.mask[units] = True
        self.memo: Dict[bytes, np.ndarray] = {}

    @classmethod
    def of(cls, lengths: np.ndarray, flat: np.ndarray, capacity: np.ndarray) -> Optional["Sharing"]:
        """The step's sharing messages (None when no link carries two of its messages)."""
        if not len(flat):
            return None
        multi = np.bincount(flat) > 1
        if not multi.any():
            return None
        unit = np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
        shared = np.zeros(len(lengths), dtype=bool)
        shared[unit[multi[flat]]] = True
        units = np.flatnonzero(shared)
        local = np.full(len(lengths), -1, dtype=np.int64)
        local[units] = np.arange(len(units), dtype=np.int64)
        entries = shared[unit]
        links, link_of = np.unique(flat[entries], return_inverse=True)
        return cls(units, local[unit[entries]], link_of.astype(np.int64), links, capacity[links], len(lengths))

    def durations(self, sizes: np.ndarray, starts: np.ndarray):
        """Each sharing message's time to send its bytes from its start, and how long each link they cross carried
        at least one of them (solved once per set of sizes and relative starts)."""
        rel = starts - starts.min()
        key = sizes.tobytes() + rel.tobytes()
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = fluid(sizes, rel, self.flow_of, self.link_of, self.capacity)
        return found


def fluid(sizes: np.ndarray, starts: np.ndarray, flow_of: np.ndarray, link_of: np.ndarray,
          capacity: np.ndarray):
    """Durations of flows from their starts, and each link's busy time: max-min shares recomputed whenever one
    starts or finishes, as the event model does."""
    remaining = sizes.astype(float).copy()
    end = np.array(starts, dtype=float)
    waiting = remaining > 0  # an empty flow is done at its start
    active = np.zeros(len(sizes), dtype=bool)
    busy = np.zeros(len(capacity))
    now = float(starts[waiting].min()) if waiting.any() else 0.0
    while waiting.any() or active.any():
        came = waiting & (starts <= now + TIME_TOLERANCE)
        active |= came
        waiting &= ~came
        upcoming = float(starts[waiting].min()) - now if waiting.any() else np.inf
        if not active.any():
            now += upcoming
            continue
        idx = np.flatnonzero(active)
        local = np.full(len(sizes), -1, dtype=np.int64)
        local[idx] = np.arange(len(idx), dtype=np.int64)
        keep = active[flow_of]
        rate = max_min_rates(local[flow_of[keep]], link_of[keep], capacity, len(idx))
        left = remaining[idx]
        finish = left / rate
        dt = min(float(finish.min()), upcoming)
        busy[np.unique(link_of[keep])] += dt
        done = finishing(finish, dt)
        now += dt
        remaining[idx] = left - np.minimum(rate * dt, left)
        end[idx[done]] = now
        remaining[idx[done]] = 0.0
        active[idx[done]] = False
    return end - starts, busy
