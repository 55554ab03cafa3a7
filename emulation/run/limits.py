"""What this kind of machine was measured to emulate faithfully (measured_limits.json, written by scripts/limits.py on a
2-core machine), and the one-line note a network beyond it gets before it comes up.

A network is compared with what was measured by what it asks of the machine, whatever its family: its hosts (the
ranks' processes), its switch ports, the traffic its switches may have to forward (every switch port's receive rate,
summed) and its fastest link. It is within what was measured when one network measured faithful (a `net --check` or a
training run, of any family) asked at least as much on all four counts."""

from __future__ import annotations

import json
import math
import os
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

from emulation.core.topology import Topology, parse

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "measured_limits.json")
MTU_BITS = 1500 * 8  # a full frame: the switches' packets per second at a rate


class Load(NamedTuple):
    """What a network at its shaped rates asks of the machine."""

    hosts: int
    switch_ports: int
    switch_mbps: float  # every switch port's receive rate, summed: the most the switches may have to forward
    link_mbps: float    # the fastest link

    def exceeding(self, other: "Load") -> List[str]:
        """The counts on which this load asks more than `other`, each with both values."""
        return [f"{name} ({mine:g} > {theirs:g})" for name, mine, theirs in zip(COUNTS, self, other)
                if mine > theirs * (1 + 1e-9)]

    def covered_by(self, other: "Load") -> bool:
        """True when `other` asked at least as much on every count."""
        return not self.exceeding(other)

    def words(self) -> str:
        """The four counts, as the note says them."""
        return (f"{self.hosts} hosts, {self.switch_ports} switch ports, {self.switch_mbps:g} Mbit/s into the switches "
                f"({self.switch_mbps * 1e6 / MTU_BITS / 1000:.0f}k full frames/s), links up to {self.link_mbps:g} "
                f"Mbit/s")


COUNTS = ("hosts", "switch ports", "traffic into the switches", "link rate")


def load_of(topo: Topology, shaped: Sequence[float], overrides: Optional[Dict[Tuple[str, str], float]] = None) -> Load:
    """The load of a topology whose level-L links are shaped to shaped[L] Mbit/s (overrides: per link)."""
    hosts = {h.name for h in (*topo.hosts, *topo.bystanders)}
    ports, into, fastest = 0, 0.0, 0.0
    for link in topo.links:
        rate = (overrides or {}).get((link.lower, link.upper), shaped[min(link.level, len(shaped) - 1)])
        ends = 1 if link.lower in hosts else 2  # the upper end is always a switch
        ports += ends
        into += rate * ends
        fastest = max(fastest, rate)
    return Load(len(topo.hosts), ports, round(into, 6), fastest)


def uniform_load(spec: str, rate_mbps: float) -> Load:
    """The load of a topology spec with every link at one rate (a `net --check`'s, or a run's over its dilation)."""
    topo = parse(spec)
    return load_of(topo, [rate_mbps] * levels(topo))


class Point(NamedTuple):
    """One network measured faithful, with what it asked."""

    what: str
    load: Load


def measured(path: str = TABLE) -> dict:
    """Family -> what was measured ({} when the table is missing)."""
    try:
        with open(path) as f:
            return json.load(f).get("families", {})
    except (OSError, ValueError):
        return {}


def faithful_points(table: dict) -> List[Point]:
    """Every network the table says was faithful: each family's largest `net --check` (every link at its rate) and
    every faithful, correct training run (at its rate over its dilation)."""
    out = []
    for entry in table.values():
        best = ((entry or {}).get("net") or {}).get("largest_faithful")
        if best:
            out.append(Point(f"{best['spec']} net --check at {best['rate_mbps']:g} Mbit/s",
                             uniform_load(best["spec"], best["rate_mbps"])))
        for run in (entry or {}).get("runs", []):
            if run.get("verdict") == "faithful" and run.get("correct") is True:
                dilation = run.get("dilation") or 1.0
                what = f"{run['spec']} {run['algo']} run at {run['rate_mbps']:g} Mbit/s" + (
                    f", dilation {dilation:g}" if dilation != 1 else "")
                out.append(Point(what, uniform_load(run["spec"], run["rate_mbps"] / dilation)))
    return out


def first_failures(table: dict) -> List[dict]:
    """Each family's smallest `net --check` that was not faithful (at the rate of the family's checks)."""
    out = []
    for entry in table.values():
        net = (entry or {}).get("net") or {}
        bad, best = net.get("first_not_faithful"), net.get("largest_faithful")
        if bad and bad.get("spec"):
            out.append({**bad, "rate_mbps": bad.get("rate_mbps") or (best or {}).get("rate_mbps") or 10})
    return out


def levels(topo: Topology) -> int:
    """How many link levels a topology has."""
    return 1 + max((link.level for link in topo.links), default=0)


def beyond_measured(topo: Topology, datapath: str, shaped: Sequence[float], dilation: float = 1.0,
                    overrides: Optional[Dict[Tuple[str, str], float]] = None,
                    table: Optional[dict] = None) -> Optional[str]:
    """A note when no network measured faithful asked as much of the machine as this one at its shaped rates; None
    within what was measured (or on the kernel datapath, or with nothing measured)."""
    if datapath != "user":
        return None
    table = measured() if table is None else table
    points = faithful_points(table)
    load = load_of(topo, shaped, overrides)
    if not points or any(load.covered_by(p.load) for p in points):
        return None
    nearest = min(points, key=lambda p: excess(load, p.load))
    dates = sorted({str((e.get("measured") or {}).get("date"))[:10] for e in table.values() if e.get("measured")}
                   | {str(r.get("measured"))[:10] for e in table.values() for r in e.get("runs", [])
                      if r.get("measured")})
    failed = [f"; {bad['spec']} net --check at {bad['rate_mbps']:g} Mbit/s, asking no more, was "
              f"{bad.get('verdict') or 'not measured'} ({bad.get('bottleneck')})" for bad in first_failures(table)
              if uniform_load(bad["spec"], bad["rate_mbps"]).covered_by(load)]
    return (f"{topo.spec} asks more of this machine than any network measured faithful on a 2-core machine"
            f"{f' (to {dates[-1]})' if dates else ''}: {load.words()}; the nearest, {nearest.what}, had less "
            f"{', '.join(load.exceeding(nearest.load))}{''.join(failed[:1])}: "
            f"{advice(load, points, dilation)} (docs/reference/limits.md)")


def excess(load: Load, other: Load) -> float:
    """How far a load exceeds another, as the sum of log-ratios of the counts above it."""
    return sum(math.log(mine / theirs) for mine, theirs in zip(load, other) if theirs > 0 and mine > theirs)


def advice(load: Load, points: List[Point], dilation: float) -> str:
    """The smallest time dilation that brings the rates within a measured network as large (hosts and ports), or
    that only the verdict will tell."""
    factors = [max(load.switch_mbps / p.load.switch_mbps, load.link_mbps / p.load.link_mbps) for p in points
               if load.hosts <= p.load.hosts and load.switch_ports <= p.load.switch_ports]
    if not factors:
        return "not measured this large, so only its verdict will tell; a smaller topology stays within it"
    return f"--dilation {max(2, math.ceil(min(factors) * dilation))} lowers the rates it must carry"
