"""Training data: seeded synthetic tensors, the UCI digits kept in workloads/datasets (offline), MNIST IDX files."""

from __future__ import annotations

import gzip
import os
import struct
from typing import Iterator, Tuple

import numpy as np

# torch is imported where tensors are made, so that validating --data costs no torch import.


class DataError(ValueError):
    """Unknown data source or unreadable files."""


class Batches:
    """Endless sub-minibatches for one rank, drawn from its shard of (x, y)."""

    def __init__(self, x: "torch.Tensor", y: "torch.Tensor", batch: int, rank: int, ranks: int, seed: int):
        import torch
        self.x, self.y = x[rank::ranks], y[rank::ranks]
        if len(self.x) == 0:
            raise DataError(f"rank {rank} got no samples: the data set has {len(x)} for {ranks} ranks")
        self.batch = batch
        self.gen = torch.Generator().manual_seed(seed * 7919 + rank)

    def __iter__(self) -> Iterator[Tuple["torch.Tensor", "torch.Tensor"]]:
        import torch
        while True:
            idx = torch.randint(0, len(self.x), (self.batch,), generator=self.gen)
            yield self.x[idx], self.y[idx]


class SyntheticBatches:
    """Random inputs of the model's shape and random labels, seeded per rank."""

    def __init__(self, shape, classes: int, batch: int, rank: int, seed: int):
        import torch
        self.shape, self.classes, self.batch = tuple(shape), classes, batch
        self.gen = torch.Generator().manual_seed(seed * 7919 + rank)

    def __iter__(self):
        import torch
        while True:
            yield (torch.randn((self.batch,) + self.shape, generator=self.gen),
                   torch.randint(0, self.classes, (self.batch,), generator=self.gen))


DIGITS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "datasets", "digits.csv.gz")


def digits_28x28() -> Tuple["torch.Tensor", "torch.Tensor"]:
    """The UCI 8x8 digits scikit-learn ships (1797 images, kept in workloads/datasets), resized to 1x28x28 in
    [0, 1]."""
    import torch
    import torch.nn.functional as F
    rows = np.loadtxt(DIGITS, delimiter=",", dtype=np.float32)
    x = torch.from_numpy(rows[:, :64].reshape(-1, 1, 8, 8) / 16.0)
    x = F.interpolate(x, size=(28, 28), mode="bilinear", align_corners=False)
    return x, torch.from_numpy(rows[:, 64].astype(np.int64))


def read_idx(path: str) -> np.ndarray:
    """Read an IDX file (MNIST format), gzipped or not."""
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            zero, dtype, dims = struct.unpack(">HBB", f.read(4))
            if zero != 0 or dtype != 0x08:
                raise DataError(f"{path} is not an unsigned-byte IDX file")
            shape = struct.unpack(">" + "I" * dims, f.read(4 * dims))
            return np.frombuffer(f.read(), dtype=np.uint8).reshape(shape)
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc}") from None


def find_idx(directory: str, stem: str) -> str:
    """The path of train-images-idx3-ubyte or its .gz in directory."""
    for name in (stem, stem + ".gz"):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            return path
    raise DataError(f"{directory} has no {stem}[.gz]: give the folder holding the MNIST IDX files")


def mnist(directory: str) -> Tuple["torch.Tensor", "torch.Tensor"]:
    """MNIST training images (1x28x28 in [0, 1]) and labels from IDX files."""
    import torch
    images = read_idx(find_idx(directory, "train-images-idx3-ubyte"))
    labels = read_idx(find_idx(directory, "train-labels-idx1-ubyte"))
    return (torch.tensor(images, dtype=torch.float32).unsqueeze(1) / 255.0,
            torch.tensor(labels.astype(np.int64)))


def split(x: "torch.Tensor", y: "torch.Tensor", train: bool) -> Tuple["torch.Tensor", "torch.Tensor"]:
    """Every fifth sample is held out for evaluation; the rest is for training."""
    import torch
    keep = (torch.arange(len(x)) % 5 != 0) if train else (torch.arange(len(x)) % 5 == 0)
    return x[keep], y[keep]


def check_data(source: str, input_shape) -> None:
    """Validate a --data value against the model's input shape before anything starts."""
    if source == "synthetic":
        return
    if source == "digits" or source.startswith("mnist:"):
        if tuple(input_shape) != (1, 28, 28):
            raise DataError(f"--data {source} gives 1x28x28 images: use it with lenet5, not a model taking "
                            f"{'x'.join(map(str, input_shape))}")
        if source.startswith("mnist:"):
            find_idx(source[6:], "train-images-idx3-ubyte")
        return
    raise DataError(f"unknown data '{source}': valid are synthetic, digits, mnist:PATH")


def batches(source: str, input_shape, batch: int, rank: int, ranks: int, seed: int):
    """An endless iterator of (x, y) sub-minibatches for one rank."""
    check_data(source, input_shape)
    if source == "synthetic":
        return SyntheticBatches(input_shape, 10, batch, rank, seed)
    x, y = split(*(digits_28x28() if source == "digits" else mnist(source[6:])), train=True)
    return Batches(x, y, batch, rank, ranks, seed)


def evaluation_set(source: str):
    """(x, y) for measuring accuracy, or None for synthetic data."""
    if source == "digits":
        return split(*digits_28x28(), train=False)
    if source.startswith("mnist:"):
        return split(*mnist(source[6:]), train=False)
    return None
