"""Parameter server: peer-to-peer (every worker serves 1/N, the BML paper's baseline) or dedicated servers; every
tensor split evenly over the servers, or whole tensors placed round-robin on them as TensorFlow's PS does (the
placement the BML paper measured against, and whose imbalance it names as a cause of its gains)."""

from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

from emulation.core.formulas import Theory, all_reduce_bound, dedicated_servers_time, host_tf
from workloads.algorithms.base import ALL_TOPOLOGIES, OPTIONAL_SERVERS, Algorithm, check_servers
from workloads.option_fields import option
from workloads.codecs import SUMMING
from workloads.plan import COPY, REDUCE, LAYOUT_TENSORS, Plan, PlanError, Transfer
from workloads.plan_table import TransferTable, table_plan

DEDICATED_FORMULA = "2 * busiest cut of a push (max(W/M, 1) * TF on a star)"
PLACE_EVEN, PLACE_BY_TENSOR = "even", "tensor"
STREAMING, SERVER_BARRIER = "none", "server"


@dataclass(frozen=True)
class PSOptions:
    """Where the parameter server keeps each tensor."""

    ps_placement: str = option(PLACE_EVEN, "ps: how tensors are placed on the servers: split evenly over every server "
                               "(even), or whole tensors round-robin in the model's order, as TensorFlow's "
                               "replica_device_setter places variables (tensor; the BML paper's baseline)",
                               choices=(PLACE_EVEN, PLACE_BY_TENSOR), shapes_plan=True)
    ps_barrier: str = option(STREAMING, "ps: when a server sends its sums back: each chunk as soon as every worker's "
                             "push of it arrived (none: pulls overlap later pushes), or only after every push to it "
                             "arrived (server: PS-lite's BSP and TensorFlow's synchronous PS, the baselines the BML "
                             "and Parameter Flow papers measured; the closed form's push-then-pull)",
                             choices=(STREAMING, SERVER_BARRIER), shapes_plan=True)


def p2p_ps(workers: int) -> Plan:
    """Every worker owns piece i: push all other pieces to their owners (sum), then pull them back."""
    ranks = np.arange(workers, dtype=np.int64)
    a, b = np.repeat(ranks, workers), np.tile(ranks, workers)
    apart = a != b
    a, b = a[apart], b[apart]  # every ordered pair, by first rank then second
    return push_pull("ps", workers, workers, a, b, b, a, b, a, ranks, {"servers": 0})


def dedicated_ps(hosts: int, servers: int) -> Plan:
    """Ranks 0..M-1 are servers holding one piece each; the other ranks are workers that push and pull."""
    check_servers(servers, hosts)
    workers, serving = np.arange(servers, hosts, dtype=np.int64), np.arange(servers, dtype=np.int64)
    w, s = np.repeat(workers, servers), np.tile(serving, len(workers))  # push: by worker, then server
    s2, w2 = np.repeat(serving, len(workers)), np.tile(workers, servers)  # pull: by server, then worker
    return push_pull("ps", hosts, servers, w, s, s, s2, w2, s2, workers, {"servers": servers})


def push_pull(name: str, ranks: int, pieces: int, push_src, push_dst, push_piece, pull_src, pull_dst, pull_piece,
              contributors, meta) -> Plan:
    """One stream of two steps, a push that sums and a pull that copies, as a table."""
    table = TransferTable(np.concatenate([push_src, pull_src]), np.concatenate([push_dst, pull_dst]),
                          np.concatenate([push_piece, pull_piece]),
                          np.repeat([False, True], [len(push_src), len(pull_src)]),
                          np.full(len(push_src) + len(pull_src), -1, dtype=np.int64),
                          ((len(push_src), len(push_src) + len(pull_src)),))
    return table_plan(name, ranks, pieces, table, contributors.tolist(), meta)


def owners(tensors: int, servers: int) -> List[int]:
    """The server of each tensor: round-robin in the model's order (TensorFlow's default ps strategy)."""
    return [t % servers for t in range(tensors)]


