"""Link delay and loss per link level (netem under the bandwidth shaping): parsing and tc commands (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from emulation.core.topology import Topology, parse_per_level
from emulation.core.units import PERCENT_UNITS, TIME_UNITS

MAX_DELAY_MS = 10000.0


@dataclass(frozen=True)
class Impairment:
    """One-way delay (ms) and loss (percent) of every directed link, per link level."""

    delay_ms: Tuple[float, ...]
    loss_pct: Tuple[float, ...]

    @classmethod
    def none(cls, levels: int) -> "Impairment":
        """No delay and no loss on any of `levels` link levels."""
        return cls((0.0,) * levels, (0.0,) * levels)

    @property
    def active(self) -> bool:
        """True when any level has a delay or a loss (netem is needed)."""
        return any(self.delay_ms) or any(self.loss_pct)

    def netem(self, level: int) -> Optional[str]:
        """netem's arguments for links of this level ('delay 2ms loss 0.1%'), None when it has neither."""
        parts = []
        if self.delay_ms[level]:
            parts.append(f"delay {self.delay_ms[level]:g}ms")
        if self.loss_pct[level]:
            parts.append(f"loss {self.loss_pct[level]:g}%")
        return " ".join(parts) or None

    def link_delay_s(self) -> Dict[int, float]:
        """Seconds of one-way delay a directed link of each level adds (for the flow model)."""
        return {level: d / 1e3 for level, d in enumerate(self.delay_ms)}

    def to_dict(self) -> dict:
        """JSON-ready form for summaries and reports."""
        return {"delay_ms": list(self.delay_ms), "loss_pct": list(self.loss_pct),
                "applied": "netem leaf under each direction's HTB class (one-way delay per link crossed)"
                if self.active else "none"}


NONE_TEXT = "0"


def parse_impairment(delay: str, loss: str, topo: Topology) -> Impairment:
    """Per-level delay (ms) and loss (%) from '2' (every level) or '0.1,2' (one per level)."""
    return Impairment(parse_per_level(delay or NONE_TEXT, topo, "--delay", "ms", MAX_DELAY_MS, units=TIME_UNITS),
                      parse_per_level(loss or NONE_TEXT, topo, "--loss", "%", 100.0, units=PERCENT_UNITS))


def netem_leaf_command(tc: str, dev: str, packets: int, netem: str) -> str:
    """netem as the leaf of HTB class 5:1, holding `packets` like the pfifo it replaces: delay and loss
    apply to what the shaping lets through, at the link's rate."""
    return f"{tc} qdisc add dev {dev} parent 5:1 handle 10: netem {netem} limit {packets}"
