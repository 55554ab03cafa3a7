"""Parameter Flow: workers push (DVF-filtered, LZ4-compressed) updates, servers aggregate, filter and broadcast
them down the TSB overlay, every worker applies them locally; BSP (staleness 0) or UCC-SSP (a fast worker's
extra updates are folded into the round they reach the server in)."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from typing import Dict, List

import numpy as np

from workloads.compression import LZ4Codec
from workloads.algorithms.pflow import DVF, broadcast_plan, overlay_from, parse_dvf, push_plan
from workloads.plan import PieceLayout
from workloads.records import IterationRecord
from workloads.strategies.base import ModelState, RankContext, Strategy, wire_snapshot, wire_total

PUSH, BROADCAST = 0, 1  # port offsets


class ParameterFlow(Strategy):
    """Push/broadcast of updates with the DVF filter and the TSB overlay; SSP runs ahead up to --staleness."""

    def __init__(self, ctx: RankContext, state: ModelState):
        super().__init__(ctx, state)
        opts = ctx.options
        hosts, servers = len(ctx.topo.hosts), ctx.servers
        blocks = opts.pf_blocks
        self.layout = PieceLayout([state.total], servers * blocks)  # one layer: piece-major is the flat order
        self.overlay = overlay_from(ctx.cfg.shared, opts.pf_tree, ctx.topo, servers)
        self.push = ctx.channel(push_plan(hosts, servers, blocks), self.layout, PUSH)
        self.bcast = ctx.channel(broadcast_plan(hosts, servers, blocks, self.overlay), self.layout, BROADCAST)
        dvf = parse_dvf(opts.pf_dvf)
        self.codec = LZ4Codec() if dvf else None
        self.dvf = DVF(state.total, *dvf) if dvf else None
        self.link_mbps = ctx.cfg.bw[0]
        self.dilation = ctx.cfg.dilation  # measured rates are real; DVF compares emulated ones
        self.measured = self.link_mbps
        self.staleness = opts.staleness
        self.push_counts = {"in": ctx.workers, "out": servers}
        self.bcast_counts = {"in": servers, "out": ctx.workers}
        if not ctx.is_server:
            self._start_worker()

    def _filter(self, update: np.ndarray, clock: int):
        """(what to send, fraction dropped, threshold) after the DVF (identity without it)."""
        if self.dvf is None:
            return update, 0.0, 0.0
        delta = self.dvf.threshold(clock + 1, self.measured)
        sent, dropped = self.dvf.filter(update, delta)
        return sent, dropped, delta

    # -- server ----------------------------------------------------------------------------------------

    def serve(self, it: int, rec: IterationRecord) -> None:
        """Aggregate the pushes, filter the aggregate, broadcast it; one iteration per clock."""
        buf = np.zeros(self.layout.total, np.float32)
        before_push, before_bcast = wire_snapshot(self.push.executor), wire_snapshot(self.bcast.executor)
        rec.sync_start = time.time()
        self.push.run(buf, codec=self.codec)
        t1 = time.time()
        self.ctx.check(it, "push", "sharded", "out", buf, self.push_counts)
        buf, dropped, _ = self._filter(buf, it)
        self.ctx.check(it, "broadcast", "sum", "in", buf, self.bcast_counts)
        self.bcast.run(buf, codec=self.codec)
        rec.sync_end = time.time()
        sent = wire_total(self.bcast.executor, before_bcast)
        self.measured = sent[1] * 8 / max(rec.sync_end - t1, 1e-6) / 1e6 * self.dilation if sent[1] \
            else self.link_mbps
        rec.add_payload("push", *wire_total(self.push.executor, before_push))
        rec.add_payload("broadcast", *sent)
        rec.split.update(push_s=t1 - rec.sync_start, dropped=dropped)
        rec.marks["broadcast"] = [t1, None]
        rec.transfers += self._drain()

    def _drain(self) -> List[dict]:
        return ([dict(t, phase="push") for t in self.push.executor.drain_transfers()] +
                [dict(t, phase="broadcast") for t in self.bcast.executor.drain_transfers()])

    # -- worker ----------------------------------------------------------------------------------------

    def _start_worker(self) -> None:
        self.weights = self.state.parameters_flat()
        self.todo: "queue.Queue" = queue.Queue()
        self.done: "queue.Queue" = queue.Queue()
        self.errors: List[BaseException] = []
        self.pending: Dict[int, IterationRecord] = {}
        self.applied = 0
        self.extras = 0  # updates this worker pushed early, in an earlier round (SSP)
        self.thread = threading.Thread(target=self._sync_loop, daemon=True)
        self.thread.start()

    def _next_push(self, clock: int):
        """What this worker pushes in round `clock` (None when training ended): UCC-SSP's servers aggregate every
        update they received, whatever its timestamp, so the round carries its own update (unless an earlier
        round already did) and every later one already queued within the staleness bound (the "extra" updates
        of a fast worker); the count of those extras."""
        if self.pushed_until < clock:
            item = self.todo.get()
            if item is None:
                return None, 0
            update, self.pushed_until = item[1].copy(), item[0]
        else:  # its own update went out early: only extras, maybe none
            update = np.zeros(self.layout.total, np.float32)
        extras = 0
        while self.staleness and self.pushed_until < clock + self.staleness:
            try:
                item = self.todo.get_nowait()
            except queue.Empty:
                break
            if item is None:  # cannot happen before every round is applied; keep it for the loop
                self.todo.put(None)
                break
            update += item[1]
            self.pushed_until, extras = item[0], extras + 1
        return update, extras

    def _sync_loop(self) -> None:
        """Each round: push (see _next_push), receive the broadcast aggregate, hand it to the training loop."""
        self.pushed_until = -1
        try:
            for clock in itertools.count():
                update, extras = self._next_push(clock)
                if update is None:
                    return
                before_push, before_bcast = wire_snapshot(self.push.executor), wire_snapshot(self.bcast.executor)
                update, dropped, delta = self._filter(update, clock)
                self.ctx.check(clock, "push", "sharded", "in", update, self.push_counts)
                t0 = time.time()
                self.push.run(update, codec=self.codec)
                t1 = time.time()
                pushed = wire_total(self.push.executor, before_push)
                self.measured = pushed[1] * 8 / max(t1 - t0, 1e-6) / 1e6 * self.dilation if pushed[1] \
                    else self.link_mbps
                agg = np.zeros(self.layout.total, np.float32)
                self.bcast.run(agg, codec=self.codec)
                t2 = time.time()
                self.ctx.check(clock, "broadcast", "sum", "out", agg, self.bcast_counts)
                self.done.put((clock, agg, {"t0": t0, "t1": t1, "t2": t2, "dropped": dropped, "delta": delta,
                                            "extras": extras,
                                            "push": pushed, "broadcast": wire_total(self.bcast.executor,
                                                                                    before_bcast),
                                            "transfers": self._drain()}))
        except BaseException as exc:  # reported by the training loop
            self.errors.append(exc)
            self.done.put(None)

    def _apply_one(self) -> None:
        """Apply the next broadcast aggregate and complete its iteration's record."""
        item = self.done.get()
        if item is None:
            raise self.errors[0]
        clock, agg, stats = item
        np.subtract(self.weights, agg, out=self.weights)
        rec = self.pending.pop(clock)
        rec.sync_start, rec.sync_end = stats["t0"], stats["t2"]
        rec.add_payload("push", *stats["push"])
        rec.add_payload("broadcast", *stats["broadcast"])
        rec.split.update(push_s=stats["t1"] - stats["t0"], dropped=stats["dropped"], delta=stats["delta"])
        self.extras += stats["extras"]
        rec.marks["broadcast"] = [None, stats["t2"]]
        rec.transfers += stats["transfers"]
        rec.end = max(rec.end, time.time())
        rec.pending = False
        self.applied += 1

    def before_compute(self, it: int, rec: IterationRecord) -> None:
        """Wait until at most `staleness` updates are outstanding (BSP: none), apply what arrived, load it."""
        while it - self.applied > self.staleness:
            self._apply_one()
        while not self.done.empty():
            self._apply_one()
        self.state.load(self.weights)

    def synchronize(self, it: int, rec: IterationRecord) -> None:
        """Queue this iteration's update (lr/W times the gradient); its record completes when applied."""
        gradient = self.state.gradient()
        update = (gradient.numpy() * (self.state.lr / self.ctx.workers)).astype(np.float32)
        rec.end = time.time()
        rec.pending = True
        self.pending[it] = rec
        self.todo.put((it, update))

    def finish(self) -> Dict[str, object]:
        """Apply every outstanding update; the model ends with the final weights."""
        if not self.ctx.is_server:
            while self.pending:
                self._apply_one()
            self.todo.put(None)
            self.thread.join()
            self.state.load(self.weights)
        return {"pflow": {"overlay": list(self.overlay.parent), "overlay_method": self.overlay.method,
                          "overlay_cost": self.overlay.cost,
                          **({} if self.ctx.is_server else {"extra_updates": self.extras})}}

    def close(self) -> None:
        """Close both channels."""
        self.push.close()
        self.bcast.close()
