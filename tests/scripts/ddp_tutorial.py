"""A DDP training script as PyTorch's DDP tutorial writes it (not edited for dmlbed): the process group from the
environment (torchrun's variables), DistributedDataParallel, a DistributedSampler. With DMLBED_TEST_REGISTER=1 it
opts into dmlbed's hook (the one line a user adds). It frees the DDP model before destroying the process group,
as every script on this torch should (README, launch). It prints a checksum of its final parameters."""
import gc
import hashlib
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(256, 10), torch.randint(0, 5, (256,)))
    sampler = DistributedSampler(data)
    loader = DataLoader(data, batch_size=16, sampler=sampler)
    model = DDP(ToyModel())
    if os.environ.get("DMLBED_TEST_REGISTER"):
        import dmlbed.ddp
        dmlbed.ddp.register(model)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(int(os.environ.get("EPOCHS", "2"))):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
    digest = hashlib.sha256(b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()
    print(f"rank {rank} done, loss {float(loss_fn(model(x), y)):.4f}, parameters {digest[:16]}")
    # DDP's reference cycles would keep gloo's threads alive into interpreter shutdown, where torch 2.13 aborts
    # now and then ("terminate called without an active exception", under torchrun too): free them first.
    del model, optimizer
    gc.collect()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
