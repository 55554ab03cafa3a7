"""Calibration probes as plans (pure): a ping-pong between two hosts across one hierarchy level, and an
exchange in which every host sends to its neighbour across that level at once (the load a collective's step
puts on the level). Hosts are numbered by the topology's hierarchy digits (Topology.radices), least
significant first, so the level-i neighbour of a host is the one whose digit i is one higher."""

from __future__ import annotations

import math
from typing import List, Optional

from emulation.core.topology import Topology
from workloads.plan import COPY, Plan, PlanError, Transfer

PROBES = ("pingpong", "exchange")


def probe_levels(topo: Topology) -> List[int]:
    """The hierarchy levels a probe can cross: digits with a radix above 1."""
    return [i for i, r in enumerate(topo.radices()) if r > 1]


def neighbour(topo: Topology, host: int, level: int) -> int:
    """The host whose level-`level` digit is one higher (cyclically), every other digit the same."""
    radices = topo.radices()
    stride = math.prod(radices[:level])
    digit = (host // stride) % radices[level]
    return host + (((digit + 1) % radices[level]) - digit) * stride


def pinned(topo: Topology, level: int) -> Optional[int]:
    """The link level a BCube probe must use (BCube neighbours differ in exactly that digit)."""
    return level if topo.kind == "bcube" else None


def pingpong(topo: Topology, level: int) -> Plan:
    """Host 0 sends the buffer to its level neighbour, which sends it back: one round trip."""
    check_level(topo, level)
    peer = neighbour(topo, 0, level)
    lvl = pinned(topo, level)
    steps = ((Transfer(0, peer, 0, COPY, lvl),), (Transfer(peer, 0, 0, COPY, lvl),))
    return Plan(f"pingpong-L{level}", len(topo.hosts), 1, (steps,), (0,), meta={"pair": (0, peer)})


def exchange(topo: Topology, level: int) -> Plan:
    """Every host sends one piece to its level neighbour at once (piece = the sender's digit, so no host
    sends and receives the same piece): each host's link on that level carries one message each way."""
    check_level(topo, level)
    radix = topo.radices()[level]
    stride = math.prod(topo.radices()[:level])
    lvl = pinned(topo, level)
    step = tuple(Transfer(h, neighbour(topo, h, level), (h // stride) % radix, COPY, lvl)
                 for h in range(len(topo.hosts)))
    return Plan(f"exchange-L{level}", len(topo.hosts), radix, ((step,),), tuple(range(len(topo.hosts))))


def build(topo: Topology, kind: str, level: int) -> Plan:
    """The probe plan `kind` ("pingpong" or "exchange") across `level`."""
    if kind == "pingpong":
        return pingpong(topo, level)
    if kind == "exchange":
        return exchange(topo, level)
    raise PlanError(f"probe '{kind}' is unknown: valid are {', '.join(PROBES)}")


def check_level(topo: Topology, level: int) -> None:
    """PlanError unless `level` is a hierarchy level of topo."""
    if level not in probe_levels(topo):
        raise PlanError(f"level {level} is not a hierarchy level of {topo.spec}: valid are "
                        f"{', '.join(map(str, probe_levels(topo)))}")

