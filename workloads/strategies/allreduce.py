"""All-reduce by a dmlbed plan (ps, ring, bml, hier, blueconnect, twolevel, ...) on the one engine, with an
optional compressor (TernGrad) wrapped around it."""

from __future__ import annotations

import time

import numpy as np
import torch

from workloads.compression import COMPRESSORS
from workloads.plan import PieceLayout
from workloads.records import IterationRecord
from workloads.strategies.base import ModelState, RankContext, Strategy, wire_since, wire_snapshot

SCALER_PORT_OFFSET = 0  # the scaler max-reduce reuses the gradient plan's connections


class PlanAllReduce(Strategy):
    """Every contributor ends each iteration with the sum of all local gradients (compressed or not) and
    applies the average; dedicated servers (if the plan has them) aggregate and send back."""

    def __init__(self, ctx: RankContext, state: ModelState):
        super().__init__(ctx, state)
        self.plan = ctx.algorithm.build_plan(ctx.topo, ctx.servers, ctx.options, ctx.cfg.bw)
        self.layout = PieceLayout(state.sizes, self.plan.pieces)
        self.scaler_layout = PieceLayout([len(state.sizes)], self.plan.pieces)
        self.channel = ctx.channel(self.plan, self.layout)
        self.compressor = COMPRESSORS[ctx.cfg.codec](state.sizes, ctx.cfg.seed * 1000 + ctx.rank)
        self.index = torch.from_numpy(self.layout.index)
        self.buf = torch.empty(self.layout.total)
        self.counts = {"in": ctx.workers, "out": ctx.workers}
        self.all_ranks = {"in": ctx.ranks, "out": ctx.ranks}

    def _share_max(self, it: int, values: np.ndarray, rec: IterationRecord) -> np.ndarray:
        """Element-wise max of a small vector over every rank, through the same plan."""
        buf = values.astype(np.float32).copy()
        self.ctx.check(it, "scalers", "max", "in", buf, self.all_ranks)
        before = wire_snapshot(self.channel.executor)
        self.channel.run(buf, reduce=np.maximum, layout=self.scaler_layout)
        self._count(rec, before, "scalers")
        self.ctx.check(it, "scalers", "max", "out", buf, self.all_ranks)
        return buf

    def _count(self, rec: IterationRecord, before, phase: str = None) -> None:
        """Payload per phase and the engine's transfers of the run that just ended."""
        for (stream, step), (raw, sent) in wire_since(self.channel.executor, before).items():
            rec.add_payload(phase or ("first_step" if step == 0 else "later_steps"), raw, sent)
        rec.transfers += [dict(t, phase=phase or "allreduce") for t in self.channel.executor.drain_transfers()]

    def _all_reduce(self, it: int, flat: np.ndarray, rec: IterationRecord):
        """Compress, all-reduce in piece-major order; (summed compressed layer-major vector, compressor context)."""
        comp = self.compressor
        ctx = comp.prepare(flat, lambda v: self._share_max(it, v, rec))
        payload = torch.from_numpy(np.ascontiguousarray(comp.compress(flat, ctx), dtype=np.float32))
        torch.index_select(payload, 0, self.index, out=self.buf)
        contributor = not self.ctx.is_server
        if contributor:
            self.ctx.check(it, "allreduce", "sum", "in", self.buf.numpy(), self.counts)
        before = wire_snapshot(self.channel.executor)
        self.channel.run(self.buf.numpy(), codec=comp.codec)
        self._count(rec, before)
        if contributor:
            self.ctx.check(it, "allreduce", "sum", "out", self.buf.numpy(), self.counts)
        summed = torch.empty(self.layout.total)
        summed.index_copy_(0, self.index, self.buf)
        return summed.numpy(), ctx

    def synchronize(self, it: int, gradient: torch.Tensor, rec: IterationRecord) -> None:
        """All-reduce the local gradient, average (decompress), SGD step."""
        rec.sync_start = time.time()
        summed, ctx = self._all_reduce(it, gradient.numpy(), rec)
        rec.sync_end = time.time()
        average = self.compressor.decompress(summed, ctx, self.ctx.workers)
        self.state.set_gradient(torch.from_numpy(np.ascontiguousarray(average, dtype=np.float32)))
        self.state.step()

    def serve(self, it: int, rec: IterationRecord) -> None:
        """A dedicated server aggregates what the workers push and sends it back; it does not train."""
        rec.sync_start = time.time()
        self._all_reduce(it, np.zeros(self.layout.total, np.float32), rec)
        rec.sync_end = time.time()

    def close(self) -> None:
        """Close the plan's connections."""
        self.channel.close()
