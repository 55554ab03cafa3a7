"""One training process (one per emulated host): BSP loop of compute, gradient sync by a plan (or gloo), SGD."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from datetime import timedelta
from typing import Dict, Optional

import numpy as np
import torch
import torch.nn.functional as F

from emulation.topology import parse
from workloads.algorithms import build_plan
from workloads.data import batches, evaluation_set
from workloads.channel import Channel
from workloads.models import build_model
from workloads.compression import PackedIntCodec, TernGrad
from workloads.plan import PieceLayout, fp32_sum_tolerance

VERIFY_MAX_BYTES = 64 << 20


def interface_bytes(names) -> Dict[str, Dict[str, int]]:
    """tx/rx byte counters of this namespace's interfaces (from /proc/net/dev, which is per namespace)."""
    out = {}
    with open("/proc/net/dev") as f:
        for line in f.readlines()[2:]:
            name, _, rest = line.partition(":")
            name = name.strip()
            if name in names:
                fields = rest.split()
                out[name] = {"rx": int(fields[0]), "tx": int(fields[8])}
    return out


def checksum(model: torch.nn.Module) -> str:
    """SHA-256 of every parameter's bytes: equal across replicas iff the replicas are identical."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


class GlooSync:
    """torch.distributed all_reduce with the gloo backend over the emulated network (outside reference)."""

    def __init__(self, cfg: dict):
        import torch.distributed as dist
        self.dist = dist
        if cfg.get("ifname"):
            os.environ["GLOO_SOCKET_IFNAME"] = cfg["ifname"]
        dist.init_process_group("gloo", init_method=f"tcp://{cfg['master']}:{cfg['master_port']}",
                                rank=cfg["rank"], world_size=cfg["ranks"],
                                timeout=timedelta(seconds=cfg["timeout"]))

    def run(self, buf: np.ndarray) -> None:
        """Sum buf across all ranks in place."""
        self.dist.all_reduce(torch.from_numpy(buf))

    def close(self) -> None:
        """Leave the process group once every rank is done (a rank leaving early aborts the others)."""
        self.dist.barrier()
        self.dist.destroy_process_group()


class PlanSync(Channel):
    """Gradient sync by a dmlbed plan over dmlbed's transport."""

    def __init__(self, cfg: dict, layout: PieceLayout, plan):
        super().__init__(cfg, plan, layout)


def wire_delta(before: dict, sync) -> Dict[str, list]:
    """Payload bytes this iteration per step: 'stream.step' -> [fp32 bytes, bytes actually sent]."""
    if not isinstance(sync, PlanSync):
        return {}
    out = {}
    for key, (raw, enc) in sync.executor.wire_by_step.items():
        r0, e0 = before.get(key, (0, 0))
        if raw - r0 or enc - e0:
            out[f"{key[0]}.{key[1]}"] = [raw - r0, enc - e0]
    return out


