"""Topologies from a file (JSON or YAML) and back: a layered network of one-NIC hosts and switches (pure).

The file lists the hosts (h0..h(N-1), in rank order: a count or the names), the switches with their level
(0: the switches hosts hang from) and the links, each host to a level-0 switch or a switch to one a level above:

    hosts: 16
    switches: [{name: leaf0, level: 0}, {name: spine0, level: 1}, ...]
    links: [[h0, leaf0], [leaf0, spine0], ...]

A link may give its ports ({a: leaf0, b: spine0, ports: [5, 1]}) and a switch its datapath id; both are numbered in
the file's order where left out. `dmlbed topo SPEC --export FILE` writes any topology of one-NIC hosts this way,
ports and datapath ids included, so reading it back gives the same network. A layered file (every switch link one
level up, one way down to each host) is routed as the families are, up/down with ECMP over the upward links; any
other graph of switches (links within a level, across levels, rings, tori) by shortest paths with ECMP.
"""

from __future__ import annotations

import json
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

from emulation.core.topology_types import MAX_HOSTS, Host, Link, Switch, Topology, TopologyError, make_host, make_switch

SUFFIXES = (".json", ".yaml", ".yml")
SWITCH_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,9}")  # interfaces are named NAME-ethP, at most 15 characters
FILE_KIND = "file"


def is_topology_file(spec: str) -> bool:
    """True when a --topo value names a file (by its suffix, or an existing path) rather than a family."""
    text = str(spec).strip()
    return text.lower().endswith(SUFFIXES) or (os.path.sep in text and os.path.exists(text))


def read_topology(path: str) -> Topology:
    """The topology a JSON or YAML file describes; TopologyError in one line naming what is wrong."""
    full = os.path.abspath(os.path.expanduser(str(path).strip()))
    try:
        with open(full) as f:
            text = f.read()
    except OSError as exc:
        raise TopologyError(f"topology file {path}: {exc.strerror or exc} (give a .json or .yaml file; "
                            f"`dmlbed topo leafspine:4,4,2 --export FILE` writes one)") from None
    return topology_from_data(load_text(text, path), full)


def load_text(text: str, path: str) -> object:
    """The data of a JSON or YAML text (YAML reads JSON too)."""
    import yaml
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise TopologyError(f"topology file {path} is not JSON or YAML{where}: "
                            f"{getattr(exc, 'problem', None) or exc}") from None


def _fail(path: str, what: str) -> TopologyError:
    return TopologyError(f"topology file {path}: {what}")


def _host_names(data: dict, path: str) -> List[str]:
    hosts = data.get("hosts")
    if isinstance(hosts, int) and not isinstance(hosts, bool):
        names = [f"h{i}" for i in range(hosts)]
    elif isinstance(hosts, list) and all(isinstance(h, str) for h in hosts):
        names = list(hosts)
    else:
        raise _fail(path, "'hosts' must be a count or a list of names h0..h(N-1)")
    if len(names) < 2 or len(names) > MAX_HOSTS:
        raise _fail(path, f"{len(names)} hosts: give 2..{MAX_HOSTS}")
    if names != [f"h{i}" for i in range(len(names))]:
        wrong = next(n for i, n in enumerate(names) if n != f"h{i}")
        raise _fail(path, f"host '{wrong}' is out of order or misnamed: hosts are h0..h{len(names) - 1} in rank "
                          f"order")
    return names


def _switches(data: dict, path: str, hosts: Sequence[str]) -> List[Switch]:
    raw = data.get("switches")
    if not isinstance(raw, list) or not raw:
        raise _fail(path, "'switches' must be a non-empty list of {name, level}")
    out, names, dpids = [], set(hosts), set()
    for i, s in enumerate(raw):
        if not isinstance(s, dict) or not isinstance(s.get("name"), str) or not isinstance(s.get("level", 0), int):
            raise _fail(path, f"switch {i + 1} must be {{name: NAME, level: L}}")
        name, level = s["name"], s.get("level", 0)
        if not SWITCH_NAME.fullmatch(name):
            raise _fail(path, f"switch name '{name}' is invalid: a letter, then up to 9 letters, digits or _")
        if name in names:
            raise _fail(path, f"'{name}' is named twice: every host and switch needs its own name")
        if not 0 <= level <= 15:
            raise _fail(path, f"switch {name} has level {level}: give 0..15")
        sw = make_switch(name, "switch", level, i)
        if "dpid" in s:
            dpid = int(s["dpid"], 16) if isinstance(s["dpid"], str) else s["dpid"]
            if not isinstance(dpid, int) or not 0 < dpid < 1 << 64:
                raise _fail(path, f"switch {name} has dpid {s['dpid']!r}: give a 64-bit number")
            sw = Switch(name, dpid, level, i, s.get("role", "switch"))
        if sw.dpid in dpids:
            raise _fail(path, f"switch {name} repeats datapath id {sw.dpid_hex}")
        names.add(name)
        dpids.add(sw.dpid)
        out.append(sw)
    return out


