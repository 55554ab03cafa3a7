"""Parameter Flow training loop: workers push (DVF-filtered, LZ4-compressed) updates, servers aggregate,
filter and broadcast them down the TSB overlay, every worker applies them locally; BSP or SSP."""

from __future__ import annotations

import queue
import threading
import time
from typing import Dict, List

import numpy as np
import torch
import torch.nn.functional as F

from emulation.topology import parse
from workloads.compression import LZ4Codec
from workloads.pflow import DVF, broadcast_plan, build_overlay, direct_overlay, overlay_costs, push_plan
from workloads.plan import PieceLayout
from workloads.channel import Channel


def parse_tree(text: str):
    """'none' or 'T,H' (maximum degree, maximum depth)."""
    if text in (None, "", "none"):
        return None
    degree, depth = (int(v) for v in str(text).split(","))
    return degree, depth


def overlay_for(cfg: dict, topo, servers: int):
    """The broadcast overlay every rank computes identically (P3 or greedy, or direct)."""
    workers = list(range(servers, len(topo.hosts)))
    tree = parse_tree(cfg.get("pf_tree", "none"))
    if tree is None:
        return direct_overlay(len(workers))
    return build_overlay(overlay_costs(topo, [0] + workers), *tree)


def wire_delta(executor, before) -> List[int]:
    """[fp32 bytes, sent bytes] this rank moved on an executor since `before`."""
    raw = sum(v[0] for v in executor.wire_by_step.values()) - before[0]
    enc = sum(v[1] for v in executor.wire_by_step.values()) - before[1]
    return [raw, enc]


def totals(executor) -> List[int]:
    """Cumulative [fp32, sent] payload bytes of an executor."""
    return [sum(v[0] for v in executor.wire_by_step.values()), sum(v[1] for v in executor.wire_by_step.values())]


def run(cfg: dict, model, data, log) -> Dict[str, object]:
    """One rank's whole run (server or worker); returns extras for the final record."""
    topo = parse(cfg["topology"])
    hosts, servers, rank = len(topo.hosts), max(1, cfg.get("servers", 0)), cfg["rank"]
    workers = hosts - servers
    params = [p for p in model.parameters()]
    size = sum(p.numel() for p in params)
    blocks = int(cfg.get("pf_blocks", 8))
    layout = PieceLayout([size], servers * blocks)  # one layer: piece-major order is the flat order
    overlay = overlay_for(cfg, topo, servers)
    push = Channel(cfg, push_plan(hosts, servers, blocks), layout, 0)
    bcast = Channel(cfg, broadcast_plan(hosts, servers, blocks, overlay), layout, 1)
    dvf_on = cfg.get("pf_dvf", "none") not in ("none", "", None)
    low, up = (float(v) for v in cfg["pf_dvf"].split(",")) if dvf_on else (0.0, 0.0)
    codec = LZ4Codec() if dvf_on else None
    link_mbps = float(str(cfg.get("bw", "100")).split(",")[0])
    dvf = DVF(size, low, up, float(cfg.get("pf_min_mbps", 50.0))) if dvf_on else None
    extras = {"overlay": list(overlay.parent), "overlay_method": overlay.method, "overlay_cost": overlay.cost}
    if rank < servers:
        server_loop(cfg, push, bcast, layout, dvf, codec, log, link_mbps)
    else:
        worker_loop(cfg, model, params, data, push, bcast, layout, dvf, codec, workers, log, link_mbps)
    push.close()
    bcast.close()
    return {"pflow": extras}


