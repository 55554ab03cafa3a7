"""iBatch: batch parameter pulls so they overlap the forward pass. Its descriptor and options, the push and
pull plans, the profile and both greedy batchings (pure; its ranks run workloads/strategies/ibatch.py).

A profile gives each layer's forward time C_i, its parameter transfer time T_t^i and the startup time
T_s of one pull. A batching is a list of consecutive layer ranges; the pulls run back to back on one
channel and the forward of batch k starts when batch k has arrived and batch k-1 is computed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence, Tuple

from emulation.core.formulas import Theory, dedicated_servers_time, host_tf
from workloads.algorithms.base import ALL_TOPOLOGIES, REQUIRED_SERVERS, Algorithm, check_servers
from workloads.option_fields import option
from workloads.plan import COPY, REDUCE, Plan, PlanError, Transfer

Batches = List[Tuple[int, int]]  # inclusive 0-based layer ranges
PULL_MODES = ("ibatch", "layer", "default")  # --pull: the greedy batching, layer by layer, everything then compute


@dataclass(frozen=True)
class Profile:
    """Per-layer forward times C, transfer times Tt and the pull startup time Ts (seconds)."""

    compute: Tuple[float, ...]
    transfer: Tuple[float, ...]
    startup: float

    @property
    def layers(self) -> int:
        """Number of layers."""
        return len(self.compute)


def timeline(batches: Batches, p: Profile) -> Dict[str, float]:
    """Exact pipeline: total time and its split into overlapped communication, communication not
    overlapped, and computation not overlapped (the iBatch paper's Fig. 7)."""
    return pipeline([_comm(p, a, b) for a, b in batches], [_comp(p, a, b) for a, b in batches])


def pipeline(pulls: Sequence[float], computes: Sequence[float]) -> Dict[str, float]:
    """timeline() from each batch's pull and forward seconds: the pulls back to back, a batch's forward once it
    has arrived and the previous batch is computed."""
    comm_end, comp_end = 0.0, 0.0
    comm_iv, comp_iv = [], []
    for pull, compute in zip(pulls, computes):
        start = comm_end
        comm_end = start + pull
        comm_iv.append((start, comm_end))
        c0 = max(comm_end, comp_end)
        comp_end = c0 + compute
        comp_iv.append((c0, comp_end))
    overlap = sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in comm_iv for s2, e2 in comp_iv)
    comm = sum(e - s for s, e in comm_iv)
    comp = sum(e - s for s, e in comp_iv)
    return {"total_s": comp_end, "overlapped_s": overlap, "comm_exposed_s": comm - overlap,
            "compute_exposed_s": comp - overlap}


def execution_time(batches: Batches, p: Profile) -> float:
    """Total time of the pull + forward pipeline for a batching."""
    return timeline(batches, p)["total_s"]


def paper_objective(batches: Batches, p: Profile) -> float:
    """Eq. 1-4: EXE1 + EXE2 + EXE3 (valid when every batch's pull covers the previous batch's compute)."""
    first = p.startup + sum(p.transfer[batches[0][0]:batches[0][1] + 1])
    rest = sum(p.startup + sum(p.transfer[a:b + 1]) for a, b in batches[1:])
    last = sum(p.compute[batches[-1][0]:batches[-1][1] + 1])
    return first + rest + last


def default_batches(layers: int) -> Batches:
    """Default PS: pull everything, then compute."""
    return [(0, layers - 1)]


def layer_batches(layers: int) -> Batches:
    """Layer by layer."""
    return [(i, i) for i in range(layers)]


def _comm(p: Profile, a: int, b: int) -> float:
    return p.startup + sum(p.transfer[a:b + 1])


def _comp(p: Profile, a: int, b: int) -> float:
    return sum(p.compute[a:b + 1])


