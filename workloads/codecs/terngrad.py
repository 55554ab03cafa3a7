"""TernGrad as a summing codec: integer sums of stochastic ternaries, bit-packed on the wire (its arithmetic and
packing are in workloads/compression.py, its App. B performance model in emulation/core/terngrad_model.py)."""

from __future__ import annotations

from typing import Callable, Dict, Sequence, Tuple

import numpy as np

from workloads.codecs.base import FeedbackOptions, NoCompression
from workloads.compression import PackedIntCodec, Staged, TernGrad, terngrad_wire_fraction, terngrad_widths


class TernGradCompressor(NoCompression):
    """TernGrad around an all-reduce: clip and scale locally, share the scalers by max with every rank,
    ternarize, all-reduce the integers bit-packed on the wire, decode scaler * sum / N."""

    codec = PackedIntCodec()
    stages = True
    exact_size = False  # each message packs to the width its values need; the model counts the widest a sum can need
    summary = ("TernGrad: per-layer clip and shared scaler, stochastic ternaries, integer sums bit-packed on the wire "
               "(ceil(log2(2c+1)) bits for c gradients)")

    options = FeedbackOptions

    def __init__(self, layer_sizes: Sequence[int], seed: int, options=None):
        super().__init__(layer_sizes, seed, options)
        self.tern = TernGrad(layer_sizes, seed)

    @staticmethod
    def wire_bits(plan) -> Dict[Tuple[int, int, int, int, int], int]:
        """Bits per value of each of the plan's transfers (for the flow model)."""
        return terngrad_widths(plan)

    @staticmethod
    def wire_fraction(plan, piece_elems: Sequence[int]) -> float:
        """The busiest sender's packed widths over fp32."""
        return terngrad_wire_fraction(plan, piece_elems)

    def stage(self, flat: np.ndarray) -> Staged:
        """The device's part before any exchange: clip, local scalers, random draws."""
        return self.tern.stage(flat)

    def prepare(self, staged: Staged, share_max: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        """The scalers shared by max over every rank."""
        return share_max(staged.scalers)

    def compress(self, staged: Staged, shared: np.ndarray) -> np.ndarray:
        """Ternary values in {-1, 0, 1} as float32."""
        return self.tern.ternary(staged, shared)

    def decompress(self, summed: np.ndarray, shared: np.ndarray, workers: int) -> np.ndarray:
        """scaler * sum / workers per layer."""
        return self.tern.decompress(summed, shared, workers)