def accuracy(model, source: str) -> Optional[float]:
    """Accuracy on the held-out part of a real data set, or None for synthetic data."""
    held_out = evaluation_set(source)
    if held_out is None:
        return None
    x, y = held_out
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def main(argv=None) -> int:
    """Run one worker from a JSON config written by the runner."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--config", required=True)
    cfg = json.load(open(ap.parse_args(argv).config))
    torch.set_num_threads(1)
    rank, out_dir = cfg["rank"], cfg["out_dir"]
    model, input_shape = build_model(cfg["model"], seed=cfg["seed"])
    params = [p for p in model.parameters() if p.requires_grad]
    algo = cfg["algo"]
    if algo == "ibatch":
        return run_pull_worker(cfg, model, input_shape)
    if algo == "pflow":
        return run_pflow_worker(cfg, model, input_shape)
    plan = None if algo == "gloo" else build_plan(algo, parse(cfg["topology"]), cfg.get("servers", 0))
    pieces = plan.pieces if plan else 1
    layout = PieceLayout([p.numel() for p in params], pieces)
    contributor = plan is None or rank in plan.contributors
    contributors = cfg["ranks"] if plan is None else len(plan.contributors)
    sync = GlooSync(cfg) if plan is None else PlanSync(cfg, layout, plan)
    data = iter(batches(cfg["data"], input_shape, cfg["batch"], rank, cfg["ranks"], cfg["seed"])) \
        if contributor else None
    opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"])
    index = torch.from_numpy(layout.index)
    flat = torch.empty(layout.total)
    buf = torch.empty(layout.total)
    log = open(os.path.join(out_dir, f"rank-{rank}.jsonl"), "a", buffering=1)
    verify = cfg.get("verify_first_sum", True) and layout.total * 4 <= VERIFY_MAX_BYTES
    terngrad = TernGrad([p.numel() for p in params], seed=cfg["seed"] * 1000 + rank) \
        if cfg.get("codec") == "terngrad" else None
    scaler_layout = PieceLayout([len(params)], pieces)
    for it in range(cfg["iters"]):
        start = time.time()
        loss = None
        if contributor:
            x, y = next(data)
            opt.zero_grad(set_to_none=False)
            out = model(x)
            loss_t = F.cross_entropy(out, y)
            loss_t.backward()
            loss = float(loss_t.detach())
            torch.cat([p.grad.reshape(-1) for p in params], out=flat)
            torch.index_select(flat, 0, index, out=buf)
        else:
            buf.zero_()
        computed = time.time()
        if terngrad is not None:
            clipped, scalers = terngrad.clip_and_scale(flat.numpy() if contributor else np.zeros(layout.total,
                                                                                                   np.float32))
        if verify and it == 0:
            np.save(os.path.join(out_dir, f"verify-local-{rank}.npy"), buf.numpy())
        bytes_before = interface_bytes(cfg["interfaces"])
        if cfg.get("trace") and isinstance(sync, PlanSync):
            sync.executor.trace = []
        wire_before = dict(sync.executor.wire_by_step) if isinstance(sync, PlanSync) else {}
        if terngrad is None:
            sync.run(buf.numpy())
        else:  # share scalers (max), then all-reduce the integer ternaries bit-packed
            sync.run(scalers, reduce=np.maximum, layout=scaler_layout)
            tern = terngrad.compress(clipped, scalers) if contributor else np.zeros(layout.total, np.float32)
            torch.index_select(torch.from_numpy(tern), 0, index, out=buf)
            if verify and it == 0:
                np.save(os.path.join(out_dir, f"verify-local-{rank}.npy"), buf.numpy())
            sync.run(buf.numpy(), codec=PackedIntCodec())
        synced = time.time()
        if cfg.get("trace") and isinstance(sync, PlanSync):
            with open(os.path.join(out_dir, f"rank-{rank}.trace.jsonl"), "a") as tf:
                for ev in sync.executor.trace:
                    tf.write(json.dumps(dict(ev, iteration=it)) + "\n")
        bytes_after = interface_bytes(cfg["interfaces"])
        if verify and it == 0:
            np.save(os.path.join(out_dir, f"verify-sum-{rank}.npy"), buf.numpy())
        if contributor:  # dedicated servers only aggregate; their model copy is never trained
            flat.index_copy_(0, index, buf)
            if terngrad is None:
                flat.div_(contributors)
            else:
                flat.copy_(torch.from_numpy(terngrad.decompress(flat.numpy(), scalers, contributors)))
            offset = 0
            for p in params:
                p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
            opt.step()
        end = time.time()
        row = {"rank": rank, "iteration": it, "start": start, "sync_start": computed, "sync_end": synced,
               "end": end, "compute_s": computed - start, "gst_s": synced - computed,
               "iteration_s": end - start, "loss": loss,
               "tx_bytes": {k: bytes_after[k]["tx"] - bytes_before[k]["tx"] for k in bytes_after},
               "rx_bytes": {k: bytes_after[k]["rx"] - bytes_before[k]["rx"] for k in bytes_after},
               "payload": wire_delta(wire_before, sync)}
        log.write(json.dumps(row) + "\n")
    log.close()
    sync.close()
    final = {"rank": rank, "role": "worker" if contributor else "server", "checksum": checksum(model),
             "accuracy": accuracy(model, cfg["data"]) if contributor and rank == min(
                 plan.contributors if plan else [0]) else None}
    with open(os.path.join(out_dir, f"rank-{rank}.final.json"), "w") as f:
        json.dump(final, f)
    return 0


def run_server_loop(cfg: dict, model, input_shape, loop) -> int:
    """Run a loop with dedicated servers (ranks 0..M-1): loop(cfg, model, data, log) -> extra final fields."""
    rank, out_dir = cfg["rank"], cfg["out_dir"]
    servers = max(1, cfg.get("servers", 0))
    data = iter(batches(cfg["data"], input_shape, cfg["batch"], rank, cfg["ranks"], cfg["seed"])) \
        if rank >= servers else None
    with open(os.path.join(out_dir, f"rank-{rank}.jsonl"), "a", buffering=1) as f:
        extra = loop(cfg, model, data, lambda row: f.write(json.dumps(row) + "\n"))
    final = {"rank": rank, "role": "worker" if rank >= servers else "server", "checksum": checksum(model),
             "accuracy": accuracy(model, cfg["data"]) if rank == servers else None, **extra}
    with open(os.path.join(out_dir, f"rank-{rank}.final.json"), "w") as f:
        json.dump(final, f)
    return 0


def run_pull_worker(cfg: dict, model, input_shape) -> int:
    """Parameter server with pulls scheduled in layer batches (iBatch / layer-by-layer / default)."""
    from workloads import pull_worker
    params_by_layer = pull_worker.segment_params(pull_worker.layer_segments(model))
    return run_server_loop(cfg, model, input_shape,
                           lambda c, m, data, log: pull_worker.run(c, m, params_by_layer, data, log))


def run_pflow_worker(cfg: dict, model, input_shape) -> int:
    """Parameter Flow: push/broadcast of updates with DVF and the TSB overlay, BSP or SSP."""
    from workloads import pflow_worker
    return run_server_loop(cfg, model, input_shape, pflow_worker.run)


def verify_sums(out_dir: str, contributors, ranks) -> Optional[bool]:
    """Check the first iteration: every contributor's synced gradient equals the sum of all local ones."""
    paths = [os.path.join(out_dir, f"verify-local-{r}.npy") for r in contributors]
    if not all(os.path.exists(p) for p in paths):
        return None
    locals_ = [np.load(p) for p in paths]
    expected = np.sum([x.astype(np.float64) for x in locals_], axis=0)
    tol = fp32_sum_tolerance(locals_) + 1e-30
    ok = True
    for r in contributors:
        path = os.path.join(out_dir, f"verify-sum-{r}.npy")
        if not os.path.exists(path) or np.any(np.abs(np.load(path) - expected) > tol):
            ok = False
    for r in ranks:
        for kind in ("local", "sum"):
            try:
                os.remove(os.path.join(out_dir, f"verify-{kind}-{r}.npy"))
            except OSError:
                pass
    return ok


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # gloo's threads can abort the interpreter's own shutdown ("terminate called without an active
    # exception") after every result is on disk; leave without running C++ static destructors.
    os._exit(code)