def greedy_forward(p: Profile) -> Batches:
    """Algorithm 1: choose l1, l2 (most first-batch compute hidden, then least first pull), then each
    next boundary so the next pull just covers the previous batch's compute."""
    L = p.layers
    if L == 1:
        return [(0, 0)]
    pairs = [(l1, l2) for l1 in range(L - 1) for l2 in range(l1 + 1, L)]
    ok = [(l1, l2) for l1, l2 in pairs if _comm(p, l1 + 1, l2) > _comp(p, 0, l1)]
    if not ok:
        return default_batches(L)
    best = max(_comp(p, 0, l1) for l1, _ in ok)
    ok = [pr for pr in ok if _comp(p, 0, pr[0]) == best]
    l1, l2 = min(ok, key=lambda pr: (_comm(p, 0, pr[0]), pr[1]))
    bounds = [l1, l2]
    while bounds[-1] < L - 1:
        prev2, prev1 = (bounds[-2] if len(bounds) > 1 else -1), bounds[-1]
        need = _comp(p, prev2 + 1, prev1)
        cands = [x for x in range(prev1 + 1, L) if _comm(p, prev1 + 1, x) > need]
        bounds.append(min(cands, key=lambda x: _comm(p, prev1 + 1, x) - need) if cands else L - 1)
    return _to_batches(bounds)


def greedy_backward(p: Profile) -> Batches:
    """Algorithm 2: choose l_{N-1}, l_{N-2} (most batch N-1 compute hidden, then least last-batch compute),
    then each earlier boundary so batch k's compute is just covered by batch k+1's pull."""
    L = p.layers
    if L == 1:
        return [(0, 0)]
    # pairs (a, b): batch N-1 = [a+1, b], last batch = [b+1, L-1]; a may be -1 (batch N-1 starts at 0)
    pairs = [(a, b) for b in range(L - 1) for a in range(-1, b)]
    ok = [(a, b) for a, b in pairs if _comm(p, b + 1, L - 1) > _comp(p, a + 1, b)]
    if not ok:
        return default_batches(L)
    best = max(_comp(p, a + 1, b) for a, b in ok)
    ok = [pr for pr in ok if _comp(p, pr[0] + 1, pr[1]) == best]
    a, b = min(ok, key=lambda pr: (_comp(p, pr[1] + 1, L - 1), pr[0]))
    bounds = [L - 1, b, a]
    while bounds[-1] >= 0:
        hi, mid = bounds[-2], bounds[-1]  # batch k+1 = [mid+1, hi]; choose batch k = [x+1, mid]
        comm = _comm(p, mid + 1, hi)
        cands = [x for x in range(-1, mid) if comm > _comp(p, x + 1, mid)]
        bounds.append(min(cands, key=lambda x: comm - _comp(p, x + 1, mid)) if cands else -1)
    return _to_batches(sorted(x for x in bounds if x >= 0))


def _to_batches(bounds: Sequence[int]) -> Batches:
    out, start = [], 0
    for b in sorted(set(bounds)):
        out.append((start, b))
        start = b + 1
    return out


def choose(p: Profile) -> Dict[str, object]:
    """The batching iBatch uses: the better of its two greedy algorithms on the profile (as the paper does); the
    baselines' predicted times are reported beside it, never chosen (so iBatch can lose to them, and that shows)."""
    options = {"greedy_forward": greedy_forward(p), "greedy_backward": greedy_backward(p),
               "default": default_batches(p.layers), "layer": layer_batches(p.layers)}
    times = {k: execution_time(v, p) for k, v in options.items()}
    chosen = min(GREEDY, key=lambda k: times[k])
    return {"batches": options[chosen], "chosen": chosen, "best_greedy": chosen, "options": options,
            "times": times}


GREEDY = ("greedy_forward", "greedy_backward")


