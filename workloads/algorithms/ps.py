"""Parameter server: peer-to-peer (every worker serves 1/N, the BML paper's baseline) or dedicated servers."""

from emulation.core.formulas import Theory, all_reduce_bound, dedicated_servers_time, host_tf
from workloads.algorithms.base import ALL_TOPOLOGIES, OPTIONAL_SERVERS, Algorithm, check_servers
from workloads.plan import COPY, REDUCE, Plan, Transfer


DEDICATED_FORMULA = "2 * busiest cut of a push (max(W/M, 1) * TF on a star)"


def p2p_ps(workers: int) -> Plan:
    """Every worker owns piece i: push all other pieces to their owners (sum), then pull them back."""
    push = tuple(Transfer(i, j, j, REDUCE) for i in range(workers) for j in range(workers) if i != j)
    pull = tuple(Transfer(j, i, j, COPY) for j in range(workers) for i in range(workers) if i != j)
    return Plan("ps", workers, workers, ((push, pull),), tuple(range(workers)), {"servers": 0})


def dedicated_ps(hosts: int, servers: int) -> Plan:
    """Ranks 0..M-1 are servers holding one piece each; the other ranks are workers that push and pull."""
    check_servers(servers, hosts)
    workers = range(servers, hosts)
    push = tuple(Transfer(w, s, s, REDUCE) for w in workers for s in range(servers))
    pull = tuple(Transfer(s, w, s, COPY) for s in range(servers) for w in workers)
    return Plan("ps", hosts, servers, ((push, pull),), tuple(workers), {"servers": servers})


def plan(topo, servers: int) -> Plan:
    """P2P PS over every host, or dedicated servers 0..M-1."""
    return dedicated_ps(len(topo.hosts), servers) if servers else p2p_ps(len(topo.hosts))


def theory(topo, gradient_bytes, bw, servers: int) -> Theory:
    """P2P: 2(N-1)/N * TF (BML paper). Dedicated: a push then a pull, each as long as its busiest cut needs
    (W/M of the gradient into a server's link, the whole gradient out of a worker's, or a subtree's uplinks)."""
    tf = host_tf(gradient_bytes, bw)
    if servers:
        return Theory(2 * dedicated_servers_time(topo, gradient_bytes, bw, servers), DEDICATED_FORMULA, tf)
    return Theory(all_reduce_bound(len(topo.hosts)) * tf, "2(N-1)/N * TF", tf)


PS = Algorithm(
    name="ps", summary="parameter server: P2P (every worker serves 1/N) or --servers M dedicated",
    paper="BML (Wang et al., NeurIPS 2018) baseline", topologies=ALL_TOPOLOGIES, theory=theory, plan=plan,
    servers=OPTIONAL_SERVERS, codecs=("none", "terngrad"))
