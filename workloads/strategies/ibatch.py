"""Parameter server with pulled parameters (iBatch and its baselines): servers hold and update the parameters;
workers pull them in layer batches on a separate thread while the forward pass runs, then push gradients."""

from __future__ import annotations

import threading
import time
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from workloads.algorithms.ibatch import (batches_for, choose, fitted_profile, layer_batches, placement, ps_pull, ps_push,
                                         timeline)
from workloads.algorithms.ps import dedicated_ps
from workloads.plan import PieceLayout
from workloads.records import IterationRecord
from workloads.strategies.base import ComputeClock, ModelState, RankContext, Strategy, wire_snapshot, wire_total

PROFILE_ITERATIONS = 2  # layer-by-layer pulls measure C_i, T_t^i and T_s; the medians skip these
PUSH, PULL, PROFILE, CHOSEN_PULL = 0, 1, 2, 3  # port offsets of the concurrent plans


def layer_segments(model: torch.nn.Sequential) -> List[List[torch.nn.Module]]:
    """The model cut into layers: each layer with parameters plus the parameter-free modules after it."""
    segments: List[List[torch.nn.Module]] = []
    for module in model.children():
        if any(True for _ in module.parameters()) or not segments:
            segments.append([module])
        else:
            segments[-1].append(module)
    return segments