def _link_ends(item: object, n: int, path: str) -> Tuple[str, str, Optional[Tuple[int, int]]]:
    if isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item):
        return item[0], item[1], None
    if isinstance(item, dict) and isinstance(item.get("a"), str) and isinstance(item.get("b"), str):
        ports = item.get("ports")
        if ports is not None and not (isinstance(ports, list) and len(ports) == 2
                                      and all(isinstance(p, int) and 0 <= p < 65280 for p in ports)):
            raise _fail(path, f"link {n} ({item['a']}-{item['b']}) has ports {ports!r}: give [PORT_A, PORT_B]")
        return item["a"], item["b"], tuple(ports) if ports is not None else None
    raise _fail(path, f"link {n} must be [A, B] or {{a: A, b: B, ports: [PA, PB]}}")


def _links(data: dict, path: str, hosts: Sequence[str], switches: Sequence[Switch]) -> List[Link]:
    raw = data.get("links")
    if not isinstance(raw, list) or not raw:
        raise _fail(path, "'links' must be a non-empty list of [A, B] pairs")
    level = {s.name: s.level for s in switches}
    host_set = set(hosts)
    taken: Dict[str, set] = {}
    seen, out, pending = set(), [], []
    for n, item in enumerate(raw, 1):
        a, b, ports = _link_ends(item, n, path)
        for end in (a, b):
            if end not in host_set and end not in level:
                raise _fail(path, f"link {n} ({a}-{b}): '{end}' is neither a host nor a switch of the file")
        if a in host_set and b in host_set:
            raise _fail(path, f"link {n} ({a}-{b}) joins two hosts: a host links to a level-0 switch")
        if b in host_set or (a not in host_set and level[a] > level[b]):
            a, b = b, a
            ports = (ports[1], ports[0]) if ports else None
        if a in host_set and level[b] != 0:
            raise _fail(path, f"link {n} ({a}-{b}): a host links to a level-0 switch, {b} is level {level[b]}")
        if (a, b) in seen or (b, a) in seen:
            raise _fail(path, f"link {a}-{b} is listed twice")
        seen.add((a, b))
        if ports:
            for node, port in zip((a, b), ports):
                if port in taken.setdefault(node, set()):
                    raise _fail(path, f"{node} port {port} is used by two links")
                taken[node].add(port)
        pending.append((a, b, ports))
    for a, b, ports in pending:
        if ports is None:
            ports = (_free_port(taken, a, a in host_set), _free_port(taken, b, False))
        out.append(Link(a, ports[0], b, ports[1], 0 if a in host_set else max(level[b], level[a] + 1)))
    return out


def layered(links: Sequence[Link], level: Dict[str, int], hosts: Sequence[str]) -> bool:
    """True when every switch link goes exactly one level up and no switch has two ways down to a host: what
    up/down routing serves (anything else is routed as any graph, by shortest paths)."""
    host_set = set(hosts)
    if any(l.lower not in host_set and level[l.upper] != level[l.lower] + 1 for l in links):
        return False
    children: Dict[str, List[str]] = {}
    for l in links:
        children.setdefault(l.upper, []).append(l.lower)
    below: Dict[str, set] = {}
    for name in sorted(level, key=level.get):
        below[name] = set()
        for child in children.get(name, ()):
            more = {child} if child in host_set else below[child]
            if below[name] & more:
                return False
            below[name] |= more
    return True


def _free_port(taken: Dict[str, set], node: str, host: bool) -> int:
    """The lowest port of node no link uses yet (a host's first is 0, a switch's 1) and takes it."""
    used = taken.setdefault(node, set())
    port = 0 if host else 1
    while port in used:
        port += 1
    used.add(port)
    return port


def _check_connected(path: str, hosts: Sequence[str], links: Sequence[Link]) -> None:
    """Every host has one link and reaches every other over the links (shortest-path routing finds the way)."""
    _check_one_link(path, hosts, links)
    neighbours: Dict[str, List[str]] = {}
    for l in links:
        neighbours.setdefault(l.lower, []).append(l.upper)
        neighbours.setdefault(l.upper, []).append(l.lower)
    reached, frontier = {hosts[0]}, [hosts[0]]
    while frontier:
        for other in neighbours.get(frontier.pop(), ()):
            if other not in reached:
                reached.add(other)
                frontier.append(other)
    missing = [h for h in hosts if h not in reached]
    if missing:
        raise _fail(path, f"{missing[0]} is unreachable from {hosts[0]}: no path of links joins them")


