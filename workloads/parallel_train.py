"""A GPT trained under tensor, pipeline and data parallelism by real processes, one per host, started by
`dmlbed launch ... -- python -m workloads.parallel_train --parallel tp=2,pp=2,dp=4 ...` (or torchrun): per rank
its iteration times, each pass's span, the bytes its TCP connections delivered to the peers of each kind (from the
kernel's own counters, `ss -ti`), and whether its weights equal the unsplit model's trained on one process; times in
emulated seconds (real ones divided by $DMLBED_DILATION).
Written to $DMLBED_OUT/parallel-rank-N.json (and printed); `--collect FOLDER` reads a job's back: bytes per kind,
iteration, every stage's bubble."""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import time
from typing import Dict, List

import torch
import torch.distributed as dist

from workloads.parallel_gpt import Groups, batch, checked_job, full_weights, make_groups, rank_weights, train_step
from workloads.parallel_layout import Layout
from workloads.parallel_records import OUT_NAME, collect
from workloads.pipeline_schedule import SCHEDULES
from workloads.runfolder import RankFiles
from workloads.transformer import Transformer

SETTLE_S = 0.5  # the barrier's own acknowledgements, and any in flight, land well within it on the emulated links
_SS_CONN = re.compile(r"^(?:[A-Za-z-]+\s+)?\d+\s+\d+\s+(\S+):(\d+)\s+(\S+):(\d+)$")  # [state] recv-q send-q local peer
_SS_ACKED = re.compile(r"bytes_acked:(\d+)")


def arguments(argv: List[str] = None) -> argparse.Namespace:
    """The job's options."""
    ap = argparse.ArgumentParser(prog="python -m workloads.parallel_train", description=__doc__)
    ap.add_argument("--parallel", required=True, help="tp=T,pp=P,dp=D[,order=...]")
    ap.add_argument("--model", default="gpt-tiny", help="gpt:LAYERS,HIDDEN,HEADS,SEQ[,VOCAB] or a preset")
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--batch", type=int, default=8, help="each replica's sequences per iteration")
    ap.add_argument("--schedule", default="1f1b", choices=SCHEDULES)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1, help="iterations left out of the timings and byte counts")
    ap.add_argument("--compute-time", type=float, default=0.0,
                    help="a device's forward and backward seconds per micro-batch on a stage (split 1:2); under "
                    "dmlbed launch --dilation F held F times as long, and every time recorded divided by F")
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-check", dest="check", action="store_false",
                    help="skip training the unsplit model on rank 0 to compare every rank's weights with")
    return ap.parse_args(argv)


def peer_bytes() -> Dict[str, int]:
    """Bytes this process's namespace's established TCP connections have had acknowledged, by remote address."""
    text = subprocess.run(["ss", "-tinH", "state", "established"], capture_output=True, text=True).stdout
    out: Dict[str, int] = {}
    peer = None
    for line in text.splitlines():
        m = _SS_CONN.match(line.strip())
        if m:
            peer = m.group(3).strip("[]").replace("::ffff:", "")
            continue
        acked = _SS_ACKED.search(line)
        if acked and peer is not None:
            out[peer] = out.get(peer, 0) + int(acked.group(1))
            peer = None
    return out


def settled_bytes() -> Dict[str, int]:
    """peer_bytes once every rank is here and the last acknowledgements have landed."""
    dist.barrier()
    time.sleep(SETTLE_S)
    return peer_bytes()


def kind_of_peer(layout: Layout, me: int, other: int) -> str:
    """Which kind of traffic two ranks exchange (they differ along exactly one kind, or several: 'other')."""
    a, b = layout.coords(me), layout.coords(other)
    differ = [k for k in a if a[k] != b[k]]
    return differ[0] if len(differ) == 1 else "other"


def reference_shards(args, model, layout: Layout, rank: int) -> Dict[str, torch.Tensor]:
    """The unsplit model trained on rank 0 on the same batches (once, not on every rank), sent to every rank and
    sliced as this rank holds it."""
    start = full_weights(model, args.seed)
    flat = torch.empty(sum(v.numel() for v in start.values()))
    if rank == 0:
        one = Layout()
        w = rank_weights(start, model, one, 0)
        for it in range(args.iterations):
            train_step(w, model, one, 0, Groups(None, None, None, None), batch(model, args.seed, it,
                       layout.dp * args.batch), 1, "gpipe", args.lr)
        flat = torch.cat([w[k].detach().reshape(-1) for k in start])
    dist.broadcast(flat, 0)
    full = {k: t.reshape(start[k].shape) for k, t in zip(start, flat.split([v.numel() for v in start.values()]))}
    return {k: v.detach() for k, v in rank_weights(full, model, layout, rank).items()}


