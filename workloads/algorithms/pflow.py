"""Parameter Flow's descriptor: push/broadcast through dedicated servers, DVF filter, TSB tree (plans and
filters in workloads/pflow.py)."""

from emulation.spec.theory import Theory, host_tf
from workloads.algorithms.base import ALL_TOPOLOGIES, REQUIRED_SERVERS, Algorithm


def theory(topo, gradient_bytes, bw, servers: int) -> Theory:
    """Push to and broadcast from M servers, before DVF shrinks the bytes: 2W/M * TF."""
    tf = host_tf(gradient_bytes, bw)
    return Theory(2 * (len(topo.hosts) - servers) / servers * tf, "2W/M * TF (no filter, no tree)", tf)


def check_options(topo, servers: int, options) -> None:
    """The broadcast tree T,H must reach every worker."""
    from workloads.pflow import overlay_for
    overlay_for(options.get("pf_tree", "none"), topo, servers)


PFLOW = Algorithm(
    name="pflow", summary="Parameter Flow: push updates, servers broadcast them (DVF filter, TSB tree, BSP/SSP)",
    paper="Parameter Flow (2019)", topologies=ALL_TOPOLOGIES, theory=theory,
    strategy="workloads.strategies.pflow:ParameterFlow", servers=REQUIRED_SERVERS, default_servers=1,
    options=("staleness", "pf_tree", "pf_dvf", "pf_blocks"), check_options=check_options)
