"""Parameter server with pulled parameters (iBatch and its baselines): servers hold and update the
parameters; workers pull them in layer batches on a separate thread while the forward pass runs."""

from __future__ import annotations

import threading
import time
from typing import Dict, List, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from emulation.topology import parse
from workloads.algorithms.ps import dedicated_ps
from workloads.algorithms.pull import ps_pull, ps_push
from workloads.channel import Channel
from workloads.ibatch import Profile, choose, default_batches, fit_startup, layer_batches, timeline
from workloads.plan import PieceLayout

PROFILE_ITERATIONS = 2  # layer-by-layer pulls measure C_i, T_t^i and T_s; the medians skip these


def layer_segments(model: torch.nn.Sequential) -> List[List[torch.nn.Module]]:
    """The model cut into layers: each layer with parameters plus the parameter-free modules after it."""
    segments: List[List[torch.nn.Module]] = []
    for module in model.children():
        if any(True for _ in module.parameters()) or not segments:
            segments.append([module])
        else:
            segments[-1].append(module)
    return segments


def segment_params(segments) -> List[List[torch.nn.Parameter]]:
    """Parameters of each layer."""
    return [[p for m in seg for p in m.parameters()] for seg in segments]


def share_profile(cfg, hosts: int, servers: int, vector: np.ndarray) -> np.ndarray:
    """Max of every rank's profile vector, known to all ranks (push max to server 0, pull back)."""
    plan = dedicated_ps(hosts, 1)
    ch = Channel(cfg, plan, PieceLayout.per_layer([len(vector)]), 2)
    buf = vector.astype(np.float32).copy()
    ch.executor.run(buf, reduce=np.maximum)
    ch.close()
    return buf


def run(cfg: dict, model, params_by_layer, data, log) -> Dict[str, object]:
    """The whole training loop of one rank (server or worker); returns the final record extras."""
    topo = parse(cfg["topology"])
    hosts, servers, rank = len(topo.hosts), max(1, cfg.get("servers", 0)), cfg["rank"]
    is_server = rank < servers
    workers = hosts - servers
    sizes = [sum(p.numel() for p in ps) for ps in params_by_layer]
    L = len(sizes)
    layer_layout = PieceLayout.per_layer(sizes)
    pull_layout = PieceLayout.per_layer(sizes + [1] * workers)
    push = Channel(cfg, ps_push(hosts, servers, L), layer_layout, 0)
    params = np.concatenate([torch.cat([p.detach().reshape(-1) for p in ps]).numpy() for ps in params_by_layer])
    grads = np.zeros(layer_layout.total, np.float32)
    pull_buf = np.zeros(pull_layout.total, np.float32)
    pull_buf[:layer_layout.total] = params
    mode = cfg.get("pull", "ibatch")
    batches = layer_batches(L)
    pull = Channel(cfg, ps_pull(hosts, servers, L, batches), pull_layout, 1)
    segments = layer_segments(model)
    profile_rows: List[Tuple[np.ndarray, np.ndarray]] = []
    chosen = None
    for it in range(cfg["iters"]):
        if it == PROFILE_ITERATIONS:
            chosen = decide(cfg, hosts, servers, sizes, profile_rows, mode, L)
            batches = chosen["batches"]
            pull.close()
            pull = Channel(cfg, ps_pull(hosts, servers, L, batches), pull_layout, 3)
        start = time.time()
        if is_server:
            record = server_iteration(push, pull, params, grads, pull_buf, layer_layout, cfg["lr"], workers)
        else:
            record = worker_iteration(push, pull, pull_buf, grads, layer_layout, batches, segments,
                                      params_by_layer, data)
            if it < PROFILE_ITERATIONS:
                profile_rows.append((np.array(record.pop("layer_pull_s")), np.array(record.pop("layer_compute_s"))))
            else:
                record.pop("layer_pull_s"), record.pop("layer_compute_s")
        end = time.time()
        record.update(rank=rank, iteration=it, start=start, end=end, iteration_s=end - start,
                      tx_bytes={}, rx_bytes={}, batches=[list(b) for b in batches])
        log(record)
    if chosen is None:
        chosen = decide(cfg, hosts, servers, sizes, profile_rows, mode, L)
    push.close()
    pull.close()
    return {"ibatch": {k: v for k, v in chosen.items() if k != "options"}}


