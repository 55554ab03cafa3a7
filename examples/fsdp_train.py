"""Fully sharded data parallel training with PyTorch's own FSDP (FSDP2's fully_shard) on gloo, as a user writes it:
every Linear layer a shard unit (its parameters all-gathered before use, its gradient reduce-scattered), then the
whole model. Run it on the emulated network with

    sudo .venv/bin/dmlbed launch --topo star:4 --bw 100 -- python examples/fsdp_train.py

Each rank prints the loss and a checksum of the full (gathered) parameters: equal on every rank."""
import gc
import hashlib
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.fsdp import fully_shard


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    width = int(os.environ.get("WIDTH", "512"))
    model = nn.Sequential(nn.Linear(256, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(1 + rank)  # each rank its own data
    for _ in range(int(os.environ.get("STEPS", "5"))):
        x, y = torch.randn(32, 256, generator=generator), torch.randint(0, 10, (32,), generator=generator)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    full = [p.full_tensor().detach() for p in model.parameters()]  # an all-gather of every shard
    shard = sum(p.to_local().numel() for p in model.parameters()) / sum(t.numel() for t in full)
    digest = hashlib.sha256(b"".join(t.numpy().tobytes() for t in full)).hexdigest()
    print(f"rank {rank} of {world} done, loss {loss.item():.4f}, shard {shard:.3f} of the model, "
          f"parameters {digest[:16]}")
    # gloo's threads held by the model's reference cycles would outlive the interpreter (torch 2.13 then aborts at
    # exit): free them before the process group goes
    del model, optimizer, full, loss
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
