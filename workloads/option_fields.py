"""How an algorithm's or a codec's descriptor declares its own options: dataclass fields described once for flags,
YAML keys and checks (emulation/run/options.py collects them into the run's configuration)."""

from __future__ import annotations

from dataclasses import Field, dataclass, field
from typing import Any, Callable, Optional, Tuple


def option(default, help: str, *, low: Optional[float] = None, high: Optional[float] = None,
           choices: Optional[Tuple[str, ...]] = None, parse: Optional[Callable[[str], object]] = None,
           shapes_plan: bool = False, quantity=None) -> Any:
    """A field of an algorithm's options dataclass, described once for flags, YAML keys and checks.

    help: the flag's help text; low/high: inclusive range of a number; choices: the valid strings; parse: a format
    check of a string value (raises ValueError); shapes_plan: the plan or theory reads it, so theory and simulate
    take it too; quantity: a time or a size (emulation.core.units.Quantity), a plain number in its unit or one with a
    unit.
    """
    return field(default=default, metadata={"help": help, "low": low, "high": high, "choices": choices,
                                            "parse": parse, "shapes_plan": shapes_plan, "quantity": quantity})


@dataclass(frozen=True)
class NoOptions:
    """The options of an algorithm that reads none beyond the common ones."""


OPTION_KINDS = {"int": int, "float": float, "str": str, "bool": bool}


def option_kind(f: Field) -> type:
    """The Python type of an options field (annotations are strings under postponed evaluation)."""
    return OPTION_KINDS[f.type] if isinstance(f.type, str) else f.type
