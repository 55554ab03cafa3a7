"""fp16 and bf16 on the wire: a summing codec (each partial sum rounded to the format as the plan makes it)."""

from __future__ import annotations

from typing import Dict, Sequence, Tuple

import numpy as np

from workloads.codecs.base import FeedbackOptions, NoCompression, transfer_keys
from workloads.compression import CodecError


def _torch_dtype(fmt: str):
    """torch's dtype of a 16-bit format (torch converts with the CPU's vector instructions: 3-4x numpy's speed)."""
    import torch
    return {"fp16": torch.float16, "bf16": torch.bfloat16}[fmt]


def to_format(values: np.ndarray, fmt: str):
    """float32 values rounded to the nearest fp16 or bf16 (to nearest even), as a torch tensor of that format."""
    import torch
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32)).to(_torch_dtype(fmt))


def round_fp16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest IEEE half (to nearest even), as float32."""
    return to_format(values, "fp16").float().numpy()


def round_bf16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (to nearest even), as float32."""
    return to_format(values, "bf16").float().numpy()


class HalfCodec:
    """Wire codec for float32 arrays whose values a 16-bit float holds exactly: 2 bytes a value (little-endian: the
    format's bits), no header."""

    def __init__(self, name: str):
        self.name = name

    def encode(self, values: np.ndarray) -> bytes:
        """The values in the format; CodecError where one is not a value of it (a partial sum past fp16's largest
        finite value, 65504, among them)."""
        import torch
        mine = torch.from_numpy(np.ascontiguousarray(values, dtype=np.float32))
        half = mine.to(_torch_dtype(self.name))
        if not torch.equal(half.float(), mine):
            big = float(mine.abs().max()) if len(values) else 0.0
            raise CodecError(f"{self.name} carries only {self.name} values: a value is not one (largest magnitude "
                             f"{big:g}; fp16's largest finite is 65504, bf16 has float32's range)")
        return half.view(torch.int16).numpy().astype("<i2", copy=False).tobytes()

    def decode(self, data: bytes, count: int) -> np.ndarray:
        """`count` float32 values from encode()'s bytes."""
        import torch
        if len(data) != 2 * count:
            raise CodecError(f"message holds {len(data) // 2} values, expected {count}")
        bits = torch.from_numpy(np.frombuffer(data, dtype="<i2").copy())
        return bits.view(_torch_dtype(self.name)).float().numpy()


class HalfCompressor(NoCompression):
    """A 16-bit float on the wire, as torch's fp16/bf16 DDP hooks and NCCL's half all-reduce: each gradient rounded
    to the format, every partial sum rounded again as it is made (so each hop carries exact format values and every
    rank ends with the same sum), averaged in fp32 after."""

    fmt = "fp16"
    rounding = staticmethod(round_fp16)
    check = "sum-fp16"
    summary = "IEEE half on the wire (each partial sum rounded to it): half of fp32's bytes"

    options = FeedbackOptions

    def __init__(self, layer_sizes: Sequence[int], seed: int, options=None):
        super().__init__(layer_sizes, seed, options)
        self.codec = HalfCodec(self.fmt)

    def reduce(self, mine: np.ndarray, incoming: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Add, then round the partial sum to the format."""
        import torch
        np.add(mine, incoming, out=out)
        view = torch.from_numpy(out)
        view.copy_(view.to(_torch_dtype(self.fmt)))
        return out

    def compress(self, staged: np.ndarray, ctx) -> np.ndarray:
        """The gradient rounded to the format."""
        return self.rounding(staged)

    @staticmethod
    def wire_bits(plan) -> Dict[Tuple[int, int, int, int, int], int]:
        """16 bits a value on every transfer."""
        return {key: 16 for key in transfer_keys(plan)}

    @staticmethod
    def wire_fraction(plan, piece_elems: Sequence[int]) -> float:
        """Half of fp32."""
        return 0.5


class Bf16Compressor(HalfCompressor):
    """bfloat16 on the wire: fp32's range, 8 bits of mantissa."""

    fmt = "bf16"
    rounding = staticmethod(round_bf16)
    check = "sum-bf16"
    summary = "bfloat16 on the wire (each partial sum rounded to it): half of fp32's bytes, fp32's range"
