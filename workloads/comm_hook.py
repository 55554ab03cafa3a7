"""dmlbed's algorithms as PyTorch DDP communication hooks. DistributedDataParallel buckets the gradients and hands
each bucket over as soon as backward has produced it; the hook runs the algorithm's plan on the bucket through
dmlbed's engine over the emulated NICs (BML's threads over both BCube levels, BlueConnect's stages, with or
without TernGrad), on one sync thread, buckets in the order they arrive, and records every bucket. An algorithm
without a plan (gloo) keeps DDP's own all-reduce, timed the same way.

In a user's own DDP script under `dmlbed launch --algo A`, one line opts in:

    model = DistributedDataParallel(model)
    dmlbed.ddp.register(model)   # the hook of the algorithm `dmlbed launch --algo` chose
"""

import hashlib
import json
import os
import queue
import threading
import time
from typing import Dict, List, Optional

import torch

from workloads.rankconfig import RANK_CONFIG_ENV, RankConfig
from workloads.records import IterationRecord

CHECKED_ITERATIONS = 2  # each bucket's exact sum is checked in the first iterations (DDP's first, and rebuilt)


class BucketHook:
    """A DDP comm hook's state: the rank, its algorithm's PlanSync (None: DDP's own all-reduce), one sync thread,
    and the records of every bucket (written to the rank's buckets file as they complete)."""

    def __init__(self, ctx, own_transfers: bool = False):
        self.ctx = ctx
        self.sync = None
        if ctx.algorithm.plan is not None:
            from workloads.strategies.allreduce import PlanSync
            self.sync = PlanSync(ctx)
        self.own_transfers = own_transfers  # launch: no iteration records take the transfers, write them here
        self.iteration = -1
        self.pending: "queue.Queue" = queue.Queue()
        self.done: List[dict] = []  # completed buckets since the last drain, with their transfers and payload
        self.lock = threading.Lock()
        self.file = open(ctx.files.buckets(ctx.rank), "a", buffering=1)
        self.transfers_file = open(ctx.files.transfers(ctx.rank), "a") if own_transfers else None
        self.thread = threading.Thread(target=self._run, name="dmlbed-buckets", daemon=True)
        self.thread.start()

    def expect(self, buckets: List[List[int]]) -> None:
        """Prepare the layouts of the buckets DDP will hand over (by their parameters' sizes), before training."""
        if self.sync is not None:
            self.sync.prepare(buckets)

    @staticmethod
    def hook(state: "BucketHook", bucket) -> torch.futures.Future[torch.Tensor]:  # DDP checks this annotation
        """What DDP calls per bucket: queue it for the sync thread, hand back a future at once."""
        if bucket.index() == 0:
            state.iteration += 1
        if state.sync is None:
            return state._default(bucket)
        fut = torch.futures.Future()
        sizes = [p.numel() for p in bucket.parameters()]
        shapes = [tuple(p.shape) for p in bucket.parameters()]
        state.pending.put((state.iteration, bucket.index(), bucket.buffer(), sizes, shapes, time.time(), fut))
        return fut

    def _default(self, bucket):
        """DDP's own all-reduce over the process group, timed."""
        from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
        iteration, index, ready = self.iteration, bucket.index(), time.time()
        elements = bucket.buffer().numel()

        def finished(f):
            self._write(self._record(iteration, index, elements, len(bucket.parameters()), ready, ready, time.time(),
                                     None), None, None)
            return f.value()
        return allreduce_hook(None, bucket).then(finished)

    def _run(self) -> None:
        while True:
            item = self.pending.get()
            if item is None:
                return
            iteration, index, buf, sizes, shapes, ready, fut = item
            rec = IterationRecord(self.ctx.rank, iteration, self.ctx.role)
            try:
                start = time.time()
                # DDP rebuilds its buckets after the first iteration: both layouts are checked
                check = f"iteration{iteration}-bucket{index}" if iteration < CHECKED_ITERATIONS else None
                average = self.sync.average(buf.numpy(), sizes, rec, check, tag={"bucket": index}, shapes=shapes)
                line = self._record(iteration, index, buf.numel(), len(sizes), ready, start, time.time(), rec)
                fut.set_result(torch.from_numpy(average))  # DDP copies it into its bucket
                # the digest shows a launch's replicas stay identical (a run compares the parameters at the end)
                self._write(line, rec, hashlib.sha256(average.tobytes()).hexdigest()[:16] if self.own_transfers
                            else None)
            except BaseException as exc:  # DDP raises it in backward: the rank fails with the reason
                fut.set_exception(exc)

    def _record(self, iteration: int, index: int, elements: int, params: int, ready: float, start: float,
                end: float, rec: Optional[IterationRecord]) -> dict:
        """One bucket's record, kept with its transfers and payload for the iteration's record (drain)."""
        by_level: Dict[str, int] = {}
        for t in (rec.transfers if rec else []):
            if t["dir"] == "send":
                by_level[f"L{t['level']}"] = by_level.get(f"L{t['level']}", 0) + t["wire_bytes"]
        line = {"rank": self.ctx.rank, "iteration": iteration, "bucket": index, "elements": elements,
                "params": params, "ready": ready, "start": start, "end": end, "sent_by_level": by_level}
        with self.lock:
            self.done.append({"line": line, "rec": rec})
        return line

    def _write(self, line: dict, rec: Optional[IterationRecord], digest: Optional[str]) -> None:
        """Write a bucket's line (digest: of the averaged gradient handed back, the same on every rank while the
        replicas stay identical), and its transfers when no iteration record takes them."""
        self.file.write(json.dumps(dict(line, digest=digest)) + "\n")
        if self.transfers_file and rec:
            for t in rec.transfers:
                self.transfers_file.write(json.dumps(dict(t, rank=self.ctx.rank, iteration=line["iteration"])) + "\n")
            self.transfers_file.flush()

    def drain(self) -> List[dict]:
        """The buckets completed since the last call: {'line': record, 'rec': IterationRecord or None}."""
        with self.lock:
            out, self.done = self.done, []
        return out

    def close(self) -> None:
        """Stop the sync thread, close the connections and files."""
        self.pending.put(None)
        self.thread.join(timeout=5)
        if self.sync is not None:
            self.sync.close()
        self.file.close()
        if self.transfers_file:
            self.transfers_file.close()


def register(ddp_model, config: Optional[str] = None) -> Optional[BucketHook]:
    """Make a DistributedDataParallel model synchronize with the algorithm `dmlbed launch --algo` chose (its
    rank config from DMLBED_RANK_CONFIG, or config); without dmlbed (the variable unset) it does nothing, so the
    same script runs anywhere. Returns the hook's state."""
    path = config or os.environ.get(RANK_CONFIG_ENV)
    if not path:
        return None
    from workloads.strategies.base import RankContext
    ctx = RankContext(RankConfig.read(path))
    hook = BucketHook(ctx, own_transfers=True)
    ddp_model.register_comm_hook(hook, BucketHook.hook)
    return hook
