"""What this kind of machine was measured to emulate faithfully (measured_limits.json, written by scripts/limits.py on a
2-core machine), and the one-line note a network beyond it gets before it comes up."""

from __future__ import annotations

import json
import os
from typing import Optional

from emulation.core.topology import Topology

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "measured_limits.json")


def measured(path: str = TABLE) -> dict:
    """Family -> what was measured ({} when the table is missing)."""
    try:
        with open(path) as f:
            return json.load(f).get("families", {})
    except (OSError, ValueError):
        return {}


def beyond_measured(topo: Topology, datapath: str, fastest_mbps: float, dilation: float = 1.0,
                    table: Optional[dict] = None) -> Optional[str]:
    """A note when a userspace-datapath network is larger than the largest of its family measured faithful, or its
    fastest link faster than that was measured at; None within what was measured (or on the kernel datapath, not
    measured)."""
    if datapath != "user":
        return None
    entry = (measured() if table is None else table).get(topo.kind)
    largest = ((entry or {}).get("net") or {}).get("largest_faithful")
    if not largest:
        return None
    hosts, rate = len(topo.hosts), fastest_mbps
    if hosts <= largest["hosts"] and rate <= largest["rate_mbps"]:
        return None
    when = entry.get("measured", {}).get("date", "?")[:10]
    first = (entry["net"].get("first_not_faithful") or {})
    past = f"; {first['spec']} was {first.get('verdict') or 'not measured'} ({first.get('bottleneck')})" \
        if first.get("spec") else ""
    advice = f"--dilation {max(2, round(rate / largest['rate_mbps'] * dilation))} lowers the rates it must carry" \
        if rate > largest["rate_mbps"] else \
        "not measured, so only its verdict will tell; a smaller topology stays within it"
    return (f"{topo.spec} at {rate:g} Mbit/s shaped is beyond the largest {topo.kind} measured faithful on a 2-core "
            f"machine ({largest['spec']}, {largest['hosts']} hosts at {largest['rate_mbps']:g} Mbit/s, {when}{past}): "
            f"{advice} (docs/reference/limits.md)")
