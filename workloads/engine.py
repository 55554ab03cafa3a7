"""The one engine: executes any Plan for one rank over the Transport, in place on a piece-major buffer.

Execution is dataflow over chunks, as collective libraries do: every piece is cut into chunks, each
connection (peer, stream) carries its chunks in plan order, and a chunk's transfer in step n starts as soon
as this rank has finished every earlier-step transfer of that same chunk -- not when the whole step is
done. The plan still decides what is computed: per chunk, the operations happen in step order, so the
in-memory reference (plan.simulate) and the exact-sum checks hold. Plans whose steps are requests and
replies (iBatch pulls) set meta["barriers"]: then a step starts when this rank's previous steps are done.

Each link keeps the plan's step order too: a rank hands a step-n chunk to a link only after its earlier-
step sends on that link (any stream) are out. Without it, a later step of one stream (BML's thread 1,
step 1 on level 0) competes for a link with an earlier, larger step of another (thread 0, step 0 on
level 0) and delays the whole dependency chain; with it the streams run in the lockstep the plan designs.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from workloads.plan import REDUCE, PieceLayout, Plan
from workloads.transport import Address, Transport

CHUNK_BYTES = 256 << 10


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


def connection_levels(plan: Plan, rank: int, level_of) -> Dict[Tuple[int, int], int]:
    """(peer, stream) -> the link level this rank's transfers with that peer cross (the same both ways)."""
    pinned: Dict[Tuple[int, int], Optional[int]] = {}
    for s, stream in enumerate(plan.streams):
        for step in stream:
            for t in step:
                if rank in (t.src, t.dst):
                    key = (t.dst if t.src == rank else t.src, s)
                    if pinned.get(key) is None:
                        pinned[key] = t.level
    return {key: level_of(key[0], lvl) for key, lvl in pinned.items()}


class _Op:
    """One chunk of one transfer as this rank sees it."""

    __slots__ = ("stream", "step", "piece", "lo", "hi", "send", "peer", "op", "region", "link")

    def __init__(self, stream, step, piece, lo, hi, send, peer, op, region, link=None):
        self.stream, self.step, self.piece, self.lo, self.hi = stream, step, piece, lo, hi
        self.send, self.peer, self.op, self.region, self.link = send, peer, op, region, link


class _Schedule:
    """This rank's chunk operations for one layout: per connection in wire order, and the dependencies."""

    def __init__(self, plan: Plan, rank: int, layout: PieceLayout, chunk_elems: int, barriers: bool,
                 levels: Dict[Tuple[int, int], int]):
        self.queues: Dict[Tuple[str, int, int], List[_Op]] = {}
        self.counts: Dict[object, Dict[int, int]] = {}  # region -> step -> ops
        self.link_counts: Dict[int, Dict[int, int]] = {}  # link level -> step -> send ops
        self.step_ops: Dict[Tuple[int, int], int] = {}  # (stream, step) -> ops of this rank
        for s, stream in enumerate(plan.streams):
            for n, step in enumerate(stream):
                self.step_ops.setdefault((s, n), 0)
                for t in sorted(step, key=lambda t: (t.piece, t.src, t.dst)):
                    if rank not in (t.src, t.dst):
                        continue
                    send = t.src == rank
                    peer = t.dst if send else t.src
                    a, b = layout.bounds[t.piece]
                    cuts = list(range(a, b, chunk_elems)) + [b] if b > a else [a, b]
                    for lo, hi in zip(cuts[:-1], cuts[1:]):
                        region = s if barriers else (t.piece, lo)
                        op = _Op(s, n, t.piece, lo, hi, send, peer, t.op, region,
                                 levels.get((peer, s), 0) if send else None)
                        self.queues.setdefault(("send" if send else "recv", peer, s), []).append(op)
                        steps = self.counts.setdefault(region, {})
                        steps[n] = steps.get(n, 0) + 1
                        if send:
                            link = self.link_counts.setdefault(levels.get((peer, s), 0), {})
                            link[n] = link.get(n, 0) + 1
                        self.step_ops[(s, n)] += 1
        self.steps = {s: len(stream) for s, stream in enumerate(plan.streams)}