def fit_startup(sizes: Sequence[int], times: Sequence[float]) -> Tuple[float, float]:
    """Least-squares fit of per-pull times t = Ts + bytes / rate: returns (Ts, bytes per second)."""
    n = len(sizes)
    mx, my = sum(sizes) / n, sum(times) / n
    sxx = sum((x - mx) ** 2 for x in sizes)
    slope = sum((x - mx) * (y - my) for x, y in zip(sizes, times)) / sxx if sxx else 0.0
    startup = max(0.0, my - slope * mx)
    return startup, (1.0 / slope if slope > 0 else float("inf"))


def fitted_profile(layer_sizes: Sequence[int], compute_s: Sequence[float], pull_s: Sequence[float]) -> Profile:
    """The profile from each layer pulled alone: the startup and rate fitted to the pull times, each layer's
    transfer at that rate, beside its forward seconds."""
    startup, rate = fit_startup([n * 4 for n in layer_sizes], list(pull_s))
    transfer = tuple(n * 4 / rate if math.isfinite(rate) else 0.0 for n in layer_sizes)
    return Profile(tuple(compute_s), transfer, startup)


def batches_for(mode: str, picked: Dict[str, object], layers: int) -> Batches:
    """The batching a --pull mode uses: iBatch's choice, or one of the two baselines."""
    return {"ibatch": picked["batches"], "layer": layer_batches(layers), "default": default_batches(layers)}[mode]


@dataclass(frozen=True)
class Placement:
    """Every layer split evenly over the servers, as BigDL partitions the parameters: the pieces (layer-major), each
    one's server, and each layer's pieces [first, end)."""

    sizes: Tuple[int, ...]
    owners: Tuple[int, ...]
    layers: Tuple[Tuple[int, int], ...]

    def pieces_of(self, a: int, b: int) -> range:
        """The pieces of layers a..b."""
        return range(self.layers[a][0], self.layers[b][1])