class BatchedPulls(Strategy):
    """iBatch: profile two layer-by-layer iterations, agree on the profile, pull in the chosen batches."""

    def __init__(self, ctx: RankContext, state: ModelState):
        super().__init__(ctx, state)
        self.segments = layer_segments(state.model)
        self.params_by_layer = [[p for m in seg for p in m.parameters()] for seg in self.segments]
        self.sizes = [sum(p.numel() for p in ps) for ps in self.params_by_layer]
        L = self.layers = len(self.sizes)
        hosts, servers = len(ctx.topo.hosts), ctx.servers
        self.place = placement(self.sizes, servers)  # layer-major pieces: the flat gradient's own order
        self.layout = PieceLayout.per_layer(list(self.place.sizes))
        self.pull_layout = PieceLayout.per_layer(list(self.place.sizes) + [1] * ctx.workers)
        self.push = ctx.channel(ps_push(hosts, servers, self.place), self.layout, PUSH)
        self.batches = layer_batches(L)
        self.pull = ctx.channel(ps_pull(hosts, servers, self.place, self.batches), self.pull_layout, PULL)
        self.params = state.parameters_flat()  # servers: the parameters they hold and update
        self.grads = np.zeros(self.layout.total, np.float32)
        self.pull_buf = np.zeros(self.pull_layout.total, np.float32)
        self.profile_rows: List[Tuple[np.ndarray, np.ndarray]] = []
        self.chosen: Optional[Dict[str, object]] = None
        self.push_counts = {"in": ctx.workers, "out": servers}
        self.pull_counts = {"in": servers, "out": ctx.workers}

    # -- schedule: profile, then agree on the batching --------------------------------------------------

    def _maybe_decide(self, it: int) -> None:
        if it == PROFILE_ITERATIONS and self.chosen is None:
            self._decide()
            self.pull.close()
            hosts = len(self.ctx.topo.hosts)
            self.pull = self.ctx.channel(ps_pull(hosts, self.ctx.servers, self.place, self.batches),
                                         self.pull_layout, CHOSEN_PULL)

    def _decide(self) -> None:
        """The profile (max over ranks of the last layer-by-layer iteration), both greedy choices, the batching."""
        L = self.layers
        pulls, comps = self.profile_rows[-1] if self.profile_rows else (np.zeros(L), np.zeros(L))
        shared = self._share_max(np.concatenate([pulls, comps]))
        pulls, comps = shared[:L].astype(float), shared[L:].astype(float)
        profile = fitted_profile(self.sizes, comps, pulls)
        picked = choose(profile)
        mode = self.ctx.options.pull
        self.batches = batches_for(mode, picked, L)
        self.chosen = {"mode": mode, "batches": [list(b) for b in self.batches],
                       "profile": {"compute_s": list(profile.compute), "transfer_s": list(profile.transfer),
                                   "startup_s": profile.startup},
                       "predicted": {name: timeline(b, profile) for name, b in picked["options"].items()},
                       "greedy_choice": picked["chosen"], "best_greedy": picked["best_greedy"]}

    def _share_max(self, vector: np.ndarray) -> np.ndarray:
        """Max of every rank's vector, known to all (push max to rank 0, pull back)."""
        plan = dedicated_ps(len(self.ctx.topo.hosts), 1)
        channel = self.ctx.channel(plan, PieceLayout.per_layer([len(vector)]), PROFILE)
        buf = vector.astype(np.float32).copy()
        channel.run(buf, reduce=np.maximum)
        channel.close()
        return buf

    # -- worker ----------------------------------------------------------------------------------------

    def before_compute(self, it: int, rec: IterationRecord) -> None:
        """Start pulling the parameters, batch by batch, on a separate thread."""
        self._maybe_decide(it)
        self.arrived = [threading.Event() for _ in self.batches]
        self.arrival_t = [0.0] * len(self.batches)
        self.errors: List[BaseException] = []
        self.pull_start = time.time()
        self.pull_before = wire_snapshot(self.pull.executor)

        def on_step(stream, step):
            if step % 2 == 1:  # even steps carry the requests, odd steps the layers
                self.arrival_t[step // 2] = time.time()
                self.arrived[step // 2].set()

        def pull_all():
            try:
                self.pull.run(self.pull_buf, on_step=on_step)
            except BaseException as exc:  # surfaced to the forward pass
                self.errors.append(exc)
                for e in self.arrived:
                    e.set()

        self.thread = threading.Thread(target=pull_all, daemon=True)
        self.thread.start()

    def forward(self, x: torch.Tensor, clock: ComputeClock) -> torch.Tensor:
        """Run each batch of layers as soon as its parameters have arrived."""
        out = x
        self.layer_compute = [0.0] * self.layers
        first = len(clock.intervals)
        for k, (a, b) in enumerate(self.batches):
            self.arrived[k].wait()
            if self.errors:
                raise self.errors[0]
            with torch.no_grad():
                for i in range(a, b + 1):
                    first, end = self.place.layers[i]
                    lo, hi = self.pull_layout.bounds[first][0], self.pull_layout.bounds[end - 1][1]
                    flat = torch.from_numpy(self.pull_buf[lo:hi])
                    offset = 0
                    for p in self.params_by_layer[i]:
                        p.copy_(flat[offset:offset + p.numel()].view_as(p))
                        offset += p.numel()
            for i in range(a, b + 1):
                with clock.segment():
                    for module in self.segments[i]:
                        out = module(out)
                s, e = clock.intervals[-1]
                self.layer_compute[i] = e - s
        self.thread.join()
        if self.errors:
            raise self.errors[0]
        self.forward_intervals = clock.intervals[first:]
        self.forward_end = time.time()
        return out

    def synchronize(self, it: int, rec: IterationRecord) -> None:
        """Push the gradient to the servers (they update the parameters the next pull brings)."""
        gradient = self.state.gradient()
        grads = gradient.numpy()  # layer-major = per-layer layout order
        self.ctx.check(it, "pull", "sum", "out", self.pull_buf[:self.layout.total], self.pull_counts)
        self.ctx.check(it, "push", "sharded", "in", grads, self.push_counts)
        raw, sent = wire_total(self.pull.executor, self.pull_before)
        rec.add_payload("pull", raw, sent)
        rec.sync_start = time.time()
        before = wire_snapshot(self.push.executor)
        self.push.run(grads)
        rec.sync_end = time.time()
        rec.add_payload("push", *wire_total(self.push.executor, before))
        self._trace(rec)
        self._split(it, rec)

    def _split(self, it: int, rec: IterationRecord) -> None:
        """The pull + forward time split into overlapped, exposed communication and exposed computation."""
        comm_iv = [(self.pull_start if k == 0 else self.arrival_t[k - 1], self.arrival_t[k])
                   for k in range(len(self.batches))]
        comp_iv = self.forward_intervals
        overlap = sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in comm_iv for s2, e2 in comp_iv)
        comm = self.arrival_t[-1] - self.pull_start
        comp = sum(e - s for s, e in comp_iv)
        rec.split.update(forward_phase_s=self.forward_end - self.pull_start, overlapped_s=overlap,
                         comm_exposed_s=comm - overlap, compute_exposed_s=comp - overlap)
        rec.marks["pull"] = [self.pull_start, self.arrival_t[-1]]
        if it < PROFILE_ITERATIONS:
            layer_pull = [self.arrival_t[k] - (self.pull_start if k == 0 else self.arrival_t[k - 1])
                          for k in range(len(self.batches))]
            self.profile_rows.append((np.array(layer_pull), np.array(self.layer_compute)))

    # -- server ----------------------------------------------------------------------------------------

    def serve(self, it: int, rec: IterationRecord) -> None:
        """Serve the pulls of the current parameters, sum the pushed gradients, apply SGD."""
        self._maybe_decide(it)
        self.pull_buf[:self.layout.total] = self.params
        if it == 0:
            mine = np.zeros(self.layout.total, np.float32)
            for p, (lo, hi) in enumerate(self.layout.bounds):
                if self.place.owners[p] == self.ctx.rank:
                    mine[lo:hi] = self.params[lo:hi]
            self.ctx.check(it, "pull", "sum", "in", mine, self.pull_counts)
        t0 = time.time()
        before = wire_snapshot(self.pull.executor)
        self.pull.run(self.pull_buf)
        rec.add_payload("pull", *wire_total(self.pull.executor, before))
        self.grads[:] = 0
        rec.sync_start = time.time()
        self.push.run(self.grads)
        rec.sync_end = time.time()
        self.ctx.check(it, "push", "sharded", "out", self.grads, self.push_counts)
        rec.marks["pull"] = [t0, rec.sync_start]
        self._trace(rec)
        self.params -= self.state.lr * self.grads / self.ctx.workers

    def _trace(self, rec: IterationRecord) -> None:
        rec.transfers += [dict(t, phase="pull") for t in self.pull.executor.drain_transfers()]
        rec.transfers += [dict(t, phase="push") for t in self.push.executor.drain_transfers()]

    def finish(self) -> Dict[str, object]:
        """Decide now if the run was too short to reach the decision point; report the schedule."""
        if self.chosen is None:
            self._decide()
        return {"ibatch": self.chosen}

    def close(self) -> None:
        """Close both channels."""
        self.push.close()
        self.pull.close()