class PlanExecutor:
    """Runs one rank's part of a plan: one thread per connection and direction, chunks as dataflow."""

    def __init__(self, plan: Plan, rank: int, layout: PieceLayout, transport: Transport,
                 resolve: Callable[[int, int, Optional[int]], Address],
                 level_of: Callable[[int, Optional[int]], int] = lambda peer, level: level or 0,
                 chunk_bytes: int = CHUNK_BYTES):
        self.plan, self.rank, self.layout, self.transport = plan, rank, layout, transport
        self.barriers = bool(plan.meta.get("barriers"))
        self.chunk_elems = max(1, chunk_bytes // 4)
        self.wire_bytes = 0  # payload bytes this rank sent (encoded size when a codec is used)
        self.wire_by_step: Dict[Tuple[int, int], Tuple[int, int]] = {}  # (stream, step) -> (fp32, sent)
        self.codec_s = 0.0  # CPU seconds its threads spent encoding and decoding (a device would do it)
        self.transfers: List[dict] = []  # per connection, direction and step: bytes, start, end, waiting
        outgoing, incoming = connections(plan, rank)
        self.levels = connection_levels(plan, rank, level_of)
        transport.connect([(p, s, resolve(p, s, lvl)) for p, s, lvl in outgoing], incoming)
        self.pool = ThreadPoolExecutor(max_workers=max(1, len(outgoing) + len(incoming)))
        self.schedules: Dict[int, _Schedule] = {}
        self.count_lock = threading.Lock()

    def _schedule(self, layout: PieceLayout) -> _Schedule:
        key = id(layout)
        if key not in self.schedules:
            self.schedules[key] = (layout, _Schedule(self.plan, self.rank, layout, self.chunk_elems, self.barriers,
                                                     self.levels))
        return self.schedules[key][1]

    def run(self, buf: np.ndarray, reduce=np.add, codec=None, layout: Optional[PieceLayout] = None,
            on_step: Optional[Callable[[int, int], None]] = None) -> None:
        """Synchronize buf (float32, piece-major) in place with the other ranks.

        reduce: how a received piece combines (np.add for sums, np.maximum for shared scalers);
        codec: optional wire codec (encode(array) -> bytes, decode(bytes, count) -> array);
        layout: the pieces of buf when it is not the gradient (e.g. a small vector of scalers);
        on_step: called with (stream, step), in step order per stream, as soon as this rank finished that
        step (iBatch starts the forward pass of a layer batch while later batches are still being pulled).
        """
        sched = self._schedule(layout or self.layout)
        run = _Run(self, sched, buf, reduce, codec, on_step)
        futures = [self.pool.submit(run.connection, key, ops) for key, ops in sched.queues.items()]
        run.report_empty_steps()
        errors = []
        for f in futures:
            try:
                f.result()
            except Exception as exc:  # the first failure, after every connection finished or failed
                errors.append(exc)
        if errors:
            raise errors[0]
        self.transfers.extend(run.transfers)

    def drain_transfers(self) -> List[dict]:
        """The transfers traced since the last call."""
        out, self.transfers = self.transfers, []
        return out

    def close(self) -> None:
        """Stop the threads and close connections."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.transport.close()


class _Run:
    """The state of one run(): completed operations per region and step, locks, errors, the trace."""

    def __init__(self, ex: PlanExecutor, sched: _Schedule, buf, reduce, codec, on_step):
        self.ex, self.sched, self.buf, self.reduce, self.codec, self.on_step = ex, sched, buf, reduce, codec, on_step
        self.left = {region: dict(steps) for region, steps in sched.counts.items()}
        self.link_left = {link: dict(steps) for link, steps in sched.link_counts.items()}
        self.step_left = dict(sched.step_ops)
        self.reported = {s: 0 for s in sched.steps}
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)  # guards the counts; each waiting connection waits on its own
        self.waiting: Dict[int, Tuple[_Op, threading.Condition]] = {}  # thread id -> (op it waits for, its cond)
        self.locks: Dict[object, threading.Lock] = {region: threading.Lock() for region in sched.counts}
        self.failed: Optional[BaseException] = None
        self.transfers: List[dict] = []

    def _ready(self, op: _Op) -> bool:
        if any(count for step, count in self.left[op.region].items() if step < op.step):
            return False
        return op.link is None or not any(count for step, count in self.link_left[op.link].items() if step < op.step)

    def _wait(self, op: _Op) -> float:
        """Block until op's earlier-step operations on its region are done; returns seconds waited."""
        start = time.perf_counter()
        with self.cond:
            if self._ready(op):
                return 0.0
            mine = threading.Condition(self.lock)  # same lock, a private wake-up
            self.waiting[threading.get_ident()] = (op, mine)
            try:
                while not self._ready(op):
                    if self.failed is not None:
                        raise RuntimeError("another transfer of this rank failed") from self.failed
                    mine.wait(1.0)
            finally:
                del self.waiting[threading.get_ident()]
        return time.perf_counter() - start

    def _done(self, op: _Op) -> None:
        with self.cond:
            self.left[op.region][op.step] -= 1
            if op.link is not None:
                self.link_left[op.link][op.step] -= 1
            self.step_left[(op.stream, op.step)] -= 1
            self._wake()
            self._report(op.stream)

    def _wake(self) -> None:
        """Wake only the connections whose next operation became ready (caller holds cond): waking every
        thread of a rank on every chunk costs milliseconds per step on two cores (BML runs 16 per rank)."""
        for waiting, cond in self.waiting.values():
            if self._ready(waiting) or self.failed is not None:
                cond.notify()

    def _report(self, stream: int) -> None:
        """Call on_step for every finished step of the stream, in order (caller holds cond)."""
        if self.on_step is None:
            return
        while self.reported[stream] < self.sched.steps[stream] and \
                self.step_left[(stream, self.reported[stream])] == 0:
            self.on_step(stream, self.reported[stream])
            self.reported[stream] += 1

    def report_empty_steps(self) -> None:
        """Steps in which this rank does nothing are finished from the start."""
        with self.cond:
            for s in self.sched.steps:
                self._report(s)

    def connection(self, key, ops: List[_Op]) -> None:
        """Carry one connection's chunks in order, each as soon as it is ready."""
        direction, peer, stream = key
        level = self.ex.levels.get((peer, stream), 0)
        ports = self.ex.transport.ports.get(key)  # the data's (source, destination) TCP ports: its ECMP path
        current, entry = None, None
        try:
            for op in ops:
                if op.step != current:
                    if entry:
                        self.transfers.append(entry)
                    current = op.step
                    entry = {"stream": stream, "step": op.step, "peer": peer, "dir": direction, "level": level,
                             "ports": ports, "bytes": 0, "wire_bytes": 0, "wait_s": 0.0, "start": None, "end": None}
                entry["wait_s"] += self._wait(op)
                if entry["start"] is None:
                    entry["start"] = time.time()
                sent = self._send(op) if op.send else self._recv(op)
                entry["bytes"] += (op.hi - op.lo) * 4
                entry["wire_bytes"] += sent
                entry["end"] = time.time()
                self._done(op)
            if entry:
                self.transfers.append(entry)
        except BaseException as exc:
            with self.cond:
                if self.failed is None:
                    self.failed = exc
                self._wake()
            raise

    def _send(self, op: _Op) -> int:
        view = self.buf[op.lo:op.hi]
        if self.codec:
            started = time.thread_time()
            payload = self.codec.encode(view)
            coded = time.thread_time() - started
        else:
            payload, coded = memoryview(view), 0.0
        self.ex.transport.send(op.peer, op.stream, op.step, op.piece, payload)
        sent = len(payload) if self.codec else view.nbytes
        with self.ex.count_lock:
            self.ex.codec_s += coded
            self.ex.wire_bytes += sent
            raw, enc = self.ex.wire_by_step.get((op.stream, op.step), (0, 0))
            self.ex.wire_by_step[(op.stream, op.step)] = (raw + view.nbytes, enc + sent)
        return sent

    def _recv(self, op: _Op) -> int:
        view = self.buf[op.lo:op.hi]
        transport = self.ex.transport
        if self.codec:
            data = transport.recv_message(op.peer, op.stream, op.step, op.piece, view.nbytes + view.nbytes // 64 + 1024)
            started = time.thread_time()
            incoming = self.codec.decode(bytes(data), len(view))
            with self.ex.count_lock:
                self.ex.codec_s += time.thread_time() - started
            size = len(data)
        elif op.op == REDUCE:
            incoming = np.empty_like(view)
            transport.recv_into(op.peer, op.stream, op.step, op.piece, memoryview(incoming))
            size = view.nbytes
        else:
            transport.recv_into(op.peer, op.stream, op.step, op.piece, memoryview(view))
            return view.nbytes
        if op.op == REDUCE:
            with self.locks[op.region]:
                self.reduce(view, incoming, out=view)
        else:
            view[:] = incoming
        return size