def tensor_ps(hosts: int, servers: int, tensors: int) -> Plan:
    """Whole tensors on their servers (P2P: every host serves; else ranks 0..M-1): every worker pushes each tensor
    to its owner, which sums it and sends it back."""
    if servers:
        check_servers(servers, hosts)
    serving = servers or hosts
    workers = list(range(servers, hosts))
    placed = owners(tensors, serving)
    push = tuple(Transfer(w, placed[t], t, REDUCE) for w in workers for t in range(tensors) if w != placed[t])
    pull = tuple(Transfer(placed[t], w, t, COPY) for t in range(tensors) for w in workers if w != placed[t])
    return Plan("ps", hosts, tensors, ((push, pull),), tuple(workers),
                {"servers": servers, "placement": PLACE_BY_TENSOR, "owners": placed}, layout=LAYOUT_TENSORS)


def needs_tensors(layer_sizes: Optional[Sequence[int]]) -> Sequence[int]:
    """The model's tensor sizes, which whole-tensor placement cannot do without (PlanError)."""
    if not layer_sizes:
        raise PlanError("ps --ps-placement tensor places whole tensors: it needs the model's tensor sizes")
    return layer_sizes


def plan(topo, servers: int, ps_placement: str = PLACE_EVEN, layer_sizes: Optional[Sequence[int]] = None,
         ps_barrier: str = STREAMING) -> Plan:
    """P2P PS over every host, or dedicated servers 0..M-1; with placement tensor, whole tensors; with a server
    barrier, a rank begins its pull only when its push step is done (every push to it arrived: step barriers)."""
    if ps_placement == PLACE_BY_TENSOR:
        built = tensor_ps(len(topo.hosts), servers, len(needs_tensors(layer_sizes)))
    else:
        built = dedicated_ps(len(topo.hosts), servers) if servers else p2p_ps(len(topo.hosts))
    if ps_barrier == SERVER_BARRIER:
        built.meta.update(barriers=True)
    return built


def theory(topo, gradient_bytes, bw, servers: int, ps_placement: str = PLACE_EVEN,
           layer_sizes: Optional[Sequence[int]] = None, ps_barrier: str = STREAMING) -> Theory:
    """P2P: 2(N-1)/N * TF (BML paper). Dedicated: a push then a pull, each as long as its busiest cut needs
    (W/M of the gradient into a server's link, the whole gradient out of a worker's, or a subtree's uplinks).
    Whole tensors: the busiest host link, the server holding the most bytes B taking (workers-1 or workers) x B in
    and out, every worker sending what it does not own: 2 * max over hosts of max(B_in, B_out) / rate. Each is a
    push then a pull, the barrier's time; streaming pulls overlap later pushes where the cuts allow (ps_barrier)."""
    tf = host_tf(gradient_bytes, bw)
    if ps_placement == PLACE_BY_TENSOR:
        return tensor_theory(len(topo.hosts), servers, [4 * s for s in needs_tensors(layer_sizes)], tf)
    if servers:
        return Theory(2 * dedicated_servers_time(topo, gradient_bytes, bw, servers), DEDICATED_FORMULA, tf)
    return Theory(all_reduce_bound(len(topo.hosts)) * tf, "2(N-1)/N * TF", tf)


def tensor_theory(hosts: int, servers: int, tensor_bytes: Sequence[float], tf: float) -> Theory:
    """The host-link bound of whole tensors placed round-robin: each direction of the busiest host link."""
    serving = servers or hosts
    workers = hosts - servers
    total = float(sum(tensor_bytes))
    held = [0.0] * serving
    for t, owner in enumerate(owners(len(tensor_bytes), serving)):
        held[owner] += tensor_bytes[t]
    busiest = 0.0
    for h in range(hosts):
        mine = held[h] if h < serving else 0.0
        trains = h >= servers
        into = (workers - (1 if trains else 0)) * mine   # the others' copies of what it holds
        out = total - mine if trains else 0.0            # its gradient of what others hold
        busiest = max(busiest, into, out)
    share = busiest / total if total else 0.0
    return Theory(2 * share * tf, f"2 * busiest host link's share ({share:.3f}) of the gradient * TF "
                                  f"(whole tensors round-robin on {serving} servers)", tf)


PS = Algorithm(
    name="ps", summary="parameter server: P2P (every worker serves 1/N) or --servers M dedicated; tensors split "
                       "evenly or placed whole (--ps-placement)",
    paper="BML (Wang et al., NeurIPS 2018) baseline", topologies=ALL_TOPOLOGIES, theory=theory, plan=plan,
    servers=OPTIONAL_SERVERS, codecs=SUMMING, options=PSOptions, sized_plan=True,
    bucketable=lambda options: options.ps_placement == PLACE_EVEN, host_subsets=True)
