"""The one judge of a matrix's rows: a value read from a row (or a row relative to another) held against a bound.
Paper claims (ours within a tolerance of the paper's value, or inside its range) and benchmark targets (at most, at
least, between, equal to) both become a Bound and are judged here."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

Value = Union[float, str, bool, None]


@dataclass(frozen=True)
class Bound:
    """What a value must be: inside [low, high] (either end open at infinity), or equal to `equals`."""

    low: float = -math.inf
    high: float = math.inf
    equals: Value = None
    one_of: Tuple[Value, ...] = ()
    contains: str = ""

    def holds(self, value: Value) -> Optional[bool]:
        """Whether value satisfies the bound (None when there is no value); a list of values, when every one does."""
        if isinstance(value, (list, tuple)):
            held = [self.holds(v) for v in value]
            return None if not held or None in held else all(held)
        if value is None:
            return None
        if self.equals is not None:
            return value == self.equals
        if self.one_of:
            return value in self.one_of
        if self.contains:
            return isinstance(value, str) and self.contains in value
        if isinstance(value, (str, bool)):
            return None
        return self.low <= value <= self.high

    def text(self) -> str:
        """The bound as a table prints it."""
        if self.equals is not None:
            return f"= {self.equals}"
        if self.one_of:
            return "one of " + ", ".join(map(str, self.one_of))
        if self.contains:
            return f"contains '{self.contains}'"
        if math.isinf(self.low):
            return f"<= {self.high:g}"
        if math.isinf(self.high):
            return f">= {self.low:g}"
        return f"{self.low:g}-{self.high:g}"


def around(value: float, tolerance: float, origin: float = 0.0) -> Bound:
    """Within a share `tolerance` of value's distance from origin (an effect from its value of no effect: 1.136 from
    1 gives 1.122-1.150); value at the origin: within tolerance of it."""
    if value == origin:
        return Bound(origin - tolerance, origin + tolerance)
    ends = sorted(origin + (value - origin) * (1 + side * tolerance) for side in (-1, 1))
    return Bound(ends[0], ends[1])


def in_group(row: dict, group: Dict[str, object]) -> bool:
    """Whether a row has the sweep values of this group."""
    return all(row.get(k) == v for k, v in group.items())


def matching(rows: Sequence[dict], label: str, group: Dict[str, object]) -> Optional[dict]:
    """The row with this label in one sweep group (None when it is missing)."""
    return next((r for r in rows if r["label"] == label and in_group(r, group)), None)


def related(relation: str, mine: Value, ref: Value) -> Value:
    """A row's value as the relation reads it: itself, its ratio to the reference, its reduction from it, or its
    difference from it (accuracy points)."""
    if relation == "value" or mine is None:
        return mine
    if relation == "difference":
        return None if ref is None else mine - ref
    if not ref:
        return None
    return mine / ref if relation == "ratio" else 1.0 - mine / ref


def reference_group(item: dict, group: Dict[str, object]) -> Dict[str, object]:
    """The sweep group the reference row is read in: the item's own, with `relative_in`'s values in place (a
    simulated row against the emulated one: relative_in {mode: emulate})."""
    return {**group, **(item.get("relative_in") or {})}


def value_of(item: dict, rows: Sequence[dict], group: Dict[str, object]) -> Value:
    """A claim's or target's value in one sweep group: its metric of `row`, related to `relative_to`'s (read in
    the reference group)."""
    mine = matching(rows, item["row"], group)
    ref = matching(rows, item["relative_to"], reference_group(item, group)) if item.get("relative_to") else None
    return related(item.get("relation", "value"), None if mine is None else mine.get(item["metric"]),
                   None if ref is None else ref.get(item["metric"]))


def rows_used(item: dict, rows: Sequence[dict], group: Dict[str, object]) -> List[dict]:
    """The rows a claim's or target's value comes from in one sweep group (its row, and the row it is relative to)."""
    found = [matching(rows, item["row"], group)]
    if item.get("relative_to"):
        found.append(matching(rows, item["relative_to"], reference_group(item, group)))
    return [r for r in found if r is not None]


def groups(rows: Sequence[dict], sweep_keys: Sequence[str]) -> List[Dict[str, object]]:
    """The sweep groups the rows fall in, in order."""
    return [dict(zip(sweep_keys, g)) for g in dict.fromkeys(tuple(r.get(k) for k in sweep_keys) for r in rows)]
