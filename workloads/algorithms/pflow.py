"""Parameter Flow: its descriptor and options, the dynamic value-bounded filter (DVF), the tree-based streaming
broadcast (TSB) overlay built from the paper's binary program P3 (scipy MILP) or greedily, and the push/broadcast
plans (pure; its ranks run workloads/strategies/pflow.py)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from emulation.core.formulas import Theory, dedicated_servers_time, host_tf
from emulation.core.topology import Topology
from emulation.core.topology import parse as parse_topology
from workloads.algorithms.base import ALL_TOPOLOGIES, REQUIRED_SERVERS, Algorithm, check_servers
from workloads.option_fields import option
from workloads.plan import COPY, REDUCE, Plan, PlanError, Transfer, piece_sizes

MILP_MAX_WORKERS = 8
MILP_SECONDS = 5.0  # star:9, T,H = 5,3: the tree found by 3 s is the one proved optimal after 18 s
LEAF_PENALTY = 0.05  # alpha of eq. 12: fewer leaves -> a balanced tree
DVF_MIN_MBPS = 50.0  # measured push bandwidth from which DVF uses its lower threshold


class DVF:
    """Drop |u| <= delta/sqrt(t); what is dropped stays in a residual added to the next update."""

    def __init__(self, size: int, delta_low: float, delta_up: float, min_mbps: float = DVF_MIN_MBPS):
        self.residual = np.zeros(size, np.float32)
        self.delta_low, self.delta_up, self.min_mbps = delta_low, delta_up, min_mbps

    def threshold(self, clock: int, measured_mbps: Optional[float]) -> float:
        """delta_t: delta_low when the measured bandwidth is sufficient, else delta_up, over sqrt(t)."""
        base = self.delta_low if measured_mbps is None or measured_mbps >= self.min_mbps else self.delta_up
        return base / math.sqrt(max(1, clock))

    def filter(self, update: np.ndarray, delta: float) -> Tuple[np.ndarray, float]:
        """(what to send, fraction dropped): update + residual split at delta; the rest becomes residual."""
        total = update + self.residual
        keep = np.abs(total) > delta
        sent = np.where(keep, total, np.float32(0)).astype(np.float32)
        self.residual = (total - sent).astype(np.float32)
        return sent, 1.0 - float(keep.mean()) if total.size else 0.0


def overlay_costs(topo: Topology, nodes: Sequence[int]) -> np.ndarray:
    """c_ij of section 3.4.1: 0.1 under one edge switch, 0.5 under one aggregation level, 1.0 otherwise
    (BCube: 0.1 between 1-hop neighbours). nodes are host ranks; the first one is the server."""
    hosts = [topo.hosts[r] for r in nodes]
    n = len(hosts)
    c = np.ones((n, n))
    for i in range(n):
        for j in range(n):
            a, b = hosts[i].coords, hosts[j].coords
            if topo.kind == "bcube":
                c[i, j] = 0.1 if sum(x != y for x, y in zip(a, b)) <= 1 else 1.0
            elif topo.kind == "star":
                c[i, j] = 0.1
            elif topo.kind == "fattree":  # coords (pod, edge, slot)
                c[i, j] = 0.1 if a[:2] == b[:2] else 0.5 if a[0] == b[0] else 1.0
            else:  # tree coords: switch indices from the root down, then the slot
                c[i, j] = 0.1 if a[:-1] == b[:-1] else 0.5 if a[:-2] == b[:-2] else 1.0
    return c


@dataclass(frozen=True)
class Overlay:
    """parent[j] for every overlay node j (node 0 is the server/root, parent -1); how it was built."""

    parent: Tuple[int, ...]
    method: str
    cost: float

    def children(self, i: int) -> List[int]:
        """Direct children of node i."""
        return [j for j, p in enumerate(self.parent) if p == i]

    def depth(self, j: int) -> int:
        """Hops from the root to node j."""
        d = 0
        while self.parent[j] != -1:
            j = self.parent[j]
            d += 1
        return d


def tree_cost(parent: Sequence[int], costs: np.ndarray) -> float:
    """Sum of the costs of the overlay's edges."""
    return float(sum(costs[p, j] for j, p in enumerate(parent) if p >= 0))


def check_feasible(n_workers: int, degree: int, depth: int) -> None:
    """A tree of max degree T and depth H holds at most T + T^2 + ... + T^H workers."""
    if degree < 1 or depth < 1:
        raise PlanError(f"tree degree {degree} and depth {depth} must both be >= 1")
    capacity = sum(degree ** d for d in range(1, depth + 1))
    if capacity < n_workers:
        raise PlanError(f"a tree of degree {degree} and depth {depth} reaches {capacity} workers, "
                        f"fewer than {n_workers}: raise T or H")


