"""Mininet's own topology classes as dmlbed networks: `--topo mininet:FILE.py:NAME[,ARGS]`, as `mn --custom FILE.py
--topo NAME,ARGS` spells it, builds the file's `topos[NAME]` (or its class NAME) with ARGS and reads its hosts,
switches and links into a topology file's data (pure: the user's file imports Mininet, this module does not).

Hosts become h0..h(N-1) in Mininet's own order (natural sort: h1 is h0); switches keep their names and ports; a
switch's level is its distance from the switches hosts hang from. Link options (bw, delay, loss) are refused in one
line rather than dropped: dmlbed shapes links with --bw and --link-rate."""

from __future__ import annotations

import os
import runpy
from collections import deque
from typing import Dict, List, Tuple

from emulation.core.topology_file import SWITCH_NAME, topology_from_data
from emulation.core.topology_types import Topology, TopologyError

PREFIX = "mininet:"
USAGE = "mininet:FILE.py:NAME[,ARG,...,KEY=VALUE]"
ENDS = ("node1", "node2", "port1", "port2")  # what a Mininet link's info holds besides its options
MAX_LEVEL = 15


def is_mininet_spec(spec: str) -> bool:
    """True when a --topo value names a Mininet topology file."""
    return str(spec).strip().lower().startswith(PREFIX)


def numeric(text: str):
    """An argument as Mininet's splitArgs makes it: an int, a float, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def split_spec(spec: str) -> Tuple[str, str, list, dict]:
    """mininet:FILE.py:NAME,ARGS -> (the file's absolute path, NAME, args, kwargs)."""
    body = str(spec).strip()[len(PREFIX):]
    path, sep, call = body.rpartition(":")
    if not sep or not path or not call:
        raise TopologyError(f"topology '{spec}': give {USAGE}")
    name, *params = call.split(",")
    args = [numeric(p) for p in params if "=" not in p]
    kwargs = {k: numeric(v) for k, _, v in (p.partition("=") for p in params if "=" in p)}
    return os.path.abspath(os.path.expanduser(path)), name.strip(), args, kwargs


def built_topo(spec: str):
    """The user's Topo object, built as mn builds it (TopologyError in one line naming what failed)."""
    path, name, args, kwargs = split_spec(spec)
    if not os.path.isfile(path):
        raise TopologyError(f"topology '{spec}': no file {path} ({USAGE})")
    try:
        namespace = runpy.run_path(path)
    except Exception as exc:  # the user's file: whatever it raises is named, in one line
        raise TopologyError(f"topology '{spec}': {path} failed to load: {type(exc).__name__}: {exc}") from None
    topos = namespace.get("topos") if isinstance(namespace.get("topos"), dict) else {}
    maker = topos.get(name) or namespace.get(name)
    if not callable(maker):
        valid = sorted(topos) or sorted(k for k, v in namespace.items() if isinstance(v, type) and hasattr(v, "hosts"))
        raise TopologyError(f"topology '{spec}': {path} has no topos['{name}'] nor class {name}: valid are "
                            f"{', '.join(valid) or 'none'}")
    try:
        topo = maker(*args, **kwargs)
    except Exception as exc:
        raise TopologyError(f"topology '{spec}': {name}({', '.join(map(repr, args))}) raised "
                            f"{type(exc).__name__}: {exc}") from None
    if not all(hasattr(topo, m) for m in ("hosts", "switches", "links")):
        raise TopologyError(f"topology '{spec}': {name} did not build a Mininet Topo (no hosts/switches/links)")
    return topo


def mininet_data(spec: str) -> dict:
    """A Mininet Topo as a topology file's data: hosts renamed h0.., switches with their levels, links with ports."""
    topo = built_topo(spec)
    hosts, switches = list(topo.hosts(sort=True)), list(topo.switches(sort=True))
    rename = {h: f"h{i}" for i, h in enumerate(hosts)}
    for s in switches:
        if not SWITCH_NAME.fullmatch(str(s)) or s in rename.values():
            raise TopologyError(f"topology '{spec}': switch name '{s}' is invalid here: a letter, then up to 9 "
                                f"letters, digits or _, and not a host's new name (h0..)")
    links: List[dict] = []
    neighbours: Dict[str, List[str]] = {s: [] for s in switches}
    mininet_links = list(topo.links(sort=True, withInfo=True))
    for a, b, info in mininet_links:
        options = sorted(k for k in info if k not in ENDS)
        if options:
            raise TopologyError(f"topology '{spec}': link {a}-{b} sets {', '.join(options)}: dmlbed does not apply a "
                                f"Mininet link's options (give --bw per level or --link-rate LINK=RATE)")
        links.append({"a": rename.get(a, a), "b": rename.get(b, b), "ports": [info["port1"], info["port2"]]})
        if a in neighbours and b in neighbours:
            neighbours[a].append(b)
            neighbours[b].append(a)
    edge = {b if a in rename else a for a, b, _ in mininet_links if (a in rename) != (b in rename)}
    level = {s: 0 for s in edge}
    queue = deque(edge)
    while queue:
        s = queue.popleft()
        for t in neighbours[s]:
            if t not in level:
                level[t] = level[s] + 1
                queue.append(t)
    return {"hosts": len(hosts), "links": links,
            "switches": [{"name": s, "level": min(level.get(s, 0), MAX_LEVEL)} for s in switches]}


def read_mininet(spec: str) -> Topology:
    """The topology a Mininet Topo file builds; its spec keeps the file's absolute path (ranks build it again)."""
    path, name, args, kwargs = split_spec(spec)
    call = ",".join([name] + [str(a) for a in args] + [f"{k}={v}" for k, v in kwargs.items()])
    source = f"{PREFIX}{path}:{call}"
    return topology_from_data(mininet_data(spec), source)
