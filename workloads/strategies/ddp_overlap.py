"""Synchronization overlapped with backward, as practitioners train: the model in PyTorch's
DistributedDataParallel (buckets of --bucket), each bucket synchronized by the algorithm's DDP communication
hook (workloads/comm_hook.py) as soon as backward produced it; with a device time, backward is paced gradient by
gradient (workloads/pacing.py) so buckets become ready when that device would produce them."""

from __future__ import annotations

import time

from workloads.comm_hook import BucketHook
from workloads.models import ready_order, tensor_flops
from workloads.overlap import FORWARD_SHARE, ddp_buckets
from workloads.pacing import BackwardPacer
from workloads.records import IterationRecord
from workloads.strategies.base import ComputeClock, ModelState, RankContext, Strategy, device_priority
from workloads.strategies.gloo import join_process_group, leave_process_group


class DDPOverlap(Strategy):
    """DDP with dmlbed's hook; records per bucket, and per iteration the communication exposed past backward."""

    def __init__(self, ctx: RankContext, state: ModelState):
        super().__init__(ctx, state)
        from torch.nn.parallel import DistributedDataParallel
        self.dist = join_process_group(ctx.cfg)
        self.ddp = DistributedDataParallel(state.model, bucket_cap_mb=ctx.cfg.bucket_mb, broadcast_buffers=False)
        self.hook = BucketHook(ctx)
        self.ddp.register_comm_hook(self.hook, BucketHook.hook)
        model = ctx.cfg.model
        sizes, order = state.sizes, ready_order(model)
        self.hook.expect([[sizes[i] for i in b] for b in ddp_buckets(sizes, ctx.cfg.bucket_mb, order)])
        self.pacer = BackwardPacer(state.params, tensor_flops(model), ctx.cfg.compute_time, ctx.cfg.dilation,
                                   ready_order(model))

    def forward(self, x, clock: ComputeClock):
        """The forward pass through DDP: the segments before backward (forward, loss) take FORWARD_SHARE of the
        device's compute in all, the pacer the rest."""
        clock.forward_share = FORWARD_SHARE
        with clock.segment():
            return self.ddp(x)

    def backward(self, loss, clock: ComputeClock, rec: IterationRecord) -> None:
        """Backward, paced per gradient; DDP synchronizes each bucket meanwhile and returns once all are done."""
        self.pacer.begin(clock.device_s)
        with device_priority(clock.device_s is not None):
            loss.backward()
        done = time.time()
        compute = self.pacer.end()
        clock.add(compute["start"], compute["end"], compute["real"], compute["cpu"], compute["elapsed"])
        buckets = self.hook.drain()
        for b in buckets:
            if b["rec"] is not None:
                for phase, (raw, sent) in b["rec"].payload.items():
                    rec.add_payload(phase, raw, sent)
                rec.transfers += b["rec"].transfers
                for key, seconds in b["rec"].split.items():  # per-bucket seconds (codec_s) add up
                    rec.split[key] = rec.split.get(key, 0.0) + seconds
        lines = [b["line"] for b in buckets]
        rec.sync_start = min((b["start"] for b in lines), default=compute["end"])
        rec.sync_end = max((b["end"] for b in lines), default=done)
        rec.split["exposed_s"] = max(0.0, rec.sync_end - compute["end"])
        rec.split["buckets"] = float(len(lines))
        rec.marks["backward"] = [compute["start"], compute["end"]]

    def synchronize(self, it: int, rec: IterationRecord) -> None:
        """DDP left the averaged gradient in .grad: the SGD step."""
        self.state.step()

    def close(self) -> None:
        """Stop the hook, leave the process group."""
        self.pacer.close()
        self.hook.close()
        leave_process_group(self.dist)
