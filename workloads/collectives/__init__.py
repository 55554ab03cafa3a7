"""The registry of collective operations: name -> Collective (see base.py). All-reduce's plans are the
synchronization algorithms (workloads.algorithms); every other op's are its own. Adding one: a module in this
folder defining a Collective, and an entry in REGISTERED."""

from typing import Dict

from workloads.collectives.allgather import ALLGATHER
from workloads.collectives.allreduce_op import ALLREDUCE_OP
from workloads.collectives.alltoall import ALLTOALL
from workloads.collectives.alltoallv import ALLTOALLV
from workloads.collectives.base import Collective
from workloads.collectives.broadcast import BROADCAST
from workloads.collectives.gather import GATHER
from workloads.collectives.reduce import REDUCE_OP
from workloads.collectives.reducescatter import REDUCESCATTER
from workloads.collectives.scatter import SCATTER
from workloads.plan import PlanError

ALLREDUCE = ALLREDUCE_OP.name  # the algorithm registry's op: bench's default
REGISTERED = (ALLREDUCE_OP, ALLGATHER, REDUCESCATTER, BROADCAST, REDUCE_OP, ALLTOALL, ALLTOALLV, GATHER, SCATTER)
COLLECTIVES: Dict[str, Collective] = {c.name: c for c in REGISTERED}
OPS = tuple(COLLECTIVES)


def get(name: str) -> Collective:
    """The collective called name, or PlanError listing the valid ones."""
    if name not in COLLECTIVES:
        raise PlanError(f"unknown collective '{name}': valid are {', '.join(OPS)}")
    return COLLECTIVES[name]
