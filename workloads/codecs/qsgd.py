"""QSGD (Alistarh et al., NeurIPS'17): the values in buckets (of each layer) of --qsgd-bucket, each as its bucket's norm
times a signed level in -s..s, stochastically rounded so that the decoded vector is unbiased; gathered. Coding: fixed
width, every level in ceil(log2(2s + 1)) bits packed little-endian (not the paper's Elias coding, whose length depends
on the values: a fixed width keeps every rank's payload the same size), after one float32 norm per bucket. Its
variance is up to omega = min(n/s^2, sqrt(n)/s) times |v|^2 for a bucket of n, more than error feedback can carry:
with error feedback each bucket is sent scaled by 1/(1 + omega), which makes it a contraction (Stich & Karimireddy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

import numpy as np

from workloads.codecs.base import GatherCompressor, as_words
from workloads.compression import pack_words, partial_sum_width, unpack_words
from workloads.option_fields import option

MAX_LEVELS = 127  # levels -s..s in at most 8 bits


@dataclass(frozen=True)
class QsgdOptions:
    """QSGD's levels, and error feedback."""

    qsgd_levels: int = option(7, f"qsgd: s, the levels of |value| / its bucket's norm (each value one of -s..s, in "
                              f"ceil(log2(2s+1)) bits: 7 gives 4 bits; 1 to {MAX_LEVELS})", low=1, high=MAX_LEVELS,
                              shapes_plan=True)
    qsgd_bucket: int = option(512, "qsgd: values per bucket sharing one norm (the paper's experiments use 512; a "
                              "layer's last bucket may be shorter)", low=1, high=1 << 30, shapes_plan=True)
    error_feedback: bool = option(False, "lossy codecs: add what compression left out of each gradient to the next one "
                                  "(error feedback, a memory per rank), its norm reported")


def level_bits(levels: int) -> int:
    """Bits of one signed level in -s..s."""
    return partial_sum_width(levels)


def bucket_sizes(layer_sizes: Sequence[int], bucket: int) -> List[int]:
    """The buckets of every layer in order: full ones of `bucket` values, then the layer's rest."""
    out = []
    for size in layer_sizes:
        out += [bucket] * (size // bucket) + ([size % bucket] if size % bucket else [])
    return out


class Qsgd(GatherCompressor):
    """Per bucket: the L2 norm (one float32 word), then each value's level l = floor(s |v| / norm + u), u uniform in
    [0, 1), signed, decoded as norm x level / s: unbiased, with variance at most min(n / s^2, sqrt(n) / s) |v|^2."""

    options = QsgdOptions
    summary = ("QSGD: per bucket its norm and each value's signed level of s, stochastically rounded (unbiased; with "
               "error feedback scaled by 1/(1+omega)), fixed-width ceil(log2(2s+1)) bits a value; gathered")

    def __init__(self, layer_sizes: Sequence[int], seed: int, options=None):
        super().__init__(layer_sizes, seed, options)
        self.buckets = bucket_sizes(self.sizes, self.opts.qsgd_bucket)
        self.starts = np.cumsum([0] + self.buckets[:-1])
        s = self.opts.qsgd_levels
        omega = np.minimum(np.array(self.buckets, np.float64) / s ** 2, np.sqrt(self.buckets) / s)
        # what a bucket's decoded value is multiplied by: 1, or 1/(1 + omega) with error feedback
        self.shrink = (1.0 / (1.0 + omega) if self.feedback else np.ones(len(self.buckets))).astype(np.float32)

    @classmethod
    def words(cls, layer_sizes: Sequence[int], options=None) -> int:
        """A norm word per bucket, then every value's level, packed."""
        options = options or cls.options()
        width = level_bits(options.qsgd_levels)
        return len(bucket_sizes(layer_sizes, options.qsgd_bucket)) + -(-(-(-sum(layer_sizes) * width // 8)) // 4)

    def encode(self, vector: np.ndarray) -> np.ndarray:
        """The buckets' norms, then the packed levels (offset by s to be non-negative)."""
        s = self.opts.qsgd_levels
        squares = np.add.reduceat(vector.astype(np.float64) ** 2, self.starts) if self.values else np.zeros(0)
        norms = np.sqrt(squares).astype(np.float32)
        scale = np.repeat(np.where(norms > 0, s / np.where(norms > 0, norms, 1), 0), self.buckets).astype(np.float32)
        levels = np.floor(np.abs(vector) * scale + self.rng.random(self.values, dtype=np.float32))
        levels = np.minimum(levels, s) * np.sign(vector)
        packed = np.frombuffer(pack_words((levels + s).astype(np.uint64), level_bits(s)), dtype=np.uint8)
        return np.concatenate([norms.astype("<f4").view("<u4"), as_words(packed)])

    def decode(self, words: np.ndarray) -> np.ndarray:
        """norm x level / s per value (shrunk by 1/(1 + omega) with error feedback)."""
        s = self.opts.qsgd_levels
        count = len(self.buckets)
        norms = np.ascontiguousarray(words[:count], dtype="<u4").view("<f4")
        body = np.ascontiguousarray(words[count:], dtype="<u4").view(np.uint8)
        levels = unpack_words(body, self.values, level_bits(s)).astype(np.float32) - s
        return levels * np.repeat(norms * self.shrink / np.float32(s), self.buckets).astype(np.float32)
