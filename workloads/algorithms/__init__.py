"""Registry of synchronization algorithms: name -> builder(topology, servers) -> Plan."""

from typing import Dict

from emulation.topology import Topology
from workloads.algorithms.blueconnect import blueconnect, two_level
from workloads.algorithms.hierarchical import hierarchical
from workloads.algorithms.ps import dedicated_ps, p2p_ps
from workloads.algorithms.ring import ring
from workloads.plan import Plan, PlanError

ALL_TOPOLOGIES = ("bcube", "fattree", "star", "tree")


def topology_radices(topo: Topology):
    """The hierarchy digits of a topology's hosts, least significant first (hosts are numbered in this order)."""
    if topo.kind == "bcube":
        n, k = topo.params
        return [n] * k
    if topo.kind == "fattree":
        k = topo.params[0]
        return [k // 2, k // 2, k]  # slot on edge switch, edge switch in pod, pod
    if topo.kind == "tree":
        return [f for f in topo.params if f > 1] or [1]
    return [len(topo.hosts)]


def build_ps(topo: Topology, servers: int = 0) -> Plan:
    """ps: P2P parameter server, or dedicated servers with --servers M."""
    return dedicated_ps(len(topo.hosts), servers) if servers else p2p_ps(len(topo.hosts))


def build_ring(topo: Topology, servers: int = 0) -> Plan:
    """ring: ring all-reduce over the hosts in order."""
    return ring(len(topo.hosts))


def build_bml(topo: Topology, servers: int = 0) -> Plan:
    """bml: BML on BCube(n,k), k threads, k*N pieces, each thread's step w on level (t+w) mod k."""
    n, k = topo.params
    return hierarchical("bml", [n] * k, k, pin_levels=True)


def build_hier(topo: Topology, servers: int = 0) -> Plan:
    """hier: the same hierarchical synchronization with one thread (one NIC), grouped by the topology's levels."""
    return hierarchical("hier", topology_radices(topo), 1, pin_levels=False)


def build_blueconnect(topo: Topology, servers: int = 0) -> Plan:
    """blueconnect: reduce-scatter up the topology's levels, all-gather down (BCube: pinned to each level)."""
    return blueconnect(topology_radices(topo), pin_levels=topo.kind == "bcube")


def build_twolevel(topo: Topology, servers: int = 0) -> Plan:
    """twolevel: reduce to each level-0 group's master, ring among masters, broadcast back."""
    return two_level(topology_radices(topo))


ALGORITHMS: Dict[str, dict] = {
    "ps": {"build": build_ps, "topologies": ALL_TOPOLOGIES},
    "ring": {"build": build_ring, "topologies": ALL_TOPOLOGIES},
    "bml": {"build": build_bml, "topologies": ("bcube",)},
    "hier": {"build": build_hier, "topologies": ("fattree", "tree", "star")},
    "blueconnect": {"build": build_blueconnect, "topologies": ALL_TOPOLOGIES},
    "twolevel": {"build": build_twolevel, "topologies": ("tree", "fattree")},
    "gloo": {"build": None, "topologies": ALL_TOPOLOGIES},  # torch.distributed all_reduce, not a plan
    "ibatch": {"build": None, "topologies": ALL_TOPOLOGIES},  # PS pull schedule (workloads.pull_worker)
    "pflow": {"build": None, "topologies": ALL_TOPOLOGIES},  # push/broadcast + DVF + TSB (workloads.pflow_worker)
}


def valid_combinations() -> str:
    """One line listing which algorithm runs on which topologies."""
    return "; ".join(f"{name} on {'/'.join(spec['topologies'])}" for name, spec in ALGORITHMS.items())


def build_plan(algo: str, topo: Topology, servers: int = 0) -> Plan:
    """The plan of `algo` on `topo`, or PlanError naming the valid combinations."""
    if algo not in ALGORITHMS:
        raise PlanError(f"unknown algorithm '{algo}': valid are {', '.join(ALGORITHMS)}")
    spec = ALGORITHMS[algo]
    if topo.kind not in spec["topologies"]:
        raise PlanError(f"{algo} cannot run on {topo.spec}: valid combinations are {valid_combinations()}")
    if servers and algo != "ps":
        raise PlanError(f"--servers applies to ps only, not {algo}")
    if spec["build"] is None:
        raise PlanError(f"{algo} is not a single all-reduce plan (see workloads/worker.py)")
    return spec["build"](topo, servers)