def server_loop(cfg, push, bcast, layout, dvf, codec, log, link_mbps) -> None:
    """Aggregate pushes, filter the aggregate, broadcast it; one iteration per clock."""
    measured = link_mbps
    for it in range(cfg["iters"]):
        buf = np.zeros(layout.total, np.float32)
        before_push, before_bcast = totals(push.executor), totals(bcast.executor)
        t0 = time.time()
        push.executor.run(buf, codec=codec)
        t1 = time.time()
        dropped = 0.0
        if dvf is not None:
            buf, dropped = dvf.filter(buf, dvf.threshold(it + 1, measured))
        bcast.executor.run(buf, codec=codec)
        t2 = time.time()
        sent = wire_delta(bcast.executor, before_bcast)
        measured = sent[1] * 8 / max(t2 - t1, 1e-6) / 1e6 if sent[1] else link_mbps
        log({"rank": cfg["rank"], "iteration": it, "start": t0, "end": t2, "compute_s": 0.0, "iteration_s": t2 - t0,
             "sync_start": t0, "sync_end": t2, "gst_s": t2 - t0, "push_s": t1 - t0, "bcast_start": t1,
             "dropped": dropped, "loss": None, "tx_bytes": {}, "rx_bytes": {},
             "payload": {"push": wire_delta(push.executor, before_push), "broadcast": sent}})


def worker_loop(cfg, model, params, data, push, bcast, layout, dvf, codec, workers, log, link_mbps) -> None:
    """Compute on the local parameters; a sync thread pushes updates and receives broadcasts; with SSP the
    loop runs up to `staleness` clocks ahead of the last applied broadcast."""
    staleness = int(cfg.get("staleness", 0))
    lr = cfg["lr"]
    weights = torch.cat([p.detach().reshape(-1) for p in params]).numpy().copy()
    todo: "queue.Queue" = queue.Queue()
    done: "queue.Queue" = queue.Queue()
    errors: List[Exception] = []

    def sync_thread():
        measured = link_mbps
        try:
            while True:
                item = todo.get()
                if item is None:
                    return
                clock, update = item
                before_push, before_bcast = totals(push.executor), totals(bcast.executor)
                dropped, delta = 0.0, 0.0
                if dvf is not None:
                    delta = dvf.threshold(clock + 1, measured)
                    update, dropped = dvf.filter(update, delta)
                t0 = time.time()
                push.executor.run(update, codec=codec)
                t1 = time.time()
                pushed = wire_delta(push.executor, before_push)
                measured = pushed[1] * 8 / max(t1 - t0, 1e-6) / 1e6 if pushed[1] else link_mbps
                agg = np.zeros(layout.total, np.float32)
                bcast.executor.run(agg, codec=codec)
                t2 = time.time()
                done.put((clock, agg, {"sync_start": t0, "sync_end": t2, "gst_s": t2 - t0, "push_s": t1 - t0,
                                       "bcast_end": t2, "dropped": dropped, "delta": delta,
                                       "payload": {"push": pushed, "broadcast": wire_delta(bcast.executor,
                                                                                           before_bcast)}}))
        except Exception as exc:  # reported by the training loop
            errors.append(exc)
            done.put(None)

    thread = threading.Thread(target=sync_thread, daemon=True)
    thread.start()
    pending: Dict[int, dict] = {}
    applied = 0

    def apply_one():
        nonlocal applied
        item = done.get()
        if item is None:
            raise errors[0]
        clock, agg, stats = item
        np.subtract(weights, agg, out=weights)
        row = pending.pop(clock)
        row.update(stats)
        row["end"] = max(row["end"], time.time())
        row["iteration_s"] = row["end"] - row["start"]
        log(row)
        applied += 1

    for it in range(cfg["iters"]):
        while it - applied > staleness:  # BSP: staleness 0 waits for the previous broadcast
            apply_one()
        while not done.empty():
            apply_one()
        start = time.time()
        with torch.no_grad():
            offset = 0
            for p in params:
                p.copy_(torch.from_numpy(weights[offset:offset + p.numel()]).view_as(p))
                offset += p.numel()
        x, y = next(data)
        for p in params:
            p.grad = None
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        update = (torch.cat([p.grad.reshape(-1) for p in params]).numpy() * (lr / workers)).astype(np.float32)
        computed = time.time()
        pending[it] = {"rank": cfg["rank"], "iteration": it, "start": start, "end": computed,
                       "compute_s": computed - start, "loss": float(loss.detach()), "tx_bytes": {}, "rx_bytes": {}}
        todo.put((it, update))
    while applied < cfg["iters"]:
        apply_one()
    todo.put(None)
    thread.join()
    with torch.no_grad():
        offset = 0
        for p in params:
            p.copy_(torch.from_numpy(weights[offset:offset + p.numel()]).view_as(p))
            offset += p.numel()
