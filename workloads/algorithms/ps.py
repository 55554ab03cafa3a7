"""Parameter server: peer-to-peer (every worker serves 1/N, the BML paper's baseline) or dedicated servers."""

from workloads.plan import COPY, REDUCE, Plan, PlanError, Transfer


def p2p_ps(workers: int) -> Plan:
    """Every worker owns piece i: push all other pieces to their owners (sum), then pull them back."""
    push = tuple(Transfer(i, j, j, REDUCE) for i in range(workers) for j in range(workers) if i != j)
    pull = tuple(Transfer(j, i, j, COPY) for j in range(workers) for i in range(workers) if i != j)
    return Plan("ps", workers, workers, ((push, pull),), tuple(range(workers)), {"servers": 0})


def dedicated_ps(hosts: int, servers: int) -> Plan:
    """Ranks 0..M-1 are servers holding one piece each; the other ranks are workers that push and pull."""
    if not 1 <= servers < hosts:
        raise PlanError(f"--servers {servers} is invalid: give 1..{hosts - 1} on a {hosts}-host topology")
    workers = range(servers, hosts)
    push = tuple(Transfer(w, s, s, REDUCE) for w in workers for s in range(servers))
    pull = tuple(Transfer(s, w, s, COPY) for s in range(servers) for w in workers)
    return Plan("ps", hosts, servers, ((push, pull),), tuple(workers), {"servers": servers})