def placement(layer_sizes: Sequence[int], servers: int) -> Placement:
    """Layer i in min(servers, its size) near-equal slices, slice j on server (i + j) mod servers (so one-piece
    layers do not all land on server 0)."""
    sizes: List[int] = []
    owners: List[int] = []
    spans = []
    for i, n in enumerate(layer_sizes):
        k, first = max(1, min(servers, n)), len(sizes)
        sizes += [n // k + (1 if j < n % k else 0) for j in range(k)]
        owners += [(i + j) % servers for j in range(k)]
        spans.append((first, len(sizes)))
    return Placement(tuple(sizes), tuple(owners), tuple(spans))


def ps_push(hosts: int, servers: int, place: Placement) -> Plan:
    """Every worker pushes every piece of the gradient to that piece's server (summed there)."""
    check_servers(servers, hosts)
    step = tuple(Transfer(w, place.owners[p], p, REDUCE) for w in range(servers, hosts)
                 for p in range(len(place.sizes)))
    return Plan("ibatch-push", hosts, len(place.sizes), ((step,),), tuple(range(servers, hosts)), {"servers": servers})


def ps_pull(hosts: int, servers: int, place: Placement, batches: Sequence[Tuple[int, int]]) -> Plan:
    """Per batch of layers: every worker sends a pull request (its token piece) to the servers holding them, then
    those servers send their pieces. Pieces 0..P-1 are the placement's, P+w is worker w's request token."""
    workers = list(range(servers, hosts))
    layers = len(place.layers)
    covered = [i for a, b in batches for i in range(a, b + 1)]
    if covered != list(range(layers)):
        raise PlanError(f"batches {list(batches)} must cover layers 0..{layers - 1} once, in order")
    steps: List[tuple] = []
    for batch in batches:
        steps += batch_steps(workers, servers, place, batch)
    # requests and replies: a server answers a batch only after its requests arrived (step barriers)
    return Plan("ibatch-pull", hosts, len(place.sizes) + len(workers), (tuple(steps),), tuple(workers),
                {"servers": servers, "batches": [list(b) for b in batches], "barriers": True})


def batch_steps(workers: Sequence[int], servers: int, place: Placement, batch: Tuple[int, int]) -> List[tuple]:
    """One batch's pull: every worker's request to the batch's servers, then their replies with its pieces."""
    pieces = place.pieces_of(*batch)
    owners = sorted({place.owners[p] for p in pieces})
    tokens = len(place.sizes) - servers
    return [tuple(Transfer(w, s, tokens + w, COPY) for w in workers for s in owners),
            tuple(Transfer(place.owners[p], w, p, COPY) for p in pieces for w in workers)]


def batch_pull(hosts: int, servers: int, place: Placement, batch: Tuple[int, int]) -> Plan:
    """One batch's pull as a plan of its own (the flow model times each batch apart)."""
    workers = list(range(servers, hosts))
    return Plan("ibatch-pull-batch", hosts, len(place.sizes) + len(workers),
                (tuple(batch_steps(workers, servers, place, batch)),), tuple(workers),
                {"servers": servers, "barriers": True})


def forward_phase(topo, servers: int, options, layer_sizes: Sequence[int], forward_s: Sequence[float],
                  pull_s: Callable[[Plan, List[int]], float]) -> Dict[str, object]:
    """The forward pass with its pulls, as the ranks run it, in the flow model: each layer pulled alone gives the
    profile (transfer times and the startup fitted as the ranks fit theirs), iBatch's chooser picks a batching,
    and the --pull mode's batching is timed batch by batch (pull_s: a plan's seconds for pieces of these element
    counts) against each layer's forward seconds. Returns timeline()'s split, the batches and the profile."""
    hosts, L = len(topo.hosts), len(layer_sizes)
    place = placement(layer_sizes, servers)
    pieces = list(place.sizes) + [1] * (hosts - servers)  # the layers' pieces, then each worker's request token

    def seconds(batch):
        return pull_s(batch_pull(hosts, servers, place, batch), pieces)
    single = [seconds((i, i)) for i in range(L)]
    profile = fitted_profile(layer_sizes, forward_s, single)
    batches = batches_for(options.pull, choose(profile), L)
    pulls = single if batches == layer_batches(L) else [seconds(b) for b in batches]
    out = pipeline(pulls, [sum(forward_s[a:b + 1]) for a, b in batches])
    return {**out, "batches": [list(b) for b in batches], "pull_s": pulls,
            "profile": {"compute_s": list(forward_s), "transfer_s": list(profile.transfer),
                        "startup_s": profile.startup}}


def theory(topo, gradient_bytes, bw, servers: int, **_) -> Theory:
    """The gradient push to M servers, as long as its busiest cut needs (the pulls are timed by forward_phase(),
    whatever the --pull mode)."""
    tf = host_tf(gradient_bytes, bw)
    return Theory(dedicated_servers_time(topo, gradient_bytes, bw, servers), "busiest cut of the push", tf)


def phases(topo, servers: int, options, sizes: Sequence[int]) -> Tuple[Tuple[Plan, List[int]]]:
    """What its GST times, as the flow model runs it: the push of every layer, split evenly over the servers. The
    pulls overlap the next forward pass and are timed by forward_phase(), not by the GST."""
    place = placement(sizes, servers)
    return ((ps_push(len(topo.hosts), servers, place), list(place.sizes)),)


@dataclass(frozen=True)
class IBatchOptions:
    """iBatch's run options (flag --pull)."""

    pull: str = option("ibatch", "ibatch: pull schedule (ibatch = the better greedy batching, layer, default)",
                       choices=PULL_MODES, shapes_plan=True)  # the flow model times the forward phase's pulls


IBATCH = Algorithm(
    name="ibatch", summary="parameter server whose pulls are batched by layer and overlap the forward pass",
    paper="iBatch (Wang et al., 2019)", topologies=ALL_TOPOLOGIES, theory=theory,
    strategy="workloads.strategies.ibatch:BatchedPulls", servers=REQUIRED_SERVERS, default_servers=1,
    options=IBatchOptions, worker_optimizer=False, phases=phases, forward_phase=forward_phase)
