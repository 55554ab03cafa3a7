"""A network that changes under a run: a link's rate changed, or the link down or up again, from an iteration or a
time on (pure: the events as given, checked on the topology, and the link rates in force at any point of the run; a
link that is down is at 0 Mbit/s)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

from emulation.core.link_rates import LinkKey, Overrides, find_link, link_name, shaper_rate
from emulation.core.topology import Topology, TopologyError

EVENT_HELP = ("LINK=RATE@WHEN: from WHEN on the link runs at RATE, or is down or up again (repeatable): LINK as "
              "--link-rate names it (h3, h3:1, t0_0-t1_0) or a switch (c0: each of its links), RATE as --bw (50, "
              "1Gbit) or down or up, WHEN an iteration (5it: before it begins) or seconds after the first iteration "
              "began (2.5s)")
ITEM = re.compile(r"^\s*([A-Za-z0-9_:.\-]+?)\s*=\s*([^@\s]+)\s*@\s*(\d+(?:\.\d*)?|\.\d+)\s*(it|s)\s*$")
DOWN, UP = "down", "up"


@dataclass(frozen=True)
class LinkEvent:
    """One link's new rate from an iteration (before it begins) or a time (seconds after the first iteration
    began) on."""

    name: str                        # the link as given
    link: LinkKey                    # (lower, upper) of the topology link
    mbps: Optional[float]            # its rate from then on, Mbit/s of emulated time (None: down or up)
    iteration: Optional[int] = None
    at_s: Optional[float] = None
    state: Optional[str] = None      # down | up (a rate event: None)

    def shown(self) -> str:
        """As a user writes it."""
        when = f"{self.iteration}it" if self.iteration is not None else f"{self.at_s:g}s"
        return f"{self.name}={self.state or format(self.mbps, 'g')}@{when}"

    @property
    def kind(self) -> str:
        """rate, down or up."""
        return self.state or "rate"

    def due(self, iteration: int, t: float) -> bool:
        """Whether it is in force for an iteration whose synchronization begins at run time t."""
        return self.iteration <= iteration if self.iteration is not None else self.at_s <= t


def from_iteration(event: LinkEvent, iteration: int) -> str:
    """The event as a user writes it, in force from this iteration on (before it begins)."""
    return f"{link_name(event.link)}={event.state or format(event.mbps, 'g')}@{iteration}it"


def check_format(item: str) -> str:
    """ValueError unless item is LINK=RATE@WHEN (the topology and the run's length are checked later)."""
    m = ITEM.match(str(item))
    if not m:
        raise ValueError(f"--event '{item}' is not LINK=RATE@WHEN: {EVENT_HELP}")
    if m.group(2) not in (DOWN, UP):
        shaper_rate(m.group(2), f"--event {item}")
    return str(item)


def switches_expanded(items: Sequence[str], topo: Topology, flag: str) -> list:
    """The items, well formed, with a switch's down or up as each of its links' (TopologyError naming what is
    wrong)."""
    switches, out = {s.name for s in topo.switches}, []
    for item in items:
        try:
            check_format(item)
        except ValueError as exc:
            raise TopologyError(str(exc).replace("--event", flag, 1)) from None
        name, rate_text, value, unit = ITEM.match(str(item)).groups()
        if name not in switches:
            out.append(item)
        elif rate_text not in (DOWN, UP):
            raise TopologyError(f"{flag} {item}: a switch goes down or up ({name}=down@{value}{unit}); a rate is a "
                                f"link's (name its two ends, as `dmlbed topo {topo.spec}` lists them)")
        else:
            out += [f"{l.lower}-{l.upper}={rate_text}@{value}{unit}" for l in topo.links if name in (l.lower, l.upper)]
    return out


def parse_events(items: Sequence[str], topo: Topology, iterations: int, flag: str = "--event"
                 ) -> Tuple[LinkEvent, ...]:
    """Every event resolved on the topology, in the order they happen within each kind (TopologyError naming what
    is wrong: an unknown link, a rate out of range, an iteration past the run's last, two events on one link at
    one point)."""
    out = []
    for item in switches_expanded(items, topo, flag):
        name, rate_text, value, unit = ITEM.match(str(item)).groups()
        state = rate_text if rate_text in (DOWN, UP) else None
        link = find_link(topo, name, flag)
        mbps = None if state else shaper_rate(rate_text, f"{flag} {item}")
        number = float(value)
        if unit == "it":
            if not number.is_integer() or not 1 <= number < iterations:
                raise TopologyError(f"{flag} {item}: iteration {value} is not one of the run's after its first "
                                    f"(1..{iterations - 1} of {iterations}; from the start, give --link-rate)")
            event = LinkEvent(name, (link.lower, link.upper), mbps, iteration=int(number), state=state)
        else:
            if not math.isfinite(number) or number <= 0:
                raise TopologyError(f"{flag} {item}: give a time after the first iteration began (> 0 s)")
            event = LinkEvent(name, (link.lower, link.upper), mbps, at_s=number, state=state)
        if any(e.link == event.link and (e.iteration, e.at_s) == (event.iteration, event.at_s) for e in out):
            raise TopologyError(f"{flag} {item}: {link_name(event.link)} changes twice at one point: give it once")
        if any(e.link == event.link and (e.iteration is None) != (event.iteration is None) for e in out):
            raise TopologyError(f"{flag} {item}: give {link_name(event.link)}'s events all at iterations or all at "
                                f"times (which comes first is not known before the run)")
        out.append(event)
    out = sorted(out, key=lambda e: (e.at_s is not None, e.iteration or 0, e.at_s or 0.0))
    for link in {e.link for e in out}:
        down = False
        for e in (e for e in out if e.link == link and e.state):
            if (e.state == DOWN) == down:
                raise TopologyError(f"{flag} {e.shown()}: {link_name(link)} is already {e.state} then (a link goes "
                                    f"down, then up again)")
            down = e.state == DOWN
    return tuple(out)


def cut_off(topo: Topology, events: Sequence[LinkEvent]) -> Tuple[str, ...]:
    """Hosts a link left down to the run's end cuts off from the others (the run cannot finish without them)."""
    last = {}
    for e in events:
        if e.state:
            last[e.link] = e.state
    gone = {k for k, v in last.items() if v == DOWN}
    if not gone:
        return ()
    neighbours: dict = {}
    for l in topo.links:
        if (l.lower, l.upper) not in gone:
            neighbours.setdefault(l.lower, set()).add(l.upper)
            neighbours.setdefault(l.upper, set()).add(l.lower)
    parts, placed = [], set()
    for host in topo.hosts:
        if host.name in placed:
            continue
        seen, todo = set(), [host.name]
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo += neighbours.get(node, ())
        placed |= seen
        parts.append(seen)
    biggest = max(parts, key=lambda p: sum(topo.is_host(n) for n in p))
    return tuple(h.name for h in topo.hosts if h.name not in biggest)


def rates_in_force(base: Overrides, events: Sequence[LinkEvent], iteration: int, t: float) -> Overrides:
    """The link rates off their level's for an iteration whose synchronization begins at run time t: the run's own,
    then each due event in turn (one link's events are all of one kind, in order)."""
    return with_events(base, [e for e in events if e.due(iteration, t)])


def with_events(base: Overrides, events: Sequence[LinkEvent]) -> Overrides:
    """The run's own link rates, then these events' in turn; a link down at the end at 0 (up again: back at the
    rate it had)."""
    out, down = dict(base), set()
    for e in events:
        if e.state == DOWN:
            down.add(e.link)
        elif e.state == UP:
            down.discard(e.link)
        else:
            out[e.link] = e.mbps
    out.update((link, 0.0) for link in down)
    return out


def failed_links(rates: Overrides) -> Tuple[LinkKey, ...]:
    """The links a set of rates has down."""
    return tuple(sorted(k for k, v in rates.items() if v == 0))
