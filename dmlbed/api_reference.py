"""docs/reference/python-api.md: every public name of `dmlbed` with its signature and docstring, generated from the
module itself (scripts/docs.py writes it)."""

from __future__ import annotations

import inspect
from typing import List

import dmlbed
from emulation.commands.reference import GENERATED, cell
from emulation.run.options import MATRIX, described, yaml_key

CONFIG_KEYS = {yaml_key(n, o) for n, o, _ in described() if o.yaml and o.group != MATRIX}


def type_name(annotation) -> str:
    """A parameter's type as the page shows it."""
    if annotation is inspect.Parameter.empty:
        return "-"
    return annotation.__name__ if isinstance(annotation, type) else str(annotation).replace("typing.", "")


def parameters(function) -> List[str]:
    """A table of a function's parameters; the compare-config keys it takes named once, by a link."""
    params = inspect.signature(function, eval_str=True).parameters
    keys = CONFIG_KEYS & set(params) if len(CONFIG_KEYS & set(params)) > 5 else set()
    taken = [p for name, p in params.items() if name not in keys and name != "self"]
    lines = []
    if taken:
        lines += ["| parameter | type | default |", "|---|---|---|"]
        for p in taken:
            name = f"**{p.name}" if p.kind is inspect.Parameter.VAR_KEYWORD else p.name
            default = "-" if p.kind is inspect.Parameter.VAR_KEYWORD else "required" \
                if p.default is inspect.Parameter.empty else "quiet" if callable(p.default) else f"`{p.default!r}`"
            lines.append(f"| `{name}` | {cell(type_name(p.annotation))} | {cell(default)} |")
        lines.append("")
    if keys:
        lines += [f"And {len(keys)} keyword parameters, every key of a compare config with its type and default "
                  f"([Compare configs](config.md)): `topo`, `algo`, `model`, `bw`, `iters`, ...", ""]
    return lines


def page() -> str:
    """The page."""
    lines = ["# Python API", "", GENERATED.strip(), "", inspect.getdoc(dmlbed), ""]
    for name in dmlbed.__all__:
        obj = getattr(dmlbed, name)
        if inspect.isfunction(obj):
            lines += [f"## dmlbed.{name}", "", inspect.getdoc(obj) or "", ""] + parameters(obj)
        elif inspect.isclass(obj) and obj.__module__ == "dmlbed":
            lines += [f"## dmlbed.{name}", "", inspect.getdoc(obj) or "", ""]
            init = obj.__dict__.get("__init__")
            if init is not None:
                lines += parameters(init)
            for attr, member in obj.__dict__.items():
                if attr.startswith("_"):
                    continue
                if isinstance(member, property):
                    lines += [f"### {name}.{attr}", "", inspect.getdoc(member) or "", ""]
                elif inspect.isfunction(member):
                    signature = str(inspect.signature(member, eval_str=True)).replace("(self, ", "(").replace(
                        "(self)", "()")
                    lines += [f"### {name}.{attr}", "", f"`{attr}{signature}`", "", inspect.getdoc(member) or "", ""]
    return "\n".join(lines).rstrip() + "\n"
