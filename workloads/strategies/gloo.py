"""torch.distributed all_reduce with the gloo backend over the emulated network (an outside reference)."""

from __future__ import annotations

import os
import time
from datetime import timedelta

from workloads.rankconfig import RankConfig
from workloads.records import IterationRecord
from workloads.strategies.base import ModelState, RankContext, Strategy


def join_process_group(cfg: RankConfig):
    """torch.distributed's gloo process group of every rank, over the host's first interface; the module."""
    import torch.distributed as dist
    if cfg.ifname:
        os.environ["GLOO_SOCKET_IFNAME"] = cfg.ifname
    dist.init_process_group("gloo", init_method=f"tcp://{cfg.master}:{cfg.master_port}", rank=cfg.rank,
                            world_size=cfg.ranks, timeout=timedelta(seconds=cfg.timeout))
    return dist


def leave_process_group(dist) -> None:
    """Leave once every rank is done (a rank leaving early aborts the others)."""
    dist.barrier()
    dist.destroy_process_group()


class GlooAllReduce(Strategy):
    """Sum the gradient with dist.all_reduce, average, SGD step."""

    def __init__(self, ctx: RankContext, state: ModelState):
        super().__init__(ctx, state)
        self.dist = join_process_group(ctx.cfg)
        self.counts = {"in": ctx.ranks, "out": ctx.ranks}

    def synchronize(self, it: int, rec: IterationRecord) -> None:
        """all_reduce in place, then the average and an SGD step."""
        gradient = self.state.gradient()
        self.ctx.check(it, "allreduce", "sum", "in", gradient.numpy(), self.counts)
        rec.sync_start = time.time()
        self.dist.all_reduce(gradient)
        rec.sync_end = time.time()
        self.ctx.check(it, "allreduce", "sum", "out", gradient.numpy(), self.counts)
        self.state.set_gradient(gradient / self.ctx.workers)
        self.state.step()

    def close(self) -> None:
        """Leave the process group."""
        leave_process_group(self.dist)
