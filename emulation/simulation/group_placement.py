"""Named placement rules for a parallel job's groups (`--placement tp-in-rack`, `dp-across-racks`, ...): a rule
numbers the ranks so that one kind's groups sit as it says on the job's hosts (rank r on host r), and is checked
against the racks those hosts hang from (a rack: the switch a single-NIC host links to)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Dict, Sequence

from emulation.core.topology_types import Topology
from workloads.parallel_layout import DEFAULT_ORDER, KINDS, Layout, LayoutError

SHAPES = {"in-rack": "under one switch", "across-racks": "under different switches"}
RULES = tuple(f"{kind}-{shape}" for kind in KINDS for shape in SHAPES)
FORMAT = "KIND-in-rack or KIND-across-racks, KIND one of " + ", ".join(KINDS)


def check_placement_format(text: str) -> str:
    """A --placement value as written if it names a rule ('': none)."""
    if text and text not in RULES:
        raise LayoutError(f"--placement {text}: not a placement rule: give {FORMAT} (e.g. tp-in-rack)")
    return text


def racks(topo: Topology, hosts: Sequence[str]) -> Dict[str, str]:
    """Each host's rack: the switch its one link goes to (LayoutError for a host with several NICs)."""
    wanted = set(hosts)
    uplinks: Dict[str, list] = {}
    for link in topo.links:
        if link.lower in wanted:
            uplinks.setdefault(link.lower, []).append(link.upper)
    several = [h for h in hosts if len(uplinks.get(h, ())) != 1]
    if several:
        raise LayoutError(f"--placement: {several[0]} on {topo.spec} has {len(uplinks.get(several[0], ()))} links, "
                          f"so no one rack (place groups on multi-NIC hosts with --parallel ...,order=... or "
                          f"--hosts)")
    return {h: uplinks[h][0] for h in hosts}


def placed(layout: Layout, rule: str, topo: Topology, hosts: Sequence[str]) -> Layout:
    """The layout numbered as the rule says (its kind fastest to keep a group together, slowest to spread it), the
    others in Megatron-LM's order; LayoutError when the layout gave its own order or the racks cannot hold it."""
    kind, shape = rule.split("-", 1)
    if layout.order != DEFAULT_ORDER:
        raise LayoutError(f"--placement {rule} numbers the ranks itself: give it or --parallel's order=, not both")
    others = tuple(k for k in DEFAULT_ORDER if k != kind)
    numbered = replace(layout, order=(kind, *others) if shape == "in-rack" else (*others, kind))
    rack_of = racks(topo, hosts)
    size = Counter(rack_of.values())
    for group in numbered.groups(kind):
        used = [rack_of[hosts[r]] for r in group]
        if len(set(used)) != (1 if shape == "in-rack" else len(used)):
            where = ", ".join(f"{hosts[r]} under {rack_of[hosts[r]]}" for r in group[:4])
            held = f"{min(size.values())}" + ("" if min(size.values()) == max(size.values()) else
                                               f" to {max(size.values())}")
            raise LayoutError(f"--placement {rule}: the job's {len(size)} racks of {held} hosts on {topo.spec} "
                              f"cannot hold groups of {kind}={len(group)} "
                              f"ranks {SHAPES[shape]} (one would sit on {where}{', ...' if len(group) > 4 else ''})")
    return numbered
