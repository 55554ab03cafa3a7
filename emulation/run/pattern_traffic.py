"""Traffic patterns on a running network: each pattern's flows at once from known client ports, their aggregate
beside the flow model's on the paths those ports hash to and beside a non-blocking switch's (Hedera's comparison)."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

import numpy as np

from emulation.core.link_rates import rate_of
from emulation.core.patterns import Pattern, client_ports, pairs
from emulation.core.topology import Topology
from emulation.net import checks
from emulation.simulation.fairshare import max_min_rates
from emulation.simulation.routes import Router

Hop = Tuple[str, str, int]


def fair_rates(paths: Sequence[Sequence[Hop]], bw: Tuple[float, ...],
               link_rates: Optional[Dict[Tuple[str, str], float]] = None) -> np.ndarray:
    """Max-min fair Mbit/s of flows on these paths (the flow model's steady state for long flows)."""
    links = sorted({hop for path in paths for hop in path})
    index = {link: i for i, link in enumerate(links)}
    flow_of = np.array([f for f, path in enumerate(paths) for _ in path], dtype=int)
    link_of = np.array([index[hop] for path in paths for hop in path], dtype=int)
    capacity = np.array([rate_of(a, b, lvl, bw, link_rates) for a, b, lvl in links], dtype=float)
    return max_min_rates(flow_of, link_of, capacity, len(paths))


def pattern_flows(topo: Topology, pattern: Pattern, seed: int, bw: Tuple[float, ...],
                  link_rates: Optional[Dict[Tuple[str, str], float]] = None,
                  used: Optional[Dict[str, Set[int]]] = None) -> Tuple[List[checks.Flow], List[int], List[float]]:
    """The pattern's flows, each with the flow model's rate on the path its client port hashes to, the client ports
    (none a sender in `used` had already; used is updated), and each flow's rate on a non-blocking switch (only the
    hosts' own links limit it)."""
    hosts = topo.hosts
    chosen = pairs(pattern, len(hosts), seed)
    ports = client_ports([hosts[a].name for a, _ in chosen], f"{pattern.shown()}:{seed}", used)
    # the flow model's router takes the path the controller's rules give each connection's ports (tests trace both)
    router = Router(topo, "hash", {(a, b, i): (ports[i], checks.IPERF_BASE_PORT + i) for i, (a, b) in enumerate(chosen)})
    paths = [[(x, y, router.level_of[(x, y)]) for x, y in router.path(a, b, 0, key=i)]
             for i, (a, b) in enumerate(chosen)]
    modelled = fair_rates(paths, bw, link_rates)
    edges = [[path[0], path[-1]] for path in paths]  # the sender's link up and the receiver's link down
    blocking_free = fair_rates(edges, bw, link_rates)
    flows = [checks.Flow(hosts[a].name, hosts[a].ip, hosts[b].name, hosts[b].ip, 0, round(float(rate), 3),
                         (hosts[a].name,) + tuple(hop[1] for hop in path))
             for (a, b), path, rate in zip(chosen, paths, modelled)]
    return flows, ports, [float(r) for r in blocking_free]


def run_patterns(enet, patterns: Sequence[Pattern], seeds: int, duration_s: float,
                 log: Callable[[str], None]) -> List[dict]:
    """Every pattern once per seed, its flows at once for duration_s: the measured aggregate (on the wire) against
    the flow model's on the same paths and against a non-blocking switch's."""
    topo, rows, used = enet.topo, [], {}
    for pattern in patterns:
        for seed in range(1, seeds + 1):
            flows, ports, ideal = pattern_flows(topo, pattern, seed, enet.bw, enet.link_rates, used)
            log(f"pattern {pattern.shown()} seed {seed}: {len(flows)} flows for {duration_s:g}s")
            measured = checks.run_fidelity(enet, flows, duration_s, client_ports=ports)
            wire = sum(float(r["wire_mbps"]) for r in measured)
            model = sum(f.shaped_mbps for f in flows)
            rows.append({"pattern": pattern.shown(), "seed": seed, "flows": len(flows),
                         "aggregate_mbps": round(wire, 3), "flow_model_mbps": round(model, 3),
                         "non_blocking_mbps": round(sum(ideal), 3),
                         "of_non_blocking": round(wire / sum(ideal), 4),
                         "flow_model_of_non_blocking": round(model / sum(ideal), 4),
                         "measured_over_flow_model": round(wire / model, 4) if model else None,
                         "errors": [r["error"] for r in measured if r.get("error")],
                         "per_flow": [{"src": r["src"], "dst": r["dst"], "client_port": p, "path": list(r["path"]),
                                       "flow_model_mbps": r["shaped_mbps"], "wire_mbps": r["wire_mbps"]}
                                      for r, p in zip(measured, ports)]})
    return rows


def model_patterns(topo: Topology, patterns: Sequence[Pattern], seeds: int, bw: Tuple[float, ...],
                   link_rates: Optional[Dict[Tuple[str, str], float]] = None) -> List[dict]:
    """Every pattern once per seed in the flow model alone, with the client ports `net --pattern` would draw in the
    same order (so the same paths): the aggregate against a non-blocking switch's (its closed form)."""
    rows, used = [], {}
    for pattern in patterns:
        for seed in range(1, seeds + 1):
            flows, ports, ideal = pattern_flows(topo, pattern, seed, bw, link_rates, used)
            model = sum(f.shaped_mbps for f in flows)
            rows.append({"pattern": pattern.shown(), "seed": seed, "flows": len(flows),
                         "flow_model_mbps": round(model, 3), "non_blocking_mbps": round(sum(ideal), 3),
                         "flow_model_of_non_blocking": round(model / sum(ideal), 4)})
    return rows


def summarize_patterns(rows: Sequence[dict]) -> Dict[str, dict]:
    """Per pattern over its seeds: the median share of a non-blocking switch measured and modelled, and the worst
    measured/flow-model ratio."""
    out: Dict[str, dict] = {}
    for name in dict.fromkeys(r["pattern"] for r in rows):
        mine = [r for r in rows if r["pattern"] == name]
        out[name] = {"seeds": len(mine), "flow_model_of_non_blocking_median":
                     float(np.median([r["flow_model_of_non_blocking"] for r in mine]))}
        if all("of_non_blocking" in r for r in mine):  # measured (net --pattern), not the flow model alone
            ratios = [r["measured_over_flow_model"] for r in mine if r["measured_over_flow_model"] is not None]
            out[name].update(of_non_blocking_median=float(np.median([r["of_non_blocking"] for r in mine])),
                             measured_over_flow_model_range=[min(ratios), max(ratios)] if ratios else None)
    return out