def train(args, model: Transformer, layout: Layout) -> dict:
    """This rank's run (model and layout checked against the world): its iterations, spans, bytes per kind of peer
    and the exactness check."""
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    groups = make_groups(layout, rank)
    addresses = [None] * world
    dist.all_gather_object(addresses, os.environ.get("DMLBED_ADDRESSES", socket.gethostname()).split(","))
    rank_of = {ip: r for r, ips in enumerate(addresses) for ip in ips}
    w = rank_weights(full_weights(model, args.seed), model, layout, rank)
    dilation = float(os.environ.get("DMLBED_DILATION") or 1.0)  # dmlbed launch --dilation F: links at bw / F
    pass_s = (dilation * args.compute_time / 3, dilation * 2 * args.compute_time / 3)
    iterations, spans, losses, before, window, over = [], [], [], None, [None, None], 0
    for it in range(args.iterations):
        if it == args.warmup:
            before = settled_bytes()
            window[0] = time.time()
        kept, computed = (spans if it >= args.warmup else []), []

        def record(kind, i, a, b, real):
            kept.append([it, kind, i, a / dilation, b / dilation])
            computed.append(real)
        began = time.perf_counter()
        loss = train_step(w, model, layout, rank, groups, batch(model, args.seed, it, layout.dp * args.batch),
                          args.micro_batches, args.schedule, args.lr, record, pass_s)
        iterations.append((time.perf_counter() - began) / dilation)
        losses.append(loss)
        # this CPU computed longer than the device time it stands for: the pipeline waited on the machine
        over += it >= args.warmup and args.compute_time > 0 and sum(computed) > args.micro_batches * sum(pass_s)
    window[1] = time.time()
    after = settled_bytes()
    per_kind: Dict[str, float] = {}
    measured = max(args.iterations - args.warmup, 1)
    for ip, total in after.items():
        other = rank_of.get(ip)
        if other is None or other == rank:
            continue
        kind = kind_of_peer(layout, rank, other)
        per_kind[kind] = per_kind.get(kind, 0) + (total - (before or {}).get(ip, 0)) / measured
    worst = None
    if args.check:
        reference = reference_shards(args, model, layout, rank)
        worst = max((w[k].detach() - reference[k]).abs().max().item() for k in w)
    dist.barrier()
    dist.destroy_process_group()
    return {"rank": rank, "coords": layout.coords(rank), "parallel": layout.label, "model": model.label,
            "schedule": args.schedule, "micro_batches": args.micro_batches, "batch": args.batch,
            "iterations_s": iterations, "warmup": args.warmup, "losses": losses, "spans": spans,
            "bytes_per_iteration_by_kind": per_kind, "max_weight_difference": worst, "dilation": dilation,
            "measured": {"start": window[0], "end": window[1], "compute_over_budget": over,
                         "rank_iterations": measured if args.compute_time > 0 else 0}}


def main(argv: List[str] = None) -> int:
    """Check the options, train, write this rank's record (or with --collect FOLDER, read a job's records)."""
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--collect"]:
        try:
            print(json.dumps(collect(argv[1] if len(argv) > 1 else ".")))
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    args = arguments(argv)
    world = os.environ.get("WORLD_SIZE")
    try:
        model, layout = checked_job(args.model, args.parallel, int(world) if world else None, args.schedule,
                                    args.micro_batches)
        if args.batch % args.micro_batches:
            raise ValueError(f"--batch {args.batch} does not split into --micro-batches {args.micro_batches}")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    record = train(args, model, layout)
    text = json.dumps(record)
    if os.environ.get("DMLBED_OUT"):
        os.makedirs(os.environ["DMLBED_OUT"], exist_ok=True)
        with open(os.path.join(os.environ["DMLBED_OUT"], OUT_NAME.format(rank=record["rank"])), "w") as f:
            f.write(text)
        with open(RankFiles(os.environ["DMLBED_OUT"]).measured(record["rank"]), "w") as f:
            json.dump(record["measured"], f)  # launch judges the CPU over these seconds, and the compute's budget
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