def _check_one_link(path: str, hosts: Sequence[str], links: Sequence[Link]) -> None:
    count = {h: 0 for h in hosts}
    for l in links:
        if l.lower in count:
            count[l.lower] += 1
    for h, n in count.items():
        if n != 1:
            raise _fail(path, f"{h} has {n} links: " + ("it is unreachable" if not n else
                              "hosts of a file have one NIC (several NICs: BCube)"))


def up_down_reaches(hosts: Sequence[str], switches: Sequence[Switch], links: Sequence[Link]) -> bool:
    """True when every host reaches every other going up, then down (what up/down routing can route)."""
    uplinks: Dict[str, List[str]] = {}
    children: Dict[str, List[str]] = {s.name: [] for s in switches}
    for link in links:
        uplinks.setdefault(link.lower, []).append(link.upper)
        children[link.upper].append(link.lower)
    host_set = set(hosts)
    below: Dict[str, set] = {}
    for sw in sorted(switches, key=lambda s: s.level):
        below[sw.name] = {c for c in children[sw.name] if c in host_set}.union(
            *(below[c] for c in children[sw.name] if c in below))
    reach: Dict[str, set] = {}
    for sw in sorted(switches, key=lambda s: -s.level):
        reach[sw.name] = set(below[sw.name]).union(*(reach[u] for u in uplinks.get(sw.name, ())))
    return all(reach[uplinks[h][0]] >= host_set for h in hosts)


def topology_from_data(data: object, source: str) -> Topology:
    """A Topology of kind 'file' from parsed file data; source is its path (the topology's spec)."""
    if not isinstance(data, dict):
        raise _fail(source, "the file must hold a mapping with 'hosts', 'switches' and 'links'")
    unknown = sorted(set(data) - {"hosts", "switches", "links", "name", "exported_from"})
    if unknown:
        raise _fail(source, f"unknown key '{unknown[0]}': valid are hosts, switches, links, name")
    names = _host_names(data, source)
    switches = _switches(data, source, names)
    links = _links(data, source, names, switches)
    _check_connected(source, names, links)
    graph = not (layered(links, {s.name: s.level for s in switches}, names)
                 and up_down_reaches(names, switches, links))
    host_set = set(names)
    link_of = {l.lower: l for l in links if l.lower in host_set}  # a host's one link
    order = {s.name: s.index for s in switches}
    slots: Dict[str, int] = {}
    hosts: List[Host] = []
    for i, name in enumerate(names):
        edge, port = link_of[name].upper, link_of[name].lower_port
        slot = slots[edge] = slots.get(edge, -1) + 1
        host = make_host(i, (order[edge], slot), (0,))
        if port != 0:
            intf = host.interfaces[0]
            host = Host(host.name, host.index, host.coords,
                        (type(intf)(intf.host, intf.level, port, f"{name}-eth{port}", intf.ip, intf.mac),))
        hosts.append(host)
    return Topology(FILE_KIND, (), tuple(hosts), tuple(switches), tuple(links), source=source, graph=graph)


def export_data(topo: Topology) -> dict:
    """A topology of one-NIC hosts as file data: every switch with its level and dpid, every link with its ports."""
    multi = next((h.name for h in topo.hosts if len(h.interfaces) > 1), None)
    if multi:
        raise TopologyError(f"{topo.spec} cannot be exported: {multi} has {len(topo.hosts[0].interfaces)} NICs and a "
                            f"topology file's hosts have one (BCube routes through its hosts)")
    return {"exported_from": topo.spec, "hosts": len(topo.hosts),
            "switches": [{"name": s.name, "level": s.level, "dpid": s.dpid_hex, "role": s.role}
                         for s in topo.switches],
            "links": [{"a": l.lower, "b": l.upper, "ports": [l.lower_port, l.upper_port]} for l in topo.links]}


def check_export(topo: Topology, path: str) -> str:
    """The absolute path an export of topo would write; TopologyError where it cannot (suffix, folder, NICs)."""
    export_data(topo)
    return export_path(path)


def export_path(path: str) -> str:
    """The absolute path to write an export to; TopologyError where it cannot be (suffix, folder)."""
    full = os.path.abspath(os.path.expanduser(path))
    if not full.lower().endswith(SUFFIXES):
        raise TopologyError(f"--export {path}: give a .json, .yaml or .yml file")
    folder = os.path.dirname(full)
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise TopologyError(f"--export {path}: {folder} is not a folder this user can write to")
    return full


def write_topology(topo: Topology, path: str) -> str:
    """Write export_data as JSON (or YAML for a .yaml/.yml path); the absolute path written."""
    data, full = export_data(topo), export_path(path)
    if full.lower().endswith((".yaml", ".yml")):
        import yaml
        text = yaml.safe_dump(data, sort_keys=False, default_flow_style=None)
    else:
        text = json.dumps(data, indent=1)
    with open(full, "w") as f:
        f.write(text)
    return full
