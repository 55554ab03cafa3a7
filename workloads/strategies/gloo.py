"""torch.distributed all_reduce with the gloo backend over the emulated network (an outside reference)."""

from __future__ import annotations

import os
import time
from datetime import timedelta

import torch

from workloads.records import IterationRecord
from workloads.strategies.base import ModelState, RankContext, Strategy


class GlooAllReduce(Strategy):
    """Sum the gradient with dist.all_reduce, average, SGD step."""

    def __init__(self, ctx: RankContext, state: ModelState):
        super().__init__(ctx, state)
        import torch.distributed as dist
        self.dist = dist
        cfg = ctx.cfg
        if cfg.ifname:
            os.environ["GLOO_SOCKET_IFNAME"] = cfg.ifname
        dist.init_process_group("gloo", init_method=f"tcp://{cfg.master}:{cfg.master_port}",
                                rank=ctx.rank, world_size=ctx.ranks, timeout=timedelta(seconds=cfg.timeout))
        self.counts = {"in": ctx.ranks, "out": ctx.ranks}

    def synchronize(self, it: int, gradient: torch.Tensor, rec: IterationRecord) -> None:
        """all_reduce in place, then the average and an SGD step."""
        self.ctx.check(it, "allreduce", "sum", "in", gradient.numpy(), self.counts)
        rec.sync_start = time.time()
        self.dist.all_reduce(gradient)
        rec.sync_end = time.time()
        self.ctx.check(it, "allreduce", "sum", "out", gradient.numpy(), self.counts)
        self.state.set_gradient(gradient / self.ctx.workers)
        self.state.step()

    def close(self) -> None:
        """Leave the process group once every rank is done (a rank leaving early aborts the others)."""
        self.dist.barrier()
        self.dist.destroy_process_group()
