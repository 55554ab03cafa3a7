"""Parameter-server pulls in layer batches (iBatch): push gradients per layer, pull parameters per batch."""

from typing import List, Sequence, Tuple

from emulation.spec.theory import Theory, host_tf
from workloads.algorithms.base import ALL_TOPOLOGIES, REQUIRED_SERVERS, Algorithm
from workloads.plan import COPY, REDUCE, Plan, PlanError, Transfer


def server_of(layer: int, servers: int) -> int:
    """Layers are spread over the servers round-robin."""
    return layer % servers


def ps_push(hosts: int, servers: int, layers: int) -> Plan:
    """Every worker pushes every layer's gradient to that layer's server (summed there)."""
    if not 1 <= servers < hosts:
        raise PlanError(f"--servers {servers} is invalid: give 1..{hosts - 1} on a {hosts}-host topology")
    step = tuple(Transfer(w, server_of(i, servers), i, REDUCE) for w in range(servers, hosts) for i in range(layers))
    return Plan("ibatch-push", hosts, layers, ((step,),), tuple(range(servers, hosts)), {"servers": servers})


def ps_pull(hosts: int, servers: int, layers: int, batches: Sequence[Tuple[int, int]]) -> Plan:
    """Per batch: every worker sends a pull request (its token piece) to the batch's servers, then those
    servers send the batch's layers. Pieces 0..L-1 are layers, L+w is worker w's request token."""
    workers = list(range(servers, hosts))
    steps: List[tuple] = []
    covered = [i for a, b in batches for i in range(a, b + 1)]
    if covered != list(range(layers)):
        raise PlanError(f"batches {list(batches)} must cover layers 0..{layers - 1} once, in order")
    for a, b in batches:
        owners = sorted({server_of(i, servers) for i in range(a, b + 1)})
        steps.append(tuple(Transfer(w, s, layers + w - servers, COPY) for w in workers for s in owners))
        steps.append(tuple(Transfer(server_of(i, servers), w, i, COPY) for i in range(a, b + 1) for w in workers))
    # requests and replies: a server answers a batch only after its requests arrived (step barriers)
    return Plan("ibatch-pull", hosts, layers + len(workers), (tuple(steps),), tuple(workers),
                {"servers": servers, "batches": [list(b) for b in batches], "barriers": True})


def theory(topo, gradient_bytes, bw, servers: int) -> Theory:
    """The gradient push to M servers: W/M * TF (the pulls are modelled by workloads.ibatch.timeline)."""
    tf = host_tf(gradient_bytes, bw)
    return Theory((len(topo.hosts) - servers) / servers * tf, "W/M * TF (push)", tf)


IBATCH = Algorithm(
    name="ibatch", summary="parameter server whose pulls are batched by layer and overlap the forward pass",
    paper="iBatch (Wang et al., 2019)", topologies=ALL_TOPOLOGIES, theory=theory,
    strategy="workloads.strategies.pull:BatchedPulls", servers=REQUIRED_SERVERS, default_servers=1,
    options=("pull",))
