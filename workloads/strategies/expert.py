"""Expert parallelism (GShard, Switch Transformer): the MoE layer's dispatched slots go to their experts' ranks by
an all-to-all on the one engine and come back by another; autograd runs the same all-to-all on their gradients in
the backward pass (an all-to-all is its own transpose). Each exchange is synchronization, not compute: the compute
clock pauses through it and the record marks it (a 'sync:' mark, added to the iteration's GST). After backward the
dense layers' gradient is ring-all-reduced; an expert's gradient is already the sum over every rank's tokens."""

from __future__ import annotations

import hashlib
import time
from typing import Optional

import numpy as np
import torch

from workloads.algorithms.expert import exchange_plan
from workloads.algorithms.ring import ring
from workloads.models import MOE_TOKENS
from workloads.plan import PieceLayout
from workloads.records import IterationRecord
from workloads.strategies.base import ComputeClock, ModelState, RankContext, Strategy, run_recorded

EXPERT_PARAMETERS = "moe.experts."


class Exchange(torch.autograd.Function):
    """An all-to-all in forward, the same all-to-all of the gradient in backward."""

    @staticmethod
    def forward(ctx, blocks, run, phase):
        ctx.run, ctx.phase = run, phase
        return run(blocks, phase)

    @staticmethod
    def backward(ctx, grad):
        return ctx.run(grad.contiguous(), f"{ctx.phase}_grad"), None, None


class ExpertParallel(Strategy):
    """All-to-all the MoE layer's tokens to this rank's experts and back; ring-all-reduce the dense gradient."""

    def __init__(self, ctx: RankContext, state: ModelState):
        super().__init__(ctx, state)
        self.layer = state.model.moe
        self.layer.exchange = lambda blocks, phase: Exchange.apply(blocks, self._all_to_all, phase)
        n = ctx.ranks
        self.block = len(self.layer.experts) * self.layer.slots * self.layer.width
        self.exchange_layout = PieceLayout([n * n * self.block], n * n)
        self.exchange = ctx.channel(exchange_plan(n, ctx.options), self.exchange_layout, 0)
        self.buffer = np.empty(n * n * self.block, dtype=np.float32)  # block i*N + j: what rank i sends rank j
        named = [(name, p) for name, p in state.model.named_parameters() if p.requires_grad]
        self.dense = [p for name, p in named if not name.startswith(EXPERT_PARAMETERS)]
        dense_ids = {id(p) for p in self.dense}
        offsets = np.cumsum([0] + state.sizes)
        dense_index = np.concatenate(
            [np.arange(offsets[i], offsets[i + 1]) for i, p in enumerate(state.params) if id(p) in dense_ids])
        self.dense_layout = PieceLayout([p.numel() for p in self.dense], n)
        self.allreduce = ctx.channel(ring(n), self.dense_layout, 1)
        # where each element of the dense gradient's piece-major buffer sits in the flat gradient
        self.dense_pieces = torch.from_numpy(dense_index[self.dense_layout.index])
        self.dense_buf = torch.empty(self.dense_layout.total)
        self.clock: Optional[ComputeClock] = None
        self.rec: Optional[IterationRecord] = None
        self.iteration = 0
        self.counts = {"in": n, "out": n}

    def before_compute(self, iteration: int, rec: IterationRecord) -> None:
        """The record the exchanges of this iteration mark."""
        self.iteration, self.rec = iteration, rec

    def forward(self, x: torch.Tensor, clock: ComputeClock) -> torch.Tensor:
        """The forward pass, its two all-to-alls outside the compute clock."""
        self.clock = clock
        out = super().forward(x, clock)
        self.rec.split["dropped_tokens"] = self.layer.dropped
        self.rec.split["capacity_factor"] = self.layer.experts_total * self.layer.slots / (x.shape[0] * MOE_TOKENS)
        return out

    def _all_to_all(self, blocks: torch.Tensor, phase: str) -> torch.Tensor:
        """Send blocks[j] to rank j; returns what every rank sent this one, in rank order."""
        n, r, b = self.ctx.ranks, self.ctx.rank, self.block
        mine = slice(r * n * b, (r + 1) * n * b)
        self.buffer[mine] = blocks.detach().reshape(-1).numpy()
        check = self.iteration == 0 and phase == "dispatch"
        if check:
            self.ctx.save_check("alltoall", "alltoall", "in", self.buffer[mine].reshape(n, b), self.counts)
        with self.clock.pause():
            start = time.time()
            run_recorded(self.exchange, self.buffer, phase, self.rec, layout=self.exchange_layout)
            self.rec.marks[f"sync:{phase}"] = [start, time.time()]
        received = self.buffer.reshape(n, n, b)[:, r].copy()
        if check:
            self.ctx.save_check("alltoall", "alltoall", "out", received, self.counts)
        return torch.from_numpy(received).view(blocks.shape)

    def synchronize(self, it: int, rec: IterationRecord) -> None:
        """Ring-all-reduce the dense gradient and average it; an expert's gradient over the N ranks' mean losses;
        SGD step."""
        flat = self.state.gradient()
        torch.index_select(flat, 0, self.dense_pieces, out=self.dense_buf)
        self.ctx.check(it, "allreduce", "sum", "in", self.dense_buf.numpy(), self.counts)
        rec.sync_start = time.time()
        run_recorded(self.allreduce, self.dense_buf.numpy(), "allreduce", rec, layout=self.dense_layout)
        rec.sync_end = time.time()
        self.ctx.check(it, "allreduce", "sum", "out", self.dense_buf.numpy(), self.counts)
        flat.div_(self.ctx.ranks)
        flat.index_copy_(0, self.dense_pieces, self.dense_buf / self.ctx.ranks)
        self.state.set_gradient(flat)
        self.state.step()

    def checksum(self) -> str:
        """SHA-256 of the dense (replicated) parameters: equal on every rank iff they stayed replicas; each rank's
        experts are its own."""
        h = hashlib.sha256()
        for p in self.dense:
            h.update(p.detach().contiguous().numpy().tobytes())
        return h.hexdigest()

    def close(self) -> None:
        """Close both plans' connections."""
        self.exchange.close()
        self.allreduce.close()
