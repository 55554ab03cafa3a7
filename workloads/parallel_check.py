"""Whether a GPT split over tensor, pipeline and data parallel ranks trains exactly as the unsplit model on one
process: `python -m workloads.parallel_check tp=2,pp=2,dp=2 --schedule 1f1b` runs every rank as a process on
loopback (gloo), then the plain model on the same batches, and prints per iteration both losses, the largest
difference of any weight between the two and how far training moved the weights (JSON)."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
from typing import Dict, List

import torch
import torch.distributed as dist

from workloads.parallel_gpt import Groups, batch, checked_job, full_weights, make_groups, rank_weights, train_step
from workloads.parallel_layout import Layout
from workloads.transformer import Transformer


def rank_main(rank: int, args: dict, model: Transformer, layout: Layout, folder: str) -> None:
    """One rank: its shards of the seeded model trained for the iterations, saved with its losses."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=layout.ranks)
    try:
        groups = make_groups(layout, rank)
        w = rank_weights(full_weights(model, args["seed"], torch.float64), model, layout, rank)
        losses = [train_step(w, model, layout, rank, groups, batch_of(args, model, layout, it),
                             args["micro_batches"], args["schedule"], args["lr"]) for it in range(args["iterations"])]
        torch.save({"weights": {k: v.detach() for k, v in w.items()}, "losses": losses},
                   os.path.join(folder, f"rank-{rank}.pt"))
    finally:
        dist.destroy_process_group()


def batch_of(args: dict, model: Transformer, layout: Layout, iteration: int) -> torch.Tensor:
    """The global batch of an iteration."""
    return batch(model, args["seed"], iteration, layout.dp * args["micro_batches"] * args["micro_batch_size"])


def reference(args: dict, model: Transformer, layout: Layout) -> Dict:
    """The unsplit model on this process, trained on the same global batches."""
    one = Layout()
    w = rank_weights(full_weights(model, args["seed"], torch.float64), model, one, 0)
    none = Groups(None, None, None, None)
    losses = [train_step(w, model, one, 0, none, batch_of(args, model, layout, it), 1, "gpipe", args["lr"])
              for it in range(args["iterations"])]
    return {"weights": {k: v.detach() for k, v in w.items()}, "losses": losses}


def compare(args: dict) -> dict:
    """Run the split job and the reference; losses side by side and the largest weight difference."""
    model, layout = checked_job(args["model"], args["layout"], None, args["schedule"], args["micro_batches"])
    with tempfile.TemporaryDirectory(prefix="dmlbed-parallel-") as folder:
        ctx = multiprocessing.get_context("fork")
        procs = [ctx.Process(target=rank_main, args=(r, args, model, layout, folder)) for r in range(layout.ranks)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        failed = [r for r, p in enumerate(procs) if p.exitcode != 0]
        if failed:
            raise RuntimeError(f"ranks {failed} failed")
        ranks = [torch.load(os.path.join(folder, f"rank-{r}.pt")) for r in range(layout.ranks)]
    ref = reference(args, model, layout)
    start = full_weights(model, args["seed"], torch.float64)
    moved = max((ref["weights"][k] - start[k]).abs().max().item() for k in ref["weights"])
    worst = 0.0
    for r, got in enumerate(ranks):
        want = rank_weights(ref["weights"], model, layout, r)
        worst = max([worst] + [(value - want[name]).abs().max().item() for name, value in got["weights"].items()])
    split = [sum(l[i] for l in (g["losses"] for g in ranks) if l[i] is not None) / (layout.tp * layout.dp *
             args["micro_batches"]) for i in range(args["iterations"])]
    return {"layout": layout.label, "schedule": args["schedule"], "model": model.label,
            "losses_split": split, "losses_unsplit": ref["losses"], "max_weight_difference": worst,
            "max_weight_change": moved}


def main(argv: List[str] = None) -> int:
    """Parse, validate, compare, print JSON."""
    ap = argparse.ArgumentParser(prog="python -m workloads.parallel_check", description=__doc__)
    ap.add_argument("layout", help="tp=T,pp=P,dp=D")
    ap.add_argument("--model", default="gpt-tiny")
    ap.add_argument("--schedule", default="1f1b")
    ap.add_argument("--micro-batches", type=int, default=4)
    ap.add_argument("--micro-batch-size", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    try:
        model, layout = checked_job(a.model, a.layout, None, a.schedule, a.micro_batches)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args = dict(vars(a), layout=layout.label, model=model.label)
    print(json.dumps(compare(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
