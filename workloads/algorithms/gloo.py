"""torch.distributed's gloo all_reduce over the emulated network: an outside reference for dmlbed's engine."""

from emulation.core.formulas import Theory, all_reduce_bound, host_tf
from workloads.algorithms.base import ALL_TOPOLOGIES, Algorithm


def theory(topo, gradient_bytes, bw, servers: int) -> Theory:
    """gloo's ring all-reduce: 2(N-1)/N * TF."""
    tf = host_tf(gradient_bytes, bw)
    return Theory(all_reduce_bound(len(topo.hosts)) * tf, "2(N-1)/N * TF", tf)


GLOO = Algorithm(
    name="gloo", summary="torch.distributed all_reduce (gloo backend): an outside reference",
    paper="PyTorch gloo", topologies=ALL_TOPOLOGIES, theory=theory,
    strategy="workloads.strategies.gloo:GlooAllReduce", ddp_allreduce=True, uniform_links=True, host_subsets=True)
