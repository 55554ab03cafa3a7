"""One grammar of units for every option that is a quantity: a plain number is in the option's own unit, or the
number carries a unit, as tc and Mininet users write them: times 5ms, 200us, 1s; sizes 16K, 25MB, 4MiB (K, M, G are
powers of 1000, KiB, MiB, GiB of 1024); rates 100Mbit, 10Gbit (tc's names)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict

VALUE_WITH_UNIT = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*([A-Za-z%]*)\s*$")
RATE_UNITS = {"": 1.0, "bit": 1e-6, "kbit": 1e-3, "mbit": 1.0, "gbit": 1e3}  # tc's names, in Mbit/s
TIME_UNITS = {"": 1.0, "us": 1e-3, "usec": 1e-3, "ms": 1.0, "msec": 1.0, "s": 1e3, "sec": 1e3}  # in ms
PERCENT_UNITS = {"": 1.0, "%": 1.0}
SECONDS_OF = {"ns": 1e-9, "us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3, "s": 1.0, "sec": 1.0, "min": 60.0}
BYTES_OF = {"b": 1.0, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9,
            "kib": 1024.0, "mib": 1024.0 ** 2, "gib": 1024.0 ** 3}
UNIT_NAMES = {"s": "seconds", "us": "microseconds", "B": "bytes"}
EXAMPLES = {"time": "5ms, 200us, 1s", "size": "16K, 25MB, 4MiB"}


def parse_value(text: str, units: Dict[str, float]) -> float:
    """'5ms', '1Gbit', '0.5%' or a plain number, in the quantity's base unit (ValueError if the unit is not in
    units, matched without case)."""
    m = VALUE_WITH_UNIT.match(text)
    if not m or m.group(2).lower() not in units:
        raise ValueError(text)
    return float(m.group(1)) * units[m.group(2).lower()]


@dataclass(frozen=True)
class Quantity:
    """A time or a size whose plain numbers are in `unit` (one of SECONDS_OF's or BYTES_OF's names)."""

    kind: str
    unit: str

    def units(self) -> Dict[str, float]:
        """Every unit this quantity takes, as a multiple of its own (the empty name: a plain number)."""
        table = SECONDS_OF if self.kind == "time" else BYTES_OF
        own = table[self.unit.lower()]
        return {"": 1.0, **{name: factor / own for name, factor in table.items()}}

    def parse(self, text) -> float:
        """The value in this quantity's own unit (ValueError when it is not a number with one of its units)."""
        return float(f"{parse_value(str(text), self.units()):.15g}")  # 1ms in us: 1000, not 1000.0000000000001

    @property
    def named(self) -> str:
        """The unit as prose names it."""
        return UNIT_NAMES.get(self.unit, self.unit)

    def valid(self) -> str:
        """What a value may look like, for error messages and help."""
        return f"a number of {self.named} or one with a unit ({EXAMPLES[self.kind]})"


SECONDS = Quantity("time", "s")
MILLISECONDS = Quantity("time", "ms")
MICROSECONDS = Quantity("time", "us")
BYTES = Quantity("size", "B")
MEBIBYTES = Quantity("size", "MiB")
