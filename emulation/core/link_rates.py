"""Per-link rate overrides: a host's link or one switch-to-switch link at another rate than its level's (pure)."""

from __future__ import annotations

import math
import re
from typing import Dict, Optional, Sequence, Tuple

from emulation.core.topology import MAX_BW_MBPS, MIN_BW_MBPS, Link, Topology, TopologyError
from emulation.core.units import RATE_UNITS, parse_value

LinkKey = Tuple[str, str]  # (lower, upper) of a topology link
Overrides = Dict[LinkKey, float]  # Mbit/s
LINK_RATE_HELP = ("LINK=RATE,... a link at another rate than its level: LINK is a host with one NIC (h3), a host's NIC "
                  "on a level (h3:1), or a link's two ends (t0_0-t1_0); RATE as --bw (50, 1Gbit)")
ITEM = re.compile(r"^\s*([A-Za-z0-9_:.\-]+?)\s*=\s*(\S+)\s*$")


def check_format(text: str) -> str:
    """ValueError unless text is empty or LINK=RATE items separated by commas (the topology is checked later)."""
    for item in filter(None, (i.strip() for i in str(text).split(","))):
        m = ITEM.match(item)
        if not m:
            raise ValueError(f"--link-rate item '{item}' is not LINK=RATE: {LINK_RATE_HELP}")
        try:
            parse_value(m.group(2), RATE_UNITS)
        except ValueError:
            raise ValueError(f"--link-rate rate '{m.group(2)}' is not a number with a unit: give Mbit/s (or 1Gbit, "
                             f"500Mbit)") from None
    return str(text)


def shaper_rate(text: str, where: str) -> float:
    """A rate in Mbit/s (a number, or with a unit as tc writes it) within what the shaper honours (ValueError
    naming where)."""
    try:
        value = parse_value(text, RATE_UNITS)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or not MIN_BW_MBPS <= value <= MAX_BW_MBPS:
        raise ValueError(f"{where}: rate '{text}' is not in [{MIN_BW_MBPS:g}, {MAX_BW_MBPS:g}] Mbit/s, the rates the "
                         f"shaper honours (a number, or with a unit: 500Mbit, 1Gbit)")
    return value


def link_name(key: LinkKey) -> str:
    """How a link is named in reports and errors: its two ends."""
    return f"{key[0]}-{key[1]}"


def find_link(topo: Topology, name: str, flag: str = "--link-rate") -> Link:
    """The topology link a LINK name means (TopologyError naming what is valid)."""
    host, _, level = name.partition(":")
    if "-" not in name and host in {h.name for h in topo.hosts}:
        node = topo.node(host)
        if level:
            wanted = [i.level for i in node.interfaces]
            if not level.isdigit() or int(level) not in wanted:
                raise TopologyError(f"{flag} {name}: {host} has NICs on levels "
                                    f"{', '.join(map(str, wanted))} (give {host}:LEVEL)")
            return next(l for l in topo.links if l.lower == host and l.level == int(level))
        mine = [l for l in topo.links if l.lower == host]
        if len(mine) > 1:
            raise TopologyError(f"{flag} {name}: {host} has {len(mine)} NICs, name one as {host}:LEVEL "
                                f"(levels {', '.join(str(l.level) for l in mine)})")
        return mine[0]
    ends = name.split("-")
    if len(ends) == 2:
        for l in topo.links:
            if {l.lower, l.upper} == set(ends):
                return l
    example = topo.links[-1]
    raise TopologyError(f"{flag} {name} names no link of {topo.spec}: give a host ({topo.hosts[0].name}), a "
                        f"host's NIC ({topo.hosts[0].name}:0) or a link's two ends ({link_name((example.lower, example.upper))}),"
                        f" as `dmlbed topo {topo.spec}` lists them")


def parse_link_rates(text: str, topo: Topology, flag: str = "--link-rate") -> Overrides:
    """LINK=RATE items resolved on the topology: (lower, upper) -> Mbit/s (TopologyError naming what is wrong)."""
    out: Overrides = {}
    for item in filter(None, (i.strip() for i in str(text or "").split(","))):
        try:
            check_format(item)
        except ValueError as exc:
            raise TopologyError(str(exc)) from None
        name, rate_text = ITEM.match(item).groups()
        link = find_link(topo, name, flag)
        try:
            rate = shaper_rate(rate_text, f"{flag} {name}={rate_text}")
        except ValueError as exc:
            raise TopologyError(str(exc)) from None
        key = (link.lower, link.upper)
        if key in out:
            raise TopologyError(f"{flag} names {link_name(key)} twice: give each link once")
        out[key] = rate
    return out


def rate_of(a: str, b: str, level: int, bw: Sequence[float], overrides: Optional[Overrides]) -> float:
    """Mbit/s of the link between nodes a and b (either direction) on `level`."""
    if overrides:
        got = overrides.get((a, b), overrides.get((b, a)))
        if got is not None:
            return got
    return bw[level]


def factors(topo: Topology, bw: Sequence[float], overrides: Optional[Overrides]) -> Dict[LinkKey, float]:
    """Each overridden link's rate over its level's, as the flow model's router scales capacities."""
    level = {(l.lower, l.upper): l.level for l in topo.links}
    return {k: v / bw[level[k]] for k, v in (overrides or {}).items()}


def scaled(overrides: Overrides, factor: float) -> Overrides:
    """Every override divided by factor (the shaped rates under time dilation)."""
    return {k: v / factor for k, v in overrides.items()}


def slowest_per_level(topo: Topology, bw: Sequence[float], overrides: Optional[Overrides]) -> Tuple[float, ...]:
    """Each level's slowest link rate (the level's own rate where no override is slower)."""
    out = list(bw)
    for l in topo.links:
        rate = rate_of(l.lower, l.upper, l.level, bw, overrides)
        if rate > 0:  # a link that is down carries nothing and paces nothing: the routes go around it
            out[l.level] = min(out[l.level], rate)
    return tuple(out)


def rates_key(overrides: Overrides) -> Tuple[Tuple[LinkKey, float], ...]:
    """A set of link rates as a dictionary key (a cache per network state)."""
    return tuple(sorted(overrides.items()))


def described(overrides: Optional[Overrides]) -> Dict[str, float]:
    """The overrides as a report shows them: link name -> Mbit/s."""
    return {link_name(k): v for k, v in sorted((overrides or {}).items())}
