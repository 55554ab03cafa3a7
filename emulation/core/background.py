"""Background traffic injected beside a job: flows between named hosts, saturating, at a constant rate, or on/off
with exponential on and off times (seeded); their schedules and the share of a link they leave a job (pure)."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from emulation.core.link_rates import shaper_rate
from emulation.core.topology import Topology, TopologyError

BULK, RATE, ONOFF = "bulk", "rate", "onoff"
KINDS = (BULK, RATE, ONOFF)
BACKGROUND_HELP = ("a flow from host SRC to host DST beside the job (repeatable): SRC-DST saturating (bulk), "
                   "SRC-DST:rate:MBPS at a constant rate, or SRC-DST:onoff:ON,OFF[,MBPS] on and off for exponential "
                   "times of these means, seconds")
ITEM = re.compile(r"^\s*([A-Za-z0-9_]+)\s*-\s*([A-Za-z0-9_]+)\s*(?::\s*([a-z]+)\s*(?::\s*(.*?))?)?\s*$")
MAX_MEAN_S = 3600.0
BACKGROUND_PORT = 5301  # the first flow's port; a flow's receiver listens on BACKGROUND_PORT + its index


@dataclass(frozen=True)
class BackgroundFlow:
    """One injected flow: src host to dst host; rate_mbps caps it (None: as fast as its share); on/off means."""

    src: str
    dst: str
    kind: str = BULK
    rate_mbps: Optional[float] = None
    on_s: Optional[float] = None
    off_s: Optional[float] = None

    @property
    def name(self) -> str:
        """How reports name it: SRC-DST."""
        return f"{self.src}-{self.dst}"

    @property
    def on_fraction(self) -> float:
        """The share of time it sends (1 unless on/off)."""
        return self.on_s / (self.on_s + self.off_s) if self.kind == ONOFF else 1.0

    def shown(self) -> str:
        """The flow as it was given."""
        if self.kind == RATE:
            return f"{self.name}:rate:{self.rate_mbps:g}"
        if self.kind == ONOFF:
            return f"{self.name}:onoff:{self.on_s:g},{self.off_s:g}" + \
                   (f",{self.rate_mbps:g}" if self.rate_mbps is not None else "")
        return self.name


def check_format(item: str) -> str:
    """ValueError naming what is wrong unless item is one flow (the hosts are checked on the topology later)."""
    parse_flow(item)
    return item


def number(text: str, what: str, item: str) -> float:
    """A finite positive number (ValueError naming the flow and what was expected)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value <= 0 or value > MAX_MEAN_S:
        raise ValueError(f"--background {item}: {what} '{text}' is not a number in (0, {MAX_MEAN_S:g}]")
    return value


def rate(text: str, item: str) -> float:
    """A rate in Mbit/s within what the shaper honours."""
    return shaper_rate(text, f"--background {item}")


def parse_flow(item: str) -> BackgroundFlow:
    """One flow from SRC-DST[:bulk | :rate:MBPS | :onoff:ON,OFF[,MBPS]] (ValueError naming what is wrong)."""
    m = ITEM.match(str(item))
    if not m:
        raise ValueError(f"--background '{item}' is not SRC-DST[:KIND]: {BACKGROUND_HELP}")
    src, dst, kind, args = m.group(1), m.group(2), m.group(3) or BULK, m.group(4)
    if kind not in KINDS:
        raise ValueError(f"--background {item}: kind '{kind}' is unknown: valid are {', '.join(KINDS)}")
    if src == dst:
        raise ValueError(f"--background {item}: a flow needs two different hosts")
    if kind == BULK:
        if args:
            raise ValueError(f"--background {item}: bulk takes no arguments (it sends as fast as its share)")
        return BackgroundFlow(src, dst)
    if not args:
        raise ValueError(f"--background {item}: {kind} needs " + ("MBPS" if kind == RATE else "ON,OFF[,MBPS]"))
    if kind == RATE:
        return BackgroundFlow(src, dst, RATE, rate_mbps=rate(args, item))
    parts = [p.strip() for p in args.split(",")]
    if len(parts) not in (2, 3):
        raise ValueError(f"--background {item}: onoff takes ON,OFF[,MBPS] (mean seconds on and off)")
    return BackgroundFlow(src, dst, ONOFF, rate_mbps=rate(parts[2], item) if len(parts) == 3 else None,
                          on_s=number(parts[0], "mean on time", item), off_s=number(parts[1], "mean off time", item))


def parse_background(items: Sequence[str], topo: Topology, flag: str = "--background") -> Tuple[BackgroundFlow, ...]:
    """Every flow, its hosts checked on the topology (TopologyError naming what is wrong)."""
    flows, hosts = [], {h.name for h in topo.hosts}
    for item in items or ():
        try:
            flow = parse_flow(item)
        except ValueError as exc:
            raise TopologyError(str(exc).replace("--background", flag, 1)) from None
        for end in (flow.src, flow.dst):
            if end not in hosts:
                raise TopologyError(f"{flag} {item}: {end} is not a host of {topo.spec} (valid: "
                                    f"{topo.hosts[0].name}..{topo.hosts[-1].name})")
        if any((f.src, f.dst) == (flow.src, flow.dst) for f in flows):
            raise TopologyError(f"{flag} names {flow.name} twice: give one flow per pair (a rate caps it)")
        flows.append(flow)
    return tuple(flows)


def schedule(flow: BackgroundFlow, index: int, seed: int, horizon_s: float) -> List[Tuple[float, float]]:
    """The (start, end) seconds in which the flow sends, from 0 to horizon_s: always for bulk and rate; on/off
    periods drawn from exponentials of their means (Random seeded by the run's seed and the flow's index), on first."""
    if flow.kind != ONOFF:
        return [(0.0, horizon_s)]
    rng = random.Random(f"background:{seed}:{index}")
    out, t = [], 0.0
    while t < horizon_s:
        on = rng.expovariate(1 / flow.on_s)
        out.append((t, min(horizon_s, t + on)))
        t += on + rng.expovariate(1 / flow.off_s)
    return out


def horizon_s(iterations: int, compute_s: float, gst_s: float) -> float:
    """How far on/off periods are drawn: well past any run of these iterations (every back end draws the same
    periods, a longer horizon only adds later ones)."""
    return iterations * (20 * compute_s + 10 * gst_s + 1.0) + 60.0


def job_share(capacity: float, job_flows: float, bulk: float, capped: Sequence[float]) -> float:
    """The max-min fair rate of each of job_flows uncapped flows on one link of this capacity that also carries
    `bulk` uncapped background flows (fractional: the share of the time they send) and background flows capped at
    these rates: water-filling, capped flows below the fair level keep their rate."""
    left, caps = capacity, sorted(capped)
    while caps and caps[0] < left / (job_flows + bulk + len(caps)):  # below the fair level: it keeps its rate
        left -= caps.pop(0)
    flows = job_flows + bulk + len(caps)
    return left / flows if flows > 0 else capacity
