"""Top-k and random-k sparsification: k = ratio x values of a rank's gradient, each sent as its index (uint32) and its
value (float32), so 8k bytes a rank; gathered, since two ranks' k values are at different indices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from workloads.option_fields import option
from workloads.codecs.base import GatherCompressor


@dataclass(frozen=True)
class SparseOptions:
    """How many values a sparse codec keeps, and error feedback."""

    k_ratio: float = option(0.01, "topk/randomk: the share of a gradient's values each rank sends, k = ratio x values "
                            "(at least 1), each as a 4-byte index and a 4-byte value", low=1e-6, high=1.0,
                            shapes_plan=True)
    error_feedback: bool = option(False, "lossy codecs: add what compression left out of each gradient to the next one "
                                  "(error feedback, a memory per rank), its norm reported")


def kept(values: int, ratio: float) -> int:
    """k: the values a rank keeps of `values`."""
    return min(values, max(1, int(round(ratio * values))))


class TopK(GatherCompressor):
    """Top-k: the k values of largest magnitude, at their indices (ascending)."""

    options = SparseOptions
    summary = "top-k: the k largest magnitudes with their indices, gathered (8 bytes a kept value)"

    @classmethod
    def words(cls, layer_sizes: Sequence[int], options=None) -> int:
        """An index and a value per kept value."""
        return 2 * kept(sum(layer_sizes), (options or cls.options()).k_ratio)

    def chosen(self, vector: np.ndarray, k: int) -> np.ndarray:
        """The indices it keeps, ascending."""
        return np.sort(np.argpartition(np.abs(vector), len(vector) - k)[len(vector) - k:])

    def scale(self, k: int) -> float:
        """What the kept values are multiplied by."""
        return 1.0

    def encode(self, vector: np.ndarray) -> np.ndarray:
        """k indices, then their k values' bits."""
        k = kept(self.values, self.opts.k_ratio)
        index = self.chosen(vector, k).astype("<u4")
        return np.concatenate([index, (vector[index] * np.float32(self.scale(k))).astype("<f4").view("<u4")])

    def decode(self, words: np.ndarray) -> np.ndarray:
        """Zeros but at the indices sent."""
        k = len(words) // 2
        out = np.zeros(self.values, np.float32)
        out[words[:k].astype(np.int64)] = words[k:].view("<f4")
        return out

    def gathered(self, payloads: Sequence[np.ndarray]) -> np.ndarray:
        """The payloads' values added at their indices in rank order (what summing their decoded vectors gives, without
        a dense vector for each)."""
        total = np.zeros(self.values, np.float32)
        for words in payloads:
            k = len(words) // 2
            total[words[:k].astype(np.int64)] += words[k:].view("<f4")  # a payload's indices are distinct
        return total


class RandomK(TopK):
    """Random-k: k indices drawn uniformly without replacement by each rank's own generator; without error feedback
    the kept values are scaled by values / k, so the decoded vector is unbiased, with it they are sent as they are
    (the memory carries the rest, as Stich et al.'s sparsified SGD with memory)."""

    summary = ("random-k: k values at random indices with their indices, gathered (8 bytes a kept value); scaled by "
               "values/k (unbiased) unless error feedback keeps the rest")

    def chosen(self, vector: np.ndarray, k: int) -> np.ndarray:
        """k distinct random indices, ascending."""
        return np.sort(self.rng.choice(len(vector), size=k, replace=False))

    def scale(self, k: int) -> float:
        """values / k, but 1 with error feedback."""
        return 1.0 if self.feedback else self.values / k
