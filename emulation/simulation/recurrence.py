"""The flow model's shortcut where no two flows can ever share a link: every flow then runs at its path's slowest
link from its first byte to its last, so each node of the plan's graph is done at the latest of its dependencies
plus its own time (a send side: its bytes at that rate, then its latency; a receive side: when its flow has
arrived), a longest path computed frontier by frontier over the graph with arrays. It gives what the event model
gives (flows.py), without one event per finish time.

No two flows share a link when every directed link is crossed by the sends of one rank on one link level only,
and in each step by one connection of it: the engine's rules then order them (a rank's send waits for its sends of
earlier steps on the same level to arrive; a connection carries its units one after the other). A plan that
breaks this (a rank sending to several peers at once over one link, several ranks' flows on a switch link) is left
to the event model."""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from emulation.simulation.flow_graph import FlowGraph


@dataclass
class Times:
    """Every unit's first byte sent, last byte sent and arrival; every node's completion; how many frontiers."""

    started: np.ndarray
    sent: np.ndarray
    landed: np.ndarray
    done: np.ndarray
    rounds: int


def links_unshared(g: FlowGraph, lengths: np.ndarray, flat_links: np.ndarray, links: int) -> bool:
    """Whether no two units can ever be on one directed link at once: every link carries units of one (source
    rank, link level) only, and in each step of one connection (destination, stream) only."""
    if not len(g.src):
        return True
    levels = int(g.level.max(initial=0)) + 1
    moving = lengths > 0  # a receiver's link on a level carries every sender to it there: two senders share it
    if not same_within(g.dst[moving] * levels + g.level[moving], g.src[moving], (int(g.dst.max()) + 1) * levels):
        return False
    unit = np.repeat(np.arange(len(g.src), dtype=np.int64), lengths)
    if not len(unit):
        return True
    link = flat_links.astype(np.int64)
    sender = g.src[unit] * levels + g.level[unit]
    if not same_within(link, sender, links):
        return False
    streams = int(g.stream.max(initial=0)) + 1
    steps = int(g.step.max(initial=0)) + 1
    connection = g.dst[unit] * streams + g.stream[unit]
    return same_within(link * steps + g.step[unit], connection, links * steps)


def same_within(group: np.ndarray, value: np.ndarray, groups: int) -> bool:
    """Whether every group holds one value only."""
    first = np.full(groups, -1, dtype=np.int64)
    first[group[::-1]] = value[::-1]  # numpy keeps the last write: the first occurrence in order
    return bool(np.all(first[group] == value))


def unit_rates(lengths: np.ndarray, flat_links: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    """Each unit's rate: its path's slowest link (infinite for a unit that crosses no link)."""
    count = len(lengths)
    rate = np.full(count, np.inf)
    has = lengths > 0
    if has.any():
        starts = (np.cumsum(lengths) - lengths)[has]
        rate[has] = np.minimum.reduceat(capacity[flat_links], starts)
    return rate


def longest_paths(g: FlowGraph, duration: np.ndarray, latency: np.ndarray) -> Times:
    """Every node's completion when a send side takes its unit's duration and latency after it is ready, a receive
    side is done once ready and its unit arrived, and a join once its members are."""
    units, sides = len(g.src), g.sides
    ready = np.zeros(g.nodes)
    done = np.full(g.nodes, np.nan)
    pending = g.pending.copy()
    pending[1:sides:2] += 1  # a receive side also waits for its own flow to arrive: its send side's completion
    started, sent, landed = np.zeros(units), np.zeros(units), np.zeros(units)
    frontier = np.flatnonzero(pending == 0)
    rounds = 0
    while len(frontier):
        rounds += 1
        t = ready[frontier]
        is_send = (frontier < sides) & (frontier % 2 == 0)
        send = frontier[is_send] >> 1
        started[send] = t[is_send]
        sent[send] = started[send] + duration[send]
        landed[send] = sent[send] + latency[send]
        t[is_send] = landed[send]
        done[frontier] = t
        counts = g.dependents_ptr[frontier + 1] - g.dependents_ptr[frontier]
        waiting = np.concatenate([g.dependents_of(frontier), 2 * send + 1])
        origin = np.concatenate([np.repeat(t, counts), landed[send]])
        np.maximum.at(ready, waiting, origin)
        np.subtract.at(pending, waiting, 1)
        frontier = np.unique(waiting[pending[waiting] == 0])
    return Times(started, sent, landed, done, rounds)


def durations(g: FlowGraph, rate: np.ndarray) -> np.ndarray:
    """Each unit's time on its links: its bytes at its rate (nothing for an empty unit)."""
    out = np.zeros(len(g.src))
    moving = g.bytes > 0
    out[moving] = g.bytes[moving] / rate[moving]
    return out


def unfinished(times: Times) -> int:
    """How many nodes never became ready (a dependency cycle)."""
    return int(np.isnan(times.done).sum())
