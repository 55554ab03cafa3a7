"""All-reduce by a dmlbed plan (ps, ring, hd, bml, hier, blueconnect, twolevel, ...) on the one engine, with an
optional codec (workloads/codecs/) wrapped around it, or for a gathering codec the algorithm's all-gather of every
rank's payload: PlanSync sums any flat vector of layers; PlanAllReduce runs it on the whole gradient after backward;
the DDP hook (workloads/comm_hook.py) runs it on each bucket during backward."""

from __future__ import annotations

import time
from typing import Dict, Optional, Sequence, Tuple

import numpy as np
import torch

from workloads.codecs import COMPRESSORS
from workloads.codecs.base import typed_options
from workloads.models import tensor_sizes
from workloads.plan import PieceLayout
from workloads.records import IterationRecord
from workloads.strategies.base import ComputeClock, ModelState, RankContext, Strategy, wire_since, wire_snapshot

SCALER_CHECKS = {"allreduce": "scalers"}  # the whole gradient's scaler check keeps its name in summaries


def add_codec_time(rec: IterationRecord, seconds: float) -> None:
    """Count CPU seconds of gradient compression (encode, decode, ternarize) in the iteration's record."""
    rec.split["codec_s"] = rec.split.get("codec_s", 0.0) + seconds


class PlanSync:
    """Sums flat vectors of layers over every contributor with the algorithm's plan, compressed or not. Layouts
    and compressors are kept per layer-size tuple (the whole gradient, or one DDP bucket)."""

    def __init__(self, ctx: RankContext, port_offset: int = 0):
        self.ctx = ctx
        sizes = tensor_sizes(ctx.cfg.model)
        self.codec = COMPRESSORS[ctx.cfg.codec]
        self.codec_options = typed_options(self.codec, ctx.cfg.codec_options)
        if self.codec.gathers:  # every rank's payload to every rank: the algorithm's all-gather
            self.plan = ctx.algorithm.gather_plan(ctx.ranks)
        else:
            self.plan = ctx.algorithm.build_plan(ctx.topo, ctx.servers, ctx.options, ctx.cfg.bw, 4 * sum(sizes), sizes)
        self.channel = ctx.channel(self.plan, PieceLayout([1], self.plan.pieces), port_offset)
        self.layouts: Dict[Tuple[int, ...], Tuple[PieceLayout, PieceLayout, torch.Tensor, torch.Tensor,
                                                  torch.Tensor]] = {}
        self.compressors: Dict[Tuple[int, ...], object] = {}
        self.gather_buffers: Dict[Tuple[int, ...], np.ndarray] = {}  # a gathering codec's N payloads, per layer sizes
        self.expected: Optional[set] = None  # the layer sizes prepare() was given
        self.counts = {"in": ctx.workers, "out": ctx.workers}
        self.all_ranks = {"in": ctx.ranks, "out": ctx.ranks}

    def _layouts(self, sizes: Tuple[int, ...]):
        """(layout, scalers' layout, gather index, piece-major buffer, layer-major result) for these layer sizes:
        the buffers are reused, since allocating tens of MB per synchronization costs page faults every time (kept
        only for the layouts prepared, when some were)."""
        if sizes in self.layouts:
            return self.layouts[sizes]
        layout = self.plan.piece_layout(list(sizes))
        entry = (layout, self.plan.scaler_layout(len(sizes)), torch.from_numpy(layout.index),
                 torch.empty(layout.total), torch.empty(layout.total))
        if self.expected is None or sizes in self.expected or self.codec.lowrank:  # (a low-rank codec's factors)
            self.layouts[sizes] = entry
        return entry

    def prepare(self, layouts: Sequence[Sequence[int]]) -> None:
        """Build the layouts of these layer sizes now (a layout of tens of MB takes a tenth of a second of CPU: in
        the first timed iteration, nine ranks building theirs at once start the collective out of step) and keep
        no others."""
        if self.codec.gathers:  # its buffers are the payloads', made on first use
            return
        self.expected = {tuple(sizes) for sizes in layouts}
        for sizes in set(self.layouts) - self.expected:
            del self.layouts[sizes]
        for sizes in self.expected:
            self._layouts(sizes)

    def _compressor(self, sizes: Tuple[int, ...], shapes: Optional[Sequence[Tuple[int, ...]]] = None):
        if sizes not in self.compressors:
            seed = self.ctx.cfg.seed * 1000 + self.ctx.rank + len(self.compressors)
            extra = {"shapes": shapes} if self.codec.lowrank else {}
            self.compressors[sizes] = self.codec(list(sizes), seed, self.codec_options, **extra)
        return self.compressors[sizes]

    def _count(self, rec: IterationRecord, before, phase: Optional[str] = None, tag: Optional[dict] = None,
               dense: float = 1.0) -> None:
        """Payload per phase and the engine's transfers of the run that just ended (dense: the fp32 bytes each byte
        sent stands for, where a gathering codec's payload is what moved)."""
        for (stream, step), (raw, sent) in wire_since(self.channel.executor, before).items():
            rec.add_payload(phase or ("first_step" if step == 0 else "later_steps"), raw * dense, sent)
        rec.transfers += [dict(t, phase=phase or "allreduce", **(tag or {}))
                          for t in self.channel.executor.drain_transfers()]

    def _share_max(self, check: Optional[str], values: np.ndarray, scalers: PieceLayout,
                   rec: IterationRecord) -> np.ndarray:
        """Element-wise max of a small vector over every rank, through the same plan."""
        buf = values.astype(np.float32).copy()
        check = check and SCALER_CHECKS.get(check, f"{check}-scalers")
        if check:
            self.ctx.save_check(check, "max", "in", buf, self.all_ranks)
        before = wire_snapshot(self.channel.executor)
        self.channel.run(buf, reduce=np.maximum, layout=scalers)
        self._count(rec, before, "scalers")
        if check:
            self.ctx.save_check(check, "max", "out", buf, self.all_ranks)
        return buf

    def stage(self, flat: np.ndarray, sizes: Sequence[int], rec: IterationRecord,
              shapes: Optional[Sequence[Tuple[int, ...]]] = None):
        """The compressor's local work on the device before any exchange (for sum(staged=...)): a gathering codec's
        whole encoding, a low-rank codec's first factors; its CPU seconds are recorded apart (codec_staged_s): they
        belong to the compute time, not the synchronization."""
        started = time.thread_time()
        comp = self._compressor(tuple(sizes), shapes)
        if comp.gathers:
            staged = comp.contribution(np.ascontiguousarray(flat, dtype=np.float32))
        elif comp.lowrank:
            staged = comp.first(flat)
        else:
            staged = comp.stage(comp.fed(flat))
        rec.split["codec_staged_s"] = rec.split.get("codec_staged_s", 0.0) + time.thread_time() - started
        return staged

    def sum(self, flat: np.ndarray, sizes: Sequence[int], rec: IterationRecord, check: Optional[str] = None,
            tag: Optional[dict] = None, staged=None,
            shapes: Optional[Sequence[Tuple[int, ...]]] = None) -> Tuple[np.ndarray, object, object]:
        """Compress, all-reduce in piece-major order; (summed compressed layer-major vector -- valid until the next
        call with these sizes --, compressor, its context). check: the name under which this rank's inputs and
        outputs are saved for the exact-sum check (None: not this time); tag: fields added to every traced transfer
        (a DDP bucket's index); staged: what stage() made of flat already (else it is staged here); shapes: the
        layers' tensor shapes (a low-rank codec's matrices)."""
        sizes = tuple(sizes)
        if self.codec.gathers:
            return self._gather(flat, sizes, rec, check, tag, staged)
        if self.codec.lowrank:
            return self._lowrank(flat, sizes, rec, check, tag, shapes, staged)
        layout, scalers, index, buf, summed = self._layouts(sizes)
        comp = self._compressor(sizes)
        started = time.thread_time()
        if staged is None:
            staged = comp.stage(comp.fed(flat))
        ctx = comp.prepare(staged, lambda v: self._share_max(check, v, scalers, rec))
        payload = torch.from_numpy(np.ascontiguousarray(comp.compress(staged, ctx), dtype=np.float32))
        if comp.feedback:
            comp.remember(payload.numpy(), ctx)
        coded = time.thread_time() - started  # the scalers' exchange waits, it does not use the CPU
        torch.index_select(payload, 0, index, out=buf)
        contributor = not self.ctx.is_server
        if check and contributor:
            self.ctx.save_check(check, comp.check, "in", buf.numpy(), self.counts)
        before, engine_codec = wire_snapshot(self.channel.executor), self.channel.executor.codec_s
        self.channel.run(buf.numpy(), reduce=comp.reduce, codec=comp.codec, layout=layout)
        self._count(rec, before, tag=tag)
        if comp.codec is not None:
            add_codec_time(rec, coded + self.channel.executor.codec_s - engine_codec)
        if check and contributor:
            self.ctx.save_check(check, comp.check, "out", buf.numpy(), self.counts)
        summed.index_copy_(0, index, buf)
        return summed.numpy(), comp, ctx

    def _gather(self, flat: np.ndarray, sizes: Tuple[int, ...], rec: IterationRecord, check: Optional[str],
                tag: Optional[dict], staged=None) -> Tuple[np.ndarray, object, object]:
        """A gathering codec: this rank's payload (staged: encoded on the device already) into its block, the
        all-gather, every block decoded and combined in rank order (the same on every rank); (what they combine to,
        compressor, None)."""
        comp = self._compressor(sizes)
        started = time.thread_time()
        words, decoded = staged if staged is not None else comp.contribution(np.ascontiguousarray(flat, np.float32))
        if sizes not in self.gather_buffers:
            self.gather_buffers[sizes] = np.zeros(len(words) * self.ctx.ranks, np.uint32)
        buf = self.gather_buffers[sizes]
        width = len(words)
        buf[self.ctx.rank * width:(self.ctx.rank + 1) * width] = words
        coded = time.thread_time() - started
        if check:
            self.ctx.save_check(check, comp.check, "in", decoded, self.all_ranks)
        before, engine_codec = wire_snapshot(self.channel.executor), self.channel.executor.codec_s
        self.channel.run(buf.view(np.float32), layout=PieceLayout.per_layer([width] * self.ctx.ranks))
        self._count(rec, before, tag=tag, dense=sum(sizes) / width)
        started = time.thread_time()
        gathered = comp.gathered([buf[r * width:(r + 1) * width] for r in range(self.ctx.ranks)])
        add_codec_time(rec, coded + time.thread_time() - started + self.channel.executor.codec_s - engine_codec)
        if comp.feedback:
            rec.split["codec_residual_norm"] = rec.split.get("codec_residual_norm", 0.0) + comp.residual_norm
        if check:
            self.ctx.save_check(check, comp.check, "out", gathered, self.all_ranks)
        return gathered, comp, None

    def _sum_phase(self, vector: np.ndarray, sizes: Tuple[int, ...], rec: IterationRecord, check: Optional[str],
                   tag: Optional[dict], dense: float) -> np.ndarray:
        """One plain fp32 all-reduce of a layer-major vector of these sizes through the plan (a copy of the sum);
        dense: the gradient's values each value sent stands for."""
        if not sizes:
            return np.zeros(0, np.float32)
        layout, _, index, buf, summed = self._layouts(sizes)
        torch.index_select(torch.from_numpy(vector), 0, index, out=buf)
        if check and not self.ctx.is_server:
            self.ctx.save_check(check, "sum", "in", buf.numpy(), self.counts)
        before = wire_snapshot(self.channel.executor)
        self.channel.run(buf.numpy(), reduce=np.add, layout=layout)
        self._count(rec, before, tag=tag, dense=dense)
        if check and not self.ctx.is_server:
            self.ctx.save_check(check, "sum", "out", buf.numpy(), self.counts)
        summed.index_copy_(0, index, buf)
        return summed.numpy().copy()

    def _lowrank(self, flat: np.ndarray, sizes: Tuple[int, ...], rec: IterationRecord, check: Optional[str],
                 tag: Optional[dict], shapes, staged=None) -> Tuple[np.ndarray, object, object]:
        """A low-rank codec: its first factors (staged: made on the device already) and the tensors it leaves whole
        summed by the plan, then its second factors, made from the first sum, summed by the plan again; (the second
        sum, compressor, None)."""
        comp = self._compressor(sizes, shapes)
        dense = sum(sizes) / max(1, sum(comp.sizes[0]) + sum(comp.sizes[1]))
        started = time.thread_time()
        first = comp.first(flat) if staged is None else staged
        coded = time.thread_time() - started
        summed = self._sum_phase(first, tuple(comp.sizes[0]), rec, check and f"{check}-first", tag, dense)
        started = time.thread_time()
        second = comp.second(summed)
        add_codec_time(rec, coded + time.thread_time() - started)
        return self._sum_phase(second, tuple(comp.sizes[1]), rec, check and f"{check}-second", tag, dense), comp, None

    def average(self, flat: np.ndarray, sizes: Sequence[int], rec: IterationRecord, check: Optional[str] = None,
                tag: Optional[dict] = None, staged=None,
                shapes: Optional[Sequence[Tuple[int, ...]]] = None) -> np.ndarray:
        """The workers' averaged vector (decompressed)."""
        summed, comp, ctx = self.sum(flat, sizes, rec, check, tag, staged, shapes)
        started = time.thread_time()
        average = np.ascontiguousarray(comp.decompress(summed, ctx, self.ctx.workers), dtype=np.float32)
        if comp.codec is not None or comp.gathers or comp.lowrank:
            add_codec_time(rec, time.thread_time() - started)
        if comp.lowrank or (comp.feedback and not comp.gathers):
            rec.split["codec_residual_norm"] = rec.split.get("codec_residual_norm", 0.0) + comp.residual_norm
        return average

    def close(self) -> None:
        """Close the plan's connections."""
        self.channel.close()