def greedy_overlay(costs: np.ndarray, degree: int, depth: int) -> Overlay:
    """Level by level from the root, every node adopts up to T of the cheapest unattached workers, keeping
    enough room for the rest within depth H."""
    n = len(costs)
    check_feasible(n - 1, degree, depth)
    parent = [-1] * n
    frontier, left = [0], set(range(1, n))
    for _level in range(depth):
        nxt = []
        for p in frontier:  # filling every level keeps the tree as shallow as possible
            if not left:
                break
            picks = sorted(left, key=lambda j: (costs[p, j], j))[:degree]
            for j in picks:
                parent[j] = p
                left.discard(j)
                nxt.append(j)
        frontier = nxt
        if not left:
            break
    if left:
        raise PlanError("greedy overlay could not attach every worker")
    return Overlay(tuple(parent), "greedy", tree_cost(parent, costs))


class P3Index:
    """P3's variables as one vector: l_ij, then t_i, then h^k_ij, then the depth labels d_j (node 0 = server)."""

    def __init__(self, n: int):
        self.n = n
        self.t0, self.h0 = n * n, n * n + n
        self.d0 = self.h0 + n ** 3
        self.count = self.d0 + n

    def L(self, i: int, j: int) -> int:
        return i * self.n + j

    def T(self, i: int) -> int:
        return self.t0 + i

    def H(self, i: int, j: int, k: int) -> int:
        return self.h0 + (i * self.n + j) * self.n + k

    def D(self, j: int) -> int:
        return self.d0 + j


def p3_constraints(ix: P3Index, degree: int, depth: int):
    """P3's constraints (eq. 13-17, 20) and the depth labels (MTZ: d_j >= d_i + 1 when i -> j) as rows, lows, highs."""
    n, rows, lo, hi = ix.n, [], [], []

    def add(coeffs: Dict[int, float], low: float, high: float):
        row = np.zeros(ix.count)
        for k, v in coeffs.items():
            row[k] += v
        rows.append(row)
        lo.append(low)
        hi.append(high)

    for j in range(1, n):  # eq. 13: one parent each
        add({ix.L(i, j): 1 for i in range(n)}, 1, 1)
    for i in range(n):
        add({ix.L(i, j): 1 for j in range(n)}, -np.inf, degree)  # eq. 14
        add({**{ix.L(i, j): 1 for j in range(n)}, ix.T(i): 1}, 1, np.inf)  # eq. 15
    for k in range(1, n):
        add({ix.H(i, j, k): 1 for i in range(n) for j in range(n)}, -np.inf, depth)  # eq. 16
    for i in range(n):
        for j in range(n):
            add({ix.H(i, j, j): 1, ix.L(i, j): -1}, 0, 0)  # eq. 20
    for k in range(n):
        for k2 in range(1, n):
            if k == k2:
                continue
            for i in range(n):
                for j in range(n):
                    if i != k and j != k2:  # eq. 17
                        add({ix.H(i, j, k): 1, ix.H(i, j, k2): -1, ix.L(k, k2): 2}, -np.inf, 2)
    for i in range(n):  # depth labels: no cycles detached from the root
        for j in range(1, n):
            if i != j:
                add({ix.D(j): 1, ix.D(i): -1, ix.L(i, j): -(depth + 1)}, 1 - (depth + 1), np.inf)
    return np.array(rows), lo, hi


