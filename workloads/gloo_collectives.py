"""torch.distributed's own gloo collectives on dmlbed's piece-major buffers: each op leaves its result where the
op's plans leave theirs, so one check serves both (workloads.collectives defines what that is)."""

from __future__ import annotations

from typing import Callable, Dict

import numpy as np

from workloads.plan import PieceLayout


class GlooCollective:
    """One op by torch.distributed (gloo) on this rank: run() is the timed call, settle() moves what it received
    into the plan's places (copies outside the timing, as nccl-tests keeps separate buffers)."""

    def __init__(self, dist, op: str, rank: int, ranks: int, root: int):
        if op not in CALLS:
            raise ValueError(f"gloo has no {op} here: valid are {', '.join(CALLS)}")
        self.dist, self.op, self.rank, self.ranks, self.root = dist, op, rank, ranks, root
        self.received = None

    def run(self, buf: np.ndarray, layout: PieceLayout) -> None:
        """The collective on buf (piece-major, one piece per rank, or N x N blocks for all-to-all)."""
        import torch
        views = [torch.from_numpy(buf[a:b]) for a, b in layout.bounds]
        self.received = CALLS[self.op](self, torch, torch.from_numpy(buf), views)

    def settle(self, buf: np.ndarray, layout: PieceLayout) -> None:
        """Copy what run() received aside into the buffer's places."""
        if self.received is None:
            return
        for piece, tensor in self.received.items():
            a, b = layout.bounds[piece]
            buf[a:b] = tensor.numpy()
        self.received = None

    def _allreduce(self, torch, whole, views) -> None:
        self.dist.all_reduce(whole)

    def _allgather(self, torch, whole, views) -> None:
        self.dist.all_gather_into_tensor(whole, views[self.rank].clone())

    def _reducescatter(self, torch, whole, views) -> Dict[int, object]:
        out = torch.empty_like(views[self.rank])
        self.dist.reduce_scatter_tensor(out, whole)
        return {self.rank: out}

    def _broadcast(self, torch, whole, views) -> None:
        self.dist.broadcast(whole, self.root)

    def _reduce(self, torch, whole, views) -> None:
        self.dist.reduce(whole, self.root)

    def _alltoall(self, torch, whole, views) -> Dict[int, object]:
        n, i = self.ranks, self.rank
        mine = torch.cat(views[i * n:(i + 1) * n])  # its row: contiguous already; cat keeps the input apart
        sent, received = [v.numel() for v in views[i * n:(i + 1) * n]], [v.numel() for v in views[i::n]]
        out = torch.empty(sum(received), dtype=mine.dtype)
        self.dist.all_to_all_single(out, mine, output_split_sizes=received, input_split_sizes=sent)
        return {j * n + i: part for j, part in enumerate(out.split(received))}

    def _gather(self, torch, whole, views) -> None:
        self.dist.gather(views[self.rank].clone(), views if self.rank == self.root else None, self.root)

    def _scatter(self, torch, whole, views) -> Dict[int, object]:
        out = torch.empty_like(views[self.rank])
        self.dist.scatter(out, list(views) if self.rank == self.root else None, self.root)
        return {self.rank: out}


CALLS: Dict[str, Callable] = {
    "allreduce": GlooCollective._allreduce, "allgather": GlooCollective._allgather,
    "reducescatter": GlooCollective._reducescatter, "broadcast": GlooCollective._broadcast,
    "reduce": GlooCollective._reduce, "alltoall": GlooCollective._alltoall, "alltoallv": GlooCollective._alltoall,
    "gather": GlooCollective._gather,
    "scatter": GlooCollective._scatter}