class PlanAllReduce(Strategy):
    """Every contributor ends each iteration with the sum of all local gradients (compressed or not) and
    applies the average; dedicated servers (if the plan has them) aggregate and send back."""

    def __init__(self, ctx: RankContext, state: ModelState):
        super().__init__(ctx, state)
        self.sync = PlanSync(ctx)
        self.sync.prepare([state.sizes])
        self.staged = None

    def backward(self, loss: torch.Tensor, clock: ComputeClock, rec: IterationRecord) -> None:
        """Backward, then the compressor's local work, both on the device (charged to --compute-time): the papers
        ternarize, sparsify, quantize or factor on the accelerator before the exchange starts."""
        super().backward(loss, clock, rec)
        codec = COMPRESSORS[self.ctx.cfg.codec]
        if codec.stages or codec.gathers or codec.lowrank:
            with clock.segment():
                self.staged = self.sync.stage(self.state.gradient().numpy(), self.state.sizes, rec, self.state.shapes)

    def synchronize(self, it: int, rec: IterationRecord) -> None:
        """All-reduce the local gradient, average (decompress), SGD step."""
        gradient = self.state.gradient()
        rec.sync_start = time.time()
        staged, self.staged = self.staged, None
        average = self.sync.average(gradient.numpy(), self.state.sizes, rec, check="allreduce" if it == 0 else None,
                                    staged=staged, shapes=self.state.shapes)
        rec.sync_end = time.time()
        self.state.set_gradient(torch.from_numpy(average))
        self.state.step()

    def serve(self, it: int, rec: IterationRecord) -> None:
        """A dedicated server aggregates what the workers push and sends it back; it does not train."""
        rec.sync_start = time.time()
        self.sync.sum(np.zeros(sum(self.state.sizes), np.float32), self.state.sizes, rec,
                      check="allreduce" if it == 0 else None, shapes=self.state.shapes)
        rec.sync_end = time.time()

    def close(self) -> None:
        """Close the plan's connections."""
        self.sync.close()


