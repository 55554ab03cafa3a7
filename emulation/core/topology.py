"""Topologies as pure data: BCube, Fat-Tree, star, hierarchical trees and leaf-spine generators, topology files, and
per-level rates (no Mininet)."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Dict, List, Optional, Sequence, Tuple

from emulation.core.radix import from_digits, to_digits
from emulation.core.topology_types import (MAX_HOSTS, PREFIX_LEN, ROLE_CODES, Host, Interface, Link, Switch,
                                           Topology, TopologyError, _check_hosts, from_json, host_address,
                                           make_host, make_switch)
from emulation.core.units import RATE_UNITS, parse_value

__all__ = ["MAX_HOSTS", "PREFIX_LEN", "ROLE_CODES", "Host", "Interface", "Link", "Switch", "Topology", "TopologyError",
           "from_json", "host_address", "make_host", "make_switch"]  # re-exported: importers name this module

def job_view(topo: Topology, names: Sequence[str]) -> Topology:
    """The network as a job on some of its hosts sees it: those hosts as its ranks 0..k-1 in the given order (each
    keeping its name, interfaces and addresses), every switch and link, the other hosts as bystanders."""
    chosen = set(names)
    by_name = {h.name: h for h in topo.hosts}
    hosts = tuple(replace(by_name[n], index=r) for r, n in enumerate(names))
    return Topology(topo.kind, topo.params, hosts, topo.switches, topo.links,
                    tuple(h for h in topo.hosts if h.name not in chosen), topo.source, topo.graph, topo.routing)


HOSTS_HELP = ("the hosts the job runs on, in rank order: h0,h2,h4 or ranges h0..h3,h8 (default: every host); the "
              "others stay free for background traffic")


def check_hosts_format(text: str) -> str:
    """ValueError unless text is empty or NAME / NAME..NAME items separated by commas (checked on a topology later)."""
    for item in filter(None, (i.strip() for i in str(text).split(","))):
        if not re.fullmatch(r"h\d+(\.\.h\d+)?", item):
            raise ValueError(f"--hosts item '{item}' is not a host (h3) or a range (h0..h3): {HOSTS_HELP}")
    return str(text)


def parse_hosts(text: str, topo: Topology, flag: str = "--hosts") -> Optional[Tuple[str, ...]]:
    """The host names a job runs on, in rank order (None: every host); TopologyError naming what is wrong."""
    if not str(text or "").strip():
        return None
    try:
        check_hosts_format(text)
    except ValueError as exc:
        raise TopologyError(str(exc).replace("--hosts", flag, 1)) from None
    known = {h.name for h in topo.hosts}
    names: List[str] = []
    for item in filter(None, (i.strip() for i in str(text).split(","))):
        first, _, last = item.partition("..")
        a, b = int(first[1:]), int((last or first)[1:])
        if b < a:
            raise TopologyError(f"{flag} {item}: the range runs backwards (write h{b}..h{a})")
        for n in range(a, b + 1):
            if f"h{n}" not in known:
                raise TopologyError(f"{flag} {item}: h{n} is not a host of {topo.spec} (valid: "
                                    f"{topo.hosts[0].name}..{topo.hosts[-1].name})")
            if f"h{n}" in names:
                raise TopologyError(f"{flag} names h{n} twice: give each host once")
            names.append(f"h{n}")
    if len(names) < 2:
        raise TopologyError(f"{flag} {text}: a job needs at least 2 hosts")
    if topo.kind == "bcube":
        raise TopologyError(f"{flag}: BCube routes by its hosts' coordinates and relays through them, so a job "
                            f"takes every host of {topo.spec} (valid on star, tree and fattree)")
    return tuple(names)


def digits(index: int, n: int, k: int) -> Tuple[int, ...]:
    """BCube address of host `index`: its k base-n digits, least significant (level 0) first."""
    return tuple(to_digits(index, (n,) * k))


def undigits(ds: Tuple[int, ...], n: int) -> int:
    """Inverse of digits()."""
    return from_digits(ds, (n,) * len(ds))


def bcube(n: int, k: int) -> Topology:
    """BCube(n,k) as in the BML paper: n^k hosts with k interfaces, k*n^(k-1) n-port switches."""
    if n < 2:
        raise TopologyError(f"bcube n={n} is invalid: n (switch ports) must be >= 2")
    if k < 1:
        raise TopologyError(f"bcube k={k} is invalid: k (levels) must be >= 1")
    _check_hosts(n ** k, f"bcube:{n},{k}")
    hosts = tuple(make_host(i, digits(i, n, k), tuple(range(k))) for i in range(n ** k))
    switches, links = [], []
    for level in range(k):
        for j in range(n ** (k - 1)):
            sw = make_switch(f"s{level}_{j}", "bcube", level, j)
            switches.append(sw)
            # Switch j of level l joins the hosts whose other digits spell j.
            rest = list(digits(j, n, k - 1))
            for d in range(n):
                ds = tuple(rest[:level] + [d] + rest[level:])
                host = hosts[undigits(ds, n)]
                links.append(Link(host.name, level, sw.name, d + 1, level))
    return Topology("bcube", (n, k), hosts, tuple(switches), tuple(links))


def fat_tree(k: int) -> Topology:
    """The 3-layer Fat-Tree of k-port switches: k^3/4 hosts, 5k^2/4 switches."""
    if k < 4 or k % 2:
        raise TopologyError(f"fattree k={k} is invalid: k (switch ports) must be even and >= 4")
    half = k // 2
    _check_hosts(k ** 3 // 4, f"fattree:{k}")
    hosts, switches, links = [], [], []
    cores = [make_switch(f"c{j}", "core", 2, j) for j in range(half * half)]
    for pod in range(k):
        aggs = [make_switch(f"a{pod}_{j}", "aggregation", 1, pod * half + j) for j in range(half)]
        edges = [make_switch(f"e{pod}_{j}", "edge", 0, pod * half + j) for j in range(half)]
        for e, edge in enumerate(edges):
            for slot in range(half):
                host = make_host(len(hosts), (pod, e, slot), (0,))
                hosts.append(host)
                links.append(Link(host.name, 0, edge.name, slot + 1, 0))
            for a, agg in enumerate(aggs):
                links.append(Link(edge.name, half + a + 1, agg.name, e + 1, 1))
        for a, agg in enumerate(aggs):
            for c in range(half):
                core = cores[a * half + c]
                links.append(Link(agg.name, half + c + 1, core.name, pod + 1, 2))
        switches += edges + aggs
    switches += cores
    return Topology("fattree", (k,), tuple(hosts), tuple(switches), tuple(links))


def star(count: int) -> Topology:
    """`count` hosts on one non-blocking switch."""
    if count < 2:
        raise TopologyError(f"star N={count} is invalid: N (hosts) must be >= 2")
    _check_hosts(count, f"star:{count}")
    sw = make_switch("s0", "star", 0, 0)
    hosts = tuple(make_host(i, (i,), (0,)) for i in range(count))
    links = tuple(Link(h.name, 0, sw.name, i + 1, 0) for i, h in enumerate(hosts))
    return Topology("star", (count,), hosts, (sw,), links)


def tree(fanouts: Tuple[int, ...]) -> Topology:
    """Hierarchical tree: F0 hosts per level-0 switch, F1 level-0 switches per level-1 switch..."""
    fanouts = tuple(fanouts)
    if not fanouts:
        raise TopologyError("tree fanouts are empty: give one or more fanouts >= 1, e.g. tree:3,2,2")
    if any(f < 1 for f in fanouts):
        raise TopologyError(f"tree fanouts {list(fanouts)} are invalid: every fanout must be >= 1")
    total = math.prod(fanouts)
    if total < 2:
        raise TopologyError(f"tree fanouts {list(fanouts)} give {total} host: the product must be >= 2")
    _check_hosts(total, f"tree:{','.join(map(str, fanouts))}")
    m = len(fanouts)
    # counts[l] = number of level-l switches
    counts = [math.prod(fanouts[level + 1:]) for level in range(m)]
    switches = [[make_switch(f"t{level}_{j}", "tree", level, j) for j in range(counts[level])]
                for level in range(m)]
    hosts, links = [], []
    for j, sw in enumerate(switches[0]):
        for slot in range(fanouts[0]):
            path, above = [], j
            for level in range(m):
                path.append(above)
                if level + 1 < m:
                    above //= fanouts[level + 1]
            host = make_host(len(hosts), tuple(reversed(path)) + (slot,), (0,))
            hosts.append(host)
            links.append(Link(host.name, 0, sw.name, slot + 1, 0))
    for level in range(1, m):
        for j, sw in enumerate(switches[level]):
            for c in range(fanouts[level]):
                child = switches[level - 1][j * fanouts[level] + c]
                # The uplink of a level-(l-1) switch is its last port.
                links.append(Link(child.name, fanouts[level - 1] + 1, sw.name, c + 1, level))
    flat = tuple(s for row in switches for s in row)
    return Topology("tree", fanouts, tuple(hosts), flat, tuple(links))


def leaf_spine(leaves: int, per_leaf: int, spines: int) -> Topology:
    """`leaves` leaf switches of `per_leaf` hosts each, every leaf linked once to each of `spines` spine switches
    (level 0: host links; level 1: leaf-spine links, whose rate sets the oversubscription)."""
    if leaves < 1 or per_leaf < 1 or spines < 1:
        raise TopologyError(f"leafspine:{leaves},{per_leaf},{spines} is invalid: leaves, hosts per leaf and spines "
                            f"must each be >= 1")
    if leaves * per_leaf < 2:
        raise TopologyError(f"leafspine:{leaves},{per_leaf},{spines} has 1 host: leaves x hosts per leaf must be >= 2")
    _check_hosts(leaves * per_leaf, f"leafspine:{leaves},{per_leaf},{spines}")
    leaf_switches = [make_switch(f"l{j}", "leaf", 0, j) for j in range(leaves)]
    spine_switches = [make_switch(f"sp{j}", "spine", 1, j) for j in range(spines)]
    hosts, links = [], []
    for j, leaf in enumerate(leaf_switches):
        for slot in range(per_leaf):
            host = make_host(len(hosts), (j, slot), (0,))
            hosts.append(host)
            links.append(Link(host.name, 0, leaf.name, slot + 1, 0))
        for s, spine in enumerate(spine_switches):
            links.append(Link(leaf.name, per_leaf + s + 1, spine.name, j + 1, 1))
    return Topology("leafspine", (leaves, per_leaf, spines), tuple(hosts),
                    tuple(leaf_switches + spine_switches), tuple(links))


def torus(rows: int, cols: int, per_switch: int = 1) -> Topology:
    """A 2-D torus of rows x cols switches, each linked to its four neighbours (wrapping around), with `per_switch`
    hosts each (level 0: host links; level 1: switch links); hosts are numbered row by row."""
    if rows < 3 or cols < 3 or per_switch < 1:
        raise TopologyError(f"torus:{rows},{cols},{per_switch} is invalid: rows and columns must be >= 3 (a ring of "
                            f"2 would link two switches twice) and hosts per switch >= 1")
    _check_hosts(rows * cols * per_switch, f"torus:{rows},{cols},{per_switch}")
    switches = [make_switch(f"r{r}c{c}", "torus", 0, r * cols + c) for r in range(rows) for c in range(cols)]
    hosts, links = [], []
    ports = {s.name: 0 for s in switches}

    def port(name: str) -> int:
        ports[name] += 1
        return ports[name]
    for sw in switches:
        r, c = divmod(sw.index, cols)
        for slot in range(per_switch):
            host = make_host(len(hosts), (r, c, slot), (0,))
            hosts.append(host)
            links.append(Link(host.name, 0, sw.name, port(sw.name), 0))
    for sw in switches:
        r, c = divmod(sw.index, cols)
        for other in (switches[r * cols + (c + 1) % cols], switches[((r + 1) % rows) * cols + c]):
            links.append(Link(sw.name, port(sw.name), other.name, port(other.name), 1))
    return Topology("torus", (rows, cols, per_switch), tuple(hosts), tuple(switches), tuple(links), graph=True)


def random_regular_pairs(count: int, degree: int, seed: int, attempts: int = 1000) -> List[Tuple[int, int]]:
    """The edges of a connected random `degree`-regular graph on `count` nodes (no loops, no parallel edges): the
    pairing model, drawn again until it is simple and connected, seeded."""
    import random
    rng = random.Random(seed)
    for _ in range(attempts):
        stubs = [n for n in range(count) for _ in range(degree)]
        rng.shuffle(stubs)
        edges = {tuple(sorted(stubs[i:i + 2])) for i in range(0, len(stubs), 2)}
        if len(edges) * 2 != len(stubs) or any(a == b for a, b in edges):
            continue
        neighbours: Dict[int, List[int]] = {}
        for a, b in edges:
            neighbours.setdefault(a, []).append(b)
            neighbours.setdefault(b, []).append(a)
        reached, frontier = {0}, [0]
        while frontier:
            for y in neighbours.get(frontier.pop(), ()):
                if y not in reached:
                    reached.add(y)
                    frontier.append(y)
        if len(reached) == count:
            return sorted(edges)
    raise TopologyError(f"no connected simple {degree}-regular graph on {count} switches in {attempts} draws: "
                        f"give more switches or another degree")


def jellyfish(switches: int, degree: int, per_switch: int, seed: int = 1) -> Topology:
    """Jellyfish (Singla et al., NSDI'12): `switches` switches in a random `degree`-regular graph (seeded), with
    `per_switch` hosts each (level 0: host links; level 1: switch links)."""
    spec = f"jellyfish:{switches},{degree},{per_switch},{seed}"
    if switches < 3 or not 2 <= degree < switches or per_switch < 1 or (switches * degree) % 2:
        raise TopologyError(f"{spec} is invalid: give switches >= 3, degree 2..switches-1 with switches x degree "
                            f"even, hosts per switch >= 1")
    _check_hosts(switches * per_switch, spec)
    nodes = [make_switch(f"j{i}", "jellyfish", 0, i) for i in range(switches)]
    hosts, links = [], []
    for sw in nodes:
        for slot in range(per_switch):
            host = make_host(len(hosts), (sw.index, slot), (0,))
            hosts.append(host)
            links.append(Link(host.name, 0, sw.name, slot + 1, 0))
    used = {sw.name: per_switch for sw in nodes}
    for a, b in random_regular_pairs(switches, degree, seed):
        used[nodes[a].name] += 1
        used[nodes[b].name] += 1
        links.append(Link(nodes[a].name, used[nodes[a].name], nodes[b].name, used[nodes[b].name], 1))
    return Topology("jellyfish", (switches, degree, per_switch, seed), tuple(hosts), tuple(nodes), tuple(links),
                    graph=True)


def rail(servers: int, rails: int, spines: int = 0) -> Topology:
    """Rail-optimized, as GPU clusters are wired: `servers` hosts with `rails` NICs each, NIC r of every host on rail
    switch r (level r: rail r's host links), and with `spines` every rail switch linked once to each spine (level
    `rails`); a host reaches another's NIC r over rail r in one switch hop, the spines only around a failure."""
    spec = f"rail:{servers},{rails},{spines}"
    if servers < 2 or rails < 1 or spines < 0:
        raise TopologyError(f"{spec} is invalid: give hosts >= 2, rails (NICs per host) >= 1 and spines >= 0")
    if rails > 8:
        raise TopologyError(f"{spec} has {rails} rails: at most 8 NICs per host are supported")
    _check_hosts(servers, spec)
    rail_switches = [make_switch(f"rail{r}", "rail", 0, r) for r in range(rails)]
    spine_switches = [make_switch(f"sp{j}", "spine", 1, j) for j in range(spines)]
    hosts = [make_host(i, (i,), tuple(range(rails))) for i in range(servers)]
    links = [Link(h.name, r, sw.name, h.index + 1, r) for r, sw in enumerate(rail_switches) for h in hosts]
    links += [Link(sw.name, servers + j + 1, spine.name, r + 1, rails)
              for r, sw in enumerate(rail_switches) for j, spine in enumerate(spine_switches)]
    return Topology("rail", (servers, rails, spines), tuple(hosts), tuple(rail_switches + spine_switches),
                    tuple(links), graph=True)


BUILDERS = {
    "bcube": (bcube, "bcube:n,k (e.g. bcube:3,2)", 2),
    "fattree": (fat_tree, "fattree:k (e.g. fattree:4)", 1),
    "star": (star, "star:N (e.g. star:9)", 1),
    "tree": (lambda *f: tree(tuple(f)), "tree:F0,F1,... (e.g. tree:3,2,2)", None),
    "leafspine": (leaf_spine, "leafspine:leaves,hosts_per_leaf,spines (e.g. leafspine:4,4,2)", 3),
    "torus": (torus, "torus:rows,cols[,hosts_per_switch] (e.g. torus:4,4)", (2, 3)),
    "jellyfish": (jellyfish, "jellyfish:switches,degree,hosts_per_switch[,seed] (e.g. jellyfish:8,3,2)", (3, 4)),
    "rail": (rail, "rail:hosts,rails[,spines] (e.g. rail:8,2,1)", (2, 3)),
}


TOPOLOGY_HELP = ("bcube:n,k | fattree:k | star:N | tree:F0,F1,... | leafspine:leaves,hosts_per_leaf,spines | "
                 "torus:rows,cols[,hosts_per_switch] | jellyfish:switches,degree,hosts_per_switch[,seed] | "
                 "rail:hosts,rails[,spines] | "
                 "FILE.json/.yaml (dmlbed topo SPEC --export FILE writes one) | "
                 "mininet:FILE.py:NAME[,ARGS] (a Mininet Topo, as mn --custom takes it)")


def parse(spec: str) -> Topology:
    """Build a topology from a spec string such as 'bcube:3,2', 'fattree:4', 'star:9', 'tree:3,2,2',
    'leafspine:4,4,2', or read it from a topology file (JSON or YAML, see topology_file)."""
    from emulation.core.topology_file import is_topology_file, read_topology
    from emulation.core.topology_mininet import is_mininet_spec, read_mininet
    if is_mininet_spec(spec):
        return read_mininet(spec)
    if is_topology_file(spec):
        return read_topology(spec)
    kind, _, rest = spec.strip().partition(":")
    kind = kind.lower()
    if kind not in BUILDERS:
        valid = ", ".join(usage for _, usage, _ in BUILDERS.values())
        raise TopologyError(f"unknown topology '{kind}': valid are {valid}, a topology file (.json, .yaml) or "
                           f"mininet:FILE.py:NAME[,ARGS] (a Mininet Topo, as mn --custom takes it)")
    builder, usage, arity = BUILDERS[kind]
    try:
        params = [int(p) for p in rest.split(",")] if rest.strip() else []
    except ValueError:
        raise TopologyError(f"topology '{spec}' has a non-integer parameter: use {usage}") from None
    counts = arity if isinstance(arity, tuple) else (arity,)
    if arity is not None and len(params) not in counts:
        raise TopologyError(f"topology '{spec}' needs {' or '.join(map(str, counts))} parameter(s): use {usage}")
    return builder(*params)


MAX_BW_MBPS = 1000.0
# The smallest rate the shaper honours here, measured with `dmlbed net star:2 --bw R --check`: fidelity 0.98 at 2
# Mbit/s, 0.44 at 1 (one flow at 0.44 of its rate), 0.64 at 0.1, nothing through at 0.01; below 1e-6 Mbit/s tc is
# handed a rate of 0 and the link is not shaped at all.
MIN_BW_MBPS = 2.0
MODEL_MAX_BW_MBPS = 1.6e6  # the closed forms and the flow model shape nothing: up to 1.6 Tbit/s (data centers: 10-400)


def parse_per_level(text: str, topo: Topology, what: str, unit: str, high: float, low_open: bool = False,
                    range_error: str = None, low: float = 0.0, units: Dict[str, float] = None) -> Tuple[float, ...]:
    """One value per link level from 'V' (every level) or 'V0,V1,...' (one per level), each in [low, high] (or
    (low, high] when low_open) of the base unit, each a number or one with a unit of `units` as tc and Mininet
    users write them; `what` names the option in errors, `range_error` overrides the range message."""
    units = units or {"": 1.0}
    interval = f"{'(' if low_open and not low else '['}{low:g}, {high:g}]"
    suffixes = ", ".join(u for u in units if u)
    try:
        values = [parse_value(v, units) for v in str(text).split(",")]
    except ValueError:
        raise TopologyError(f"{what} '{text}' is not a number{' with a unit' if suffixes else ''}: give {unit} in "
                            f"{interval}{' (or with a unit: ' + suffixes + ')' if suffixes else ''}, one value or "
                            f"one per level") from None
    if len(values) not in (1, topo.levels):
        raise TopologyError(f"{what} '{text}' has {len(values)} values: {topo.spec} needs 1 or "
                            f"{topo.levels} (one per link level)")
    for v in values:
        if not math.isfinite(v) or not (low < v if low_open and not low else low <= v) or v > high:
            raise TopologyError(f"{what} {v:g} {unit} is out of range: {range_error or 'give ' + unit + ' in'} "
                                f"{interval} {unit}")
    return tuple(values * topo.levels if len(values) == 1 else values)


def parse_bandwidth(text: str, topo: Topology, emulated: bool = True) -> Tuple[float, ...]:
    """Per-link-level bandwidths in Mbit/s from '100' (all levels) or '1000,100,200' (one per level): the rates the
    shaper honours when emulated, any rate above 0 up to 1.6 Tbit/s for the models (theory, simulate)."""
    if not emulated:
        return parse_per_level(text, topo, "bandwidth", "Mbit/s", MODEL_MAX_BW_MBPS, low_open=True, units=RATE_UNITS,
                               range_error="the models take any rate above 0 up to 1.6 Tbit/s: give a value in")
    return parse_per_level(text, topo, "bandwidth", "Mbit/s", MAX_BW_MBPS, low=MIN_BW_MBPS, units=RATE_UNITS,
                           range_error=f"the shaper honours rates from {MIN_BW_MBPS:g} Mbit/s (measured) up to "
                                       f"{MAX_BW_MBPS:g}: give a value in")
