"""The registry of synchronization algorithms: name -> Algorithm descriptor (see base.py).

Adding an algorithm: a module in this folder defining an Algorithm, and one entry in REGISTERED below.
"""

from typing import Callable, Dict, List

from emulation.core.topology import Topology
from workloads.algorithms import blueconnect, expert, gloo, hd, hierarchical, ibatch, pflow, ps, ring, sharded
from workloads.algorithms.base import Algorithm
from workloads.plan import Plan, PlanError

REGISTERED = (ps.PS, ring.RING, hierarchical.BML, hierarchical.HIER, blueconnect.BLUECONNECT,
              blueconnect.TWOLEVEL, hd.HD, gloo.GLOO, ibatch.IBATCH, pflow.PFLOW, sharded.SHARDED, expert.EXPERT)

ALGORITHMS: Dict[str, Algorithm] = {a.name: a for a in REGISTERED}


def get(name: str) -> Algorithm:
    """The descriptor called name, or PlanError listing the valid names."""
    if name not in ALGORITHMS:
        raise PlanError(f"unknown algorithm '{name}': valid are {', '.join(ALGORITHMS)}")
    return ALGORITHMS[name]


def names_with(predicate: Callable[[Algorithm], bool]) -> List[str]:
    """Names of the algorithms for which predicate holds."""
    return [a.name for a in ALGORITHMS.values() if predicate(a)]


def valid_combinations() -> str:
    """One line listing which algorithm runs on which topologies."""
    return "; ".join(f"{a.name} on {'/'.join(a.topologies)}" for a in ALGORITHMS.values())


def build_plan(name: str, topo: Topology, servers: int = 0) -> Plan:
    """The all-reduce plan of algorithm `name` on topo, after the algorithm's own checks."""
    algo = get(name)
    algo.check(topo, servers, {})
    return algo.build_plan(topo, servers)


def theory(name: str, topo: Topology, gradient_bytes: float, bw, servers: int = 0):
    """The closed-form GST (a Theory) of algorithm `name`."""
    return get(name).gst_theory(topo, gradient_bytes, bw, servers)
