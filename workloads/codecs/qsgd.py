"""QSGD (Alistarh et al., NeurIPS'17): each layer's values as its norm times a signed level in -s..s, stochastically
rounded so that the decoded vector is unbiased; gathered. Coding: fixed width, every level in ceil(log2(2s + 1)) bits
packed little-endian (not the paper's Elias coding, whose length depends on the values: a fixed width keeps every
rank's payload the same size), after one float32 norm per layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from workloads.codecs.base import GatherCompressor, as_words
from workloads.compression import pack_words, partial_sum_width, unpack_words
from workloads.option_fields import option

MAX_LEVELS = 127  # levels -s..s in at most 8 bits


@dataclass(frozen=True)
class QsgdOptions:
    """QSGD's levels, and error feedback."""

    qsgd_levels: int = option(4, f"qsgd: s, the levels of |value| / the layer's norm (each value one of -s..s, in "
                              f"ceil(log2(2s+1)) bits; 1 to {MAX_LEVELS})", low=1, high=MAX_LEVELS, shapes_plan=True)
    error_feedback: bool = option(False, "lossy codecs: add what compression left out of each gradient to the next one "
                                  "(error feedback, a memory per rank), its norm reported")


def level_bits(levels: int) -> int:
    """Bits of one signed level in -s..s."""
    return partial_sum_width(levels)


class Qsgd(GatherCompressor):
    """Per layer: the L2 norm (one float32 word), then each value's level l = floor(s |v| / norm + u), u uniform in
    [0, 1), signed, decoded as norm x level / s: unbiased, with variance at most min(d / s^2, sqrt(d) / s) |v|^2."""

    options = QsgdOptions
    summary = ("QSGD: per layer its norm and each value's signed level of s, stochastically rounded (unbiased), "
               "fixed-width ceil(log2(2s+1)) bits a value; gathered")

    @classmethod
    def words(cls, layer_sizes: Sequence[int], options=None) -> int:
        """A norm word per layer, then every value's level, packed."""
        width = level_bits((options or cls.options()).qsgd_levels)
        return len(layer_sizes) + -(-(-(-sum(layer_sizes) * width // 8)) // 4)

    def encode(self, vector: np.ndarray) -> np.ndarray:
        """The layers' norms, then the packed levels (offset by s to be non-negative)."""
        s = self.opts.qsgd_levels
        norms = np.array([np.linalg.norm(vector[a:b].astype(np.float64))
                          for a, b in zip(self.bounds[:-1], self.bounds[1:])], dtype=np.float32)
        scale = np.repeat(np.where(norms > 0, s / np.where(norms > 0, norms, 1), 0), self.sizes).astype(np.float32)
        levels = np.floor(np.abs(vector) * scale + self.rng.random(self.values, dtype=np.float32))
        levels = np.minimum(levels, s) * np.sign(vector)
        packed = np.frombuffer(pack_words((levels + s).astype(np.uint64), level_bits(s)), dtype=np.uint8)
        return np.concatenate([norms.astype("<f4").view("<u4"), as_words(packed)])

    def decode(self, words: np.ndarray) -> np.ndarray:
        """norm x level / s per value."""
        s = self.opts.qsgd_levels
        layers = len(self.sizes)
        norms = np.ascontiguousarray(words[:layers], dtype="<u4").view("<f4")
        body = np.ascontiguousarray(words[layers:], dtype="<u4").view(np.uint8)
        levels = unpack_words(body, self.values, level_bits(s)).astype(np.float32) - s
        return levels * np.repeat(norms / np.float32(s), self.sizes).astype(np.float32)
