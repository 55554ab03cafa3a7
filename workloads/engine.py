"""The one engine: executes any Plan for one rank over the Transport, in place on a piece-major buffer."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from workloads.plan import REDUCE, PieceLayout, Plan
from workloads.transport import Address, Transport


def connections(plan: Plan, rank: int) -> Tuple[List[Tuple[int, int, Optional[int]]], List[Tuple[int, int]]]:
    """(peer, stream, level) this rank sends to and (peer, stream) it receives from."""
    out, inc = {}, set()
    for s, stream in enumerate(plan.streams):
        for step in stream:
            for t in step:
                if t.src == rank:
                    out[(t.dst, s)] = t.level
                if t.dst == rank:
                    inc.add((t.src, s))
    return [(p, s, lvl) for (p, s), lvl in sorted(out.items())], sorted(inc)


class PlanExecutor:
    """Runs one rank's part of a plan: streams in parallel threads, each step's transfers concurrently."""

    def __init__(self, plan: Plan, rank: int, layout: PieceLayout, transport: Transport,
                 resolve: Callable[[int, int, Optional[int]], Address]):
        self.plan, self.rank, self.layout, self.transport = plan, rank, layout, transport
        self.trace: Optional[list] = None  # set to [] to record every transfer's start/end
        self.wire_bytes = 0  # payload bytes this rank sent (encoded size when a codec is used)
        self.wire_by_step: Dict[Tuple[int, int], Tuple[int, int]] = {}  # (stream, step) -> (fp32, sent)
        self.count_lock = threading.Lock()
        self._reduce, self._codec, self._layout, self._on_step = np.add, None, layout, None
        outgoing, incoming = connections(plan, rank)
        transport.connect([(p, s, resolve(p, s, lvl)) for p, s, lvl in outgoing], incoming)
        fan = max([1] + [len({(t.src, t.dst) for t in step if rank in (t.src, t.dst)})
                         for stream in plan.streams for step in stream])
        # stream runners wait on their own transfer jobs in the same pool: room for both
        self.pool = ThreadPoolExecutor(max_workers=len(plan.streams) * (fan + 1))
        self.locks: Dict[int, threading.Lock] = {p: threading.Lock() for p in range(plan.pieces)}
        # One job per peer and direction per step; a connection carries its pieces in piece order.
        self.my_steps = [[self._group(step) for step in stream] for stream in plan.streams]

    def _group(self, step) -> List[list]:
        groups: Dict[Tuple[str, int], list] = {}
        for t in sorted(step, key=lambda t: t.piece):
            if t.src == self.rank:
                groups.setdefault(("send", t.dst), []).append(t)
            elif t.dst == self.rank:
                groups.setdefault(("recv", t.src), []).append(t)
        return list(groups.values())

    def run(self, buf: np.ndarray, reduce=np.add, codec=None, layout: Optional[PieceLayout] = None,
            on_step: Optional[Callable[[int, int], None]] = None) -> None:
        """Synchronize buf (float32, piece-major) in place with the other ranks.

        reduce: how a received piece combines (np.add for sums, np.maximum for shared scalers);
        codec: optional wire codec (encode(array) -> bytes, decode(bytes, count) -> array);
        layout: the pieces of buf when it is not the gradient (e.g. a small vector of scalers);
        on_step: called with (stream, step) as soon as this rank finished that step (iBatch uses it to
        start the forward pass of a layer batch while later batches are still being pulled).
        """
        self._reduce, self._codec, self._on_step = reduce, codec, on_step
        self._layout = layout or self.layout
        futures = [self.pool.submit(self._run_stream, s, buf) for s in range(len(self.plan.streams))]
        for f in futures:
            f.result()

    def _run_stream(self, s: int, buf: np.ndarray) -> None:
        for n, transfers in enumerate(self.my_steps[s]):
            if not transfers:
                if self._on_step:
                    self._on_step(s, n)
                continue
            jobs = [self.pool.submit(self._transfer_all, s, n, group, buf) for group in transfers]
            errors = []
            for job in jobs:
                try:
                    job.result()
                except Exception as exc:  # report the first failure after all finished or failed
                    errors.append(exc)
            if errors:
                raise errors[0]
            if self._on_step:
                self._on_step(s, n)

    def _transfer_all(self, s: int, n: int, group, buf: np.ndarray) -> None:
        for t in group:
            started = time.time()
            self._transfer(s, n, t, buf)
            if self.trace is not None:
                a, b = self._layout.bounds[t.piece]
                self.trace.append({"stream": s, "step": n, "piece": t.piece, "src": t.src, "dst": t.dst,
                                   "op": t.op, "bytes": (b - a) * 4, "start": started, "end": time.time()})

    def _transfer(self, s: int, n: int, t, buf: np.ndarray) -> None:
        a, b = self._layout.bounds[t.piece]
        view = buf[a:b]
        codec = self._codec
        if t.src == self.rank:
            payload = codec.encode(view) if codec else memoryview(view)
            self.transport.send(t.dst, s, n, t.piece, payload)
            with self.count_lock:
                sent = len(payload) if codec else view.nbytes
                self.wire_bytes += sent
                raw, enc = self.wire_by_step.get((s, n), (0, 0))
                self.wire_by_step[(s, n)] = (raw + view.nbytes, enc + sent)
            return
        if codec:
            data = self.transport.recv_message(t.src, s, n, t.piece, view.nbytes + view.nbytes // 64 + 1024)
            incoming = codec.decode(bytes(data), len(view))
        elif t.op == REDUCE:
            incoming = np.empty_like(view)
            self.transport.recv_into(t.src, s, n, t.piece, memoryview(incoming))
        else:
            self.transport.recv_into(t.src, s, n, t.piece, memoryview(view))
            return
        if t.op == REDUCE:
            with self.locks[t.piece]:
                self._reduce(view, incoming, out=view)
        else:
            view[:] = incoming

    def close(self) -> None:
        """Stop the thread pool and close connections."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.transport.close()
