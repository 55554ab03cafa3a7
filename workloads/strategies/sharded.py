"""Sharded data parallelism (ZeRO, FSDP): the gradient is reduce-scattered so rank r holds the sum of shard r (each
layer's r-th share), rank r steps that shard alone with its own SGD (momentum state for its shard only), and the
updated parameters are all-gathered, so every replica ends the iteration with the same parameters."""

from __future__ import annotations

import time

import numpy as np
import torch

from workloads.algorithms.sharded import plans
from workloads.plan import PieceLayout
from workloads.records import IterationRecord
from workloads.schedule import factor_of
from workloads.strategies.base import ModelState, RankContext, Strategy, run_recorded


class ShardedDataParallel(Strategy):
    """Reduce-scatter the gradient, SGD on this rank's shard, all-gather the parameters."""

    def __init__(self, ctx: RankContext, state: ModelState):
        super().__init__(ctx, state)
        cfg = ctx.cfg
        reduce_scatter, all_gather = plans(ctx.ranks, ctx.options)
        self.layout = PieceLayout(state.sizes, ctx.ranks)
        self.scatter = ctx.channel(reduce_scatter, self.layout, 0)
        self.gather = ctx.channel(all_gather, self.layout, 1)
        self.index = torch.from_numpy(self.layout.index)
        self.mine = slice(*self.layout.bounds[ctx.rank])
        self.gradients = torch.empty(self.layout.total)  # piece-major
        self.parameters = torch.empty(self.layout.total)  # piece-major, every replica's (identical at the start)
        torch.index_select(torch.from_numpy(state.parameters_flat()), 0, self.index, out=self.parameters)
        self.shard = torch.nn.Parameter(self.parameters[self.mine].clone())
        self.optimizer = torch.optim.SGD([self.shard], lr=cfg.lr, momentum=cfg.momentum,
                                         weight_decay=cfg.weight_decay)  # the state of this shard only
        factor = factor_of(cfg.lr_schedule)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda it: factor(it, cfg.iters))
        self.counts = {"in": ctx.ranks, "out": ctx.ranks}

    def synchronize(self, it: int, rec: IterationRecord) -> None:
        """Reduce-scatter, step this rank's shard, all-gather the parameters and load them."""
        torch.index_select(self.state.gradient(), 0, self.index, out=self.gradients)
        grads = self.gradients.numpy()
        self.ctx.check(it, "reducescatter", "sharded", "in", grads, self.counts)
        rec.sync_start = time.time()
        run_recorded(self.scatter, grads, "reduce_scatter", rec, layout=self.layout)
        self.shard.grad = self.gradients[self.mine] / self.ctx.workers
        if it == 0:
            kept = np.zeros_like(grads)
            kept[self.mine] = grads[self.mine]
            self.ctx.check(it, "reducescatter", "sharded", "out", kept, self.counts)
        self.optimizer.step()
        self.scheduler.step()
        self.parameters[self.mine] = self.shard.detach()
        run_recorded(self.gather, self.parameters.numpy(), "all_gather", rec, layout=self.layout)
        rec.sync_end = time.time()
        self.state.load(self.layout.from_piece_major(self.parameters.numpy()))
        rec.split["shard_of_model"] = (self.mine.stop - self.mine.start) / self.layout.total

    def close(self) -> None:
        """Close both collectives' connections."""
        self.scatter.close()
        self.gather.close()