def milp_overlay(costs: np.ndarray, degree: int, depth: int, time_limit: float = MILP_SECONDS) -> Overlay:
    """P3 (eq. 12-20) with scipy's MILP solver: l_ij (i sends to j), t_i (leaf), h^k_ij (edge i->j on the
    path to k); plus depth labels that rule out cycles detached from the root (MTZ). Method 'milp' when proved
    optimal, 'milp-incumbent' when the time limit ended the search."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    n = len(costs)  # node 0 = server
    check_feasible(n - 1, degree, depth)
    ix = P3Index(n)
    c = np.zeros(ix.count)
    for i in range(n):
        for j in range(1, n):
            c[ix.L(i, j)] = costs[i, j]
        c[ix.T(i)] = LEAF_PENALTY
    lb, ub = np.zeros(ix.count), np.ones(ix.count)
    for j in range(n):
        lb[ix.D(j)], ub[ix.D(j)] = (0, 0) if j == 0 else (1, depth)
    for i in range(n):
        ub[ix.L(i, 0)] = 0  # eq. 18: nobody sends to the server
        ub[ix.L(i, i)] = 0  # eq. 19
    rows, lo, hi = p3_constraints(ix, degree, depth)
    res = milp(c, constraints=LinearConstraint(rows, lo, hi), integrality=np.ones(ix.count),
               bounds=Bounds(lb, ub), options={"time_limit": time_limit})
    if res.x is None:
        raise PlanError(f"P3 found no tree of degree {degree} and depth {depth}: {res.message}")
    x = np.round(res.x).astype(int)
    parent = [-1] + [next(i for i in range(n) if x[ix.L(i, j)]) for j in range(1, n)]
    return Overlay(tuple(parent), "milp" if res.status == 0 else "milp-incumbent", tree_cost(parent, costs))


def build_overlay(costs: np.ndarray, degree: int, depth: int) -> Overlay:
    """P3 by MILP when the group is small, else the greedy construction; the greedy tree also when the solver's
    time ran out on a tree that costs more (or on none)."""
    if len(costs) - 1 > MILP_MAX_WORKERS:
        return greedy_overlay(costs, degree, depth)
    try:
        exact = milp_overlay(costs, degree, depth)
    except PlanError:
        return greedy_overlay(costs, degree, depth)
    if exact.method == "milp":
        return exact
    greedy = greedy_overlay(costs, degree, depth)
    return exact if exact.cost <= greedy.cost else greedy


def direct_overlay(n_workers: int) -> Overlay:
    """No tree: the server sends to every worker itself."""
    return Overlay(tuple([-1] + [0] * n_workers), "direct", 0.0)


def parse_tree(text) -> Optional[Tuple[int, int]]:
    """--pf-tree: 'none' or 'T,H' (maximum degree, maximum depth)."""
    if text in (None, "", "none"):
        return None
    try:
        degree, depth = (int(v) for v in str(text).split(","))
    except ValueError:
        raise ValueError(f"--pf-tree {text} is invalid: give none or T,H (max degree, max depth)") from None
    return degree, depth


def parse_dvf(text) -> Optional[Tuple[float, float]]:
    """--pf-dvf: 'none' or 'LOW,UP' thresholds with 0 <= LOW <= UP."""
    if text in (None, "", "none"):
        return None
    try:
        low, up = (float(v) for v in str(text).split(","))
    except ValueError:
        raise ValueError(f"--pf-dvf {text} is invalid: give none or LOW,UP thresholds") from None
    if not (math.isfinite(low) and math.isfinite(up) and 0 <= low <= up):
        raise ValueError(f"--pf-dvf {text} is invalid: need finite 0 <= LOW <= UP")
    return low, up


def overlay_for(tree_text, topo: Topology, servers: int) -> "Overlay":
    """The broadcast overlay (P3 or greedy, or direct when 'none'); the solver's answer can depend on its time
    limit, so a run computes it once and gives it to every rank (shared)."""
    return _overlay_for(tree_text, topo.spec, servers)


@functools.lru_cache(maxsize=32)
def _overlay_for(tree_text, spec: str, servers: int) -> "Overlay":
    """overlay_for by topology spec, solved once per process."""
    topo = parse_topology(spec)
    workers = list(range(servers, len(topo.hosts)))
    tree = parse_tree(tree_text)
    if tree is None:
        return direct_overlay(len(workers))
    return build_overlay(overlay_costs(topo, [0] + workers), *tree)


def overlay_from(shared: Dict[str, object], tree_text, topo: Topology, servers: int) -> "Overlay":
    """The overlay the runner computed for every rank (shared), or this rank's own when it was given none."""
    if "overlay" in shared:
        return Overlay(tuple(shared["overlay"]), str(shared["overlay_method"]), float(shared["overlay_cost"]))
    return overlay_for(tree_text, topo, servers)


def push_plan(ranks: int, servers: int, blocks: int) -> Plan:
    """Workers push their (filtered) updates: block b of server m's segment goes to server m, summed."""
    check_servers(servers, ranks)
    step = tuple(Transfer(w, m, m * blocks + b, REDUCE)
                 for w in range(servers, ranks) for m in range(servers) for b in range(blocks))
    return Plan("pflow-push", ranks, servers * blocks, ((step,),), tuple(range(servers, ranks)))


def broadcast_plan(ranks: int, servers: int, blocks: int, overlay: Overlay) -> Plan:
    """Streaming broadcast down the overlay: in step s a node at depth d relays block s-d, so blocks
    flow down the tree in a pipeline. Overlay node 0 stands for every server (each sends its segment)."""
    workers = list(range(servers, ranks))
    rank_of = lambda node: workers[node - 1]  # noqa: E731
    depth = {j: overlay.depth(j) for j in range(len(overlay.parent))}
    height = max(depth.values())
    steps = []
    for s in range(blocks + height - 1):
        step = []
        for child, parent in enumerate(overlay.parent):
            if parent < 0:
                continue
            b = s - depth[parent]
            if not 0 <= b < blocks:
                continue
            for m in range(servers):
                src = m if parent == 0 else rank_of(parent)
                step.append(Transfer(src, rank_of(child), m * blocks + b, COPY))
        steps.append(tuple(step))
    return Plan("pflow-broadcast", ranks, servers * blocks, (tuple(steps),), tuple(workers),
                {"overlay": list(overlay.parent), "method": overlay.method})