def decide(cfg, hosts, servers, sizes, profile_rows, mode, L) -> Dict[str, object]:
    """Build the profile from the layer-by-layer iterations (max over workers) and pick the batches."""
    if profile_rows:
        pulls, comps = profile_rows[-1]
    else:
        pulls, comps = np.zeros(L), np.zeros(L)
    shared = share_profile(cfg, hosts, servers, np.concatenate([pulls, comps]))
    pulls, comps = shared[:L].astype(float), shared[L:].astype(float)
    ts, rate = fit_startup([s * 4 for s in sizes], list(pulls))
    transfer = tuple(s * 4 / rate if np.isfinite(rate) else 0.0 for s in sizes)
    profile = Profile(tuple(comps), transfer, ts)
    picked = choose(profile)
    if mode == "default":
        batches = default_batches(L)
    elif mode == "layer":
        batches = [(i, i) for i in range(L)]
    else:
        batches = picked["batches"]
    return {"mode": mode, "batches": [list(b) for b in batches], "profile": {
        "compute_s": list(profile.compute), "transfer_s": list(profile.transfer), "startup_s": profile.startup},
        "predicted": {name: timeline(b, profile) for name, b in picked["options"].items()},
        "greedy_choice": picked["chosen"], "best_greedy": picked["best_greedy"], "options": picked["options"]}


def server_iteration(push, pull, params, grads, pull_buf, layout, lr, workers) -> Dict[str, object]:
    """Serve the pulls of the current parameters, sum the pushed gradients, apply SGD."""
    pull_buf[:layout.total] = params
    t0 = time.time()
    pull.executor.run(pull_buf)
    grads[:] = 0
    t1 = time.time()
    push.executor.run(grads)
    t2 = time.time()
    params -= lr * grads / workers
    return {"compute_s": 0.0, "sync_start": t1, "sync_end": t2, "gst_s": t2 - t1, "pull_s": t1 - t0,
            "loss": None, "payload": {}}


def worker_iteration(push, pull, pull_buf, grads, layout, batches, segments, params_by_layer, data):
    """Pull thread + forward by batch, then backward and push; returns timings and the overlap split."""
    arrived = [threading.Event() for _ in batches]
    arrival_t = [0.0] * len(batches)
    errors = []

    def on_step(stream, step):
        if step % 2 == 1:
            arrival_t[step // 2] = time.time()
            arrived[step // 2].set()

    def pull_all():
        try:
            pull.executor.run(pull_buf, on_step=on_step)
        except Exception as exc:  # surfaced to the forward pass below
            errors.append(exc)
            for e in arrived:
                e.set()

    x, y = next(data)
    pull_start = time.time()
    thread = threading.Thread(target=pull_all, daemon=True)
    thread.start()
    comp_iv, layer_compute = [], [0.0] * len(segments)
    out = x
    for k, (a, b) in enumerate(batches):
        arrived[k].wait()
        if errors:
            raise errors[0]
        c0 = time.time()
        with torch.no_grad():
            for i in range(a, b + 1):
                lo, hi = layout.bounds[i]
                flat = torch.from_numpy(pull_buf[lo:hi])
                offset = 0
                for p in params_by_layer[i]:
                    p.copy_(flat[offset:offset + p.numel()].view_as(p))
                    offset += p.numel()
        for i in range(a, b + 1):
            t = time.time()
            for module in segments[i]:
                out = module(out)
            layer_compute[i] = time.time() - t
        comp_iv.append((c0, time.time()))
    thread.join()
    if errors:
        raise errors[0]
    forward_end = time.time()
    loss = F.cross_entropy(out, y)
    for ps in params_by_layer:
        for p in ps:
            p.grad = None
    loss.backward()
    grads[:] = np.concatenate([torch.cat([p.grad.reshape(-1) for p in ps]).numpy() for ps in params_by_layer])
    computed = time.time()
    push.executor.run(grads)
    pushed = time.time()
    comm_iv = [(pull_start if k == 0 else arrival_t[k - 1], arrival_t[k]) for k in range(len(batches))]
    overlap = sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in comm_iv for s2, e2 in comp_iv)
    comm = arrival_t[-1] - pull_start
    comp = sum(e - s for s, e in comp_iv)
    layer_pull = [arrival_t[k] - (pull_start if k == 0 else arrival_t[k - 1]) for k in range(len(batches))]
    return {"compute_s": comp + (computed - forward_end),
            "forward_phase_s": forward_end - pull_start, "overlapped_s": overlap,
            "comm_exposed_s": comm - overlap, "compute_exposed_s": comp - overlap,
            "sync_start": computed, "sync_end": pushed, "gst_s": pushed - computed, "loss": float(loss.detach()),
            "layer_pull_s": layer_pull, "layer_compute_s": layer_compute, "payload": {}}