@dataclass(frozen=True)
class PFlowOptions:
    """Parameter Flow's run options (flags --staleness, --pf-tree, --pf-dvf, --pf-blocks)."""

    staleness: int = option(0, "pflow: 0 = BSP, s > 0 = SSP with bound s", low=0, high=100, shapes_plan=True)
    pf_tree: str = option("5,3", "pflow: broadcast tree T,H (max degree, depth) or none", parse=parse_tree,
                          shapes_plan=True)
    pf_dvf: str = option("1e-5,2e-5", "pflow: DVF thresholds LOW,UP or none", parse=parse_dvf, shapes_plan=True)
    pf_blocks: int = option(8, "pflow: blocks streamed down the tree", low=1, high=1024, shapes_plan=True)


def theory(topo, gradient_bytes, bw, servers: int, pf_tree: str = "5,3", pf_dvf: str = "1e-5,2e-5", **_) -> Theory:
    """Push to M servers, as long as its busiest cut needs, then the broadcast before DVF shrinks the bytes: as
    long as a push without a tree; down a tree, as long as its busiest sender's link needs (a server sends its
    G/M to each of its children, a relaying worker all of G to each of its own; the blocks stream)."""
    tf = host_tf(gradient_bytes, bw)
    push = dedicated_servers_time(topo, gradient_bytes, bw, servers)
    filtered = parse_dvf(pf_dvf) is not None  # DVF drops a share the updates decide: no closed form has it
    if parse_tree(pf_tree) is None:
        return Theory(2 * push, "2 * busiest cut of a push (no filter, no tree)", tf, filtered=filtered)
    overlay = overlay_for(pf_tree, topo, servers)
    fanout = max(len(overlay.children(0)) / servers, max(len(overlay.children(j)) for j in
                                                        range(1, len(overlay.parent))))
    return Theory(push + fanout * tf, f"busiest cut of a push + {fanout:g} TF (the tree's busiest sender; no filter)",
                  tf, filtered=filtered)


def phases(topo: Topology, servers: int, options: PFlowOptions,
           sizes: Sequence[int]) -> Tuple[Tuple[Plan, List[int]], Tuple[Plan, List[int]]]:
    """One BSP synchronization as the flow model runs it: the push, then the streaming broadcast down the overlay.
    DVF's dropped share and SSP's timing depend on the run, so the model takes them off (PlanError)."""
    if parse_dvf(options.pf_dvf):
        raise PlanError("pflow's DVF filter drops a share that depends on the gradients: simulate --pf-dvf none "
                        "(an emulated run reports the dropped share)")
    if options.staleness:
        raise PlanError("the flow model runs BSP synchronizations: simulate pflow with --staleness 0")
    hosts, blocks = len(topo.hosts), options.pf_blocks
    pieces = piece_sizes([sum(sizes)], servers * blocks)  # its ranks lay the gradient out as one layer
    return ((push_plan(hosts, servers, blocks), pieces),
            (broadcast_plan(hosts, servers, blocks, overlay_for(options.pf_tree, topo, servers)), pieces))


def check_options(topo, servers: int, options: PFlowOptions) -> None:
    """The broadcast tree T,H must reach every worker (the tree itself is solved when the run starts)."""
    tree = parse_tree(options.pf_tree)
    if tree is not None:
        check_feasible(len(topo.hosts) - servers, *tree)


def shared(topo, servers: int, options: PFlowOptions) -> Dict[str, object]:
    """The broadcast overlay, solved once by the runner so that every rank streams down the same tree."""
    overlay = overlay_for(options.pf_tree, topo, servers)
    return {"overlay": list(overlay.parent), "overlay_method": overlay.method, "overlay_cost": overlay.cost}


PFLOW = Algorithm(
    name="pflow", summary="Parameter Flow: push updates, servers broadcast them (DVF filter, TSB tree, BSP/SSP)",
    paper="Parameter Flow (2019)", topologies=ALL_TOPOLOGIES, theory=theory,
    strategy="workloads.strategies.pflow:ParameterFlow", servers=REQUIRED_SERVERS, default_servers=1,
    options=PFlowOptions, check_options=check_options, worker_optimizer=False, phases=phases, shared=shared)
