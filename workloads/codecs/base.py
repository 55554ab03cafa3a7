"""What a gradient compressor is, GRACE-style (a compressor, its memory, how it is communicated), in the two kinds the
run knows: one whose values add on the way (it wraps the algorithm's all-reduce plan: stage, prepare, compress, the
plan sums with its wire codec and reduce, decompress) and one whose messages must be gathered (each rank's payload of
a fixed number of 32-bit words travels an all-gather plan; every rank decodes every payload in rank order and combines
them, so every rank ends with the same result)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from workloads.option_fields import option


@dataclass(frozen=True)
class NoCodecOptions:
    """The options of a codec that reads none."""


@dataclass(frozen=True)
class FeedbackOptions:
    """Error feedback, which every lossy codec offers."""

    error_feedback: bool = option(False, "lossy codecs: add what compression left out of each gradient to the next one "
                                  "(error feedback, a memory per rank), its norm reported")


def transfer_keys(plan) -> List[Tuple[int, int, int, int, int]]:
    """Every transfer of a plan, keyed (stream, step, src, dst, piece) as the flow model's wire_bits are."""
    return [(s, n, t.src, t.dst, t.piece) for s, stream in enumerate(plan.streams) for n, step in enumerate(stream)
            for t in step]


class NoCompression:
    """fp32 as is: the all-reduce sums gradients and decompress averages them."""

    codec = None
    stages = False  # no local work before the exchange
    gathers = False  # its values add on the way: it wraps the algorithm's all-reduce plan
    lowrank = False  # True: two all-reduces of factors (first, second, finish), which need the tensors' shapes
    feedback = False  # error feedback (--error-feedback) where its options offer it
    exact_size = True  # its size model is the bytes it sends (False: a bound, as TernGrad's widest partial sums)
    reduce = staticmethod(np.add)  # how the plan adds what it receives to what a rank holds
    check = "sum"  # the first iteration's sum is checked within fp32's rounding (workloads.verify)
    options = NoCodecOptions
    summary = "fp32 as is"

    @staticmethod
    def wire_bits(plan) -> None:
        """fp32 on the wire."""
        return None

    @staticmethod
    def wire_fraction(plan, piece_elems: Sequence[int]) -> float:
        """Wire bytes over fp32 bytes of the busiest sender."""
        return 1.0

    def __init__(self, layer_sizes: Sequence[int], seed: int, options=None):
        self.feedback = bool(getattr(options, "error_feedback", False))
        self.memory: Optional[np.ndarray] = None  # with error feedback: what compression left out of the last vector
        self.residual_norm = 0.0

    def fed(self, flat: np.ndarray) -> np.ndarray:
        """The gradient with error feedback's memory added (kept until remember()); without feedback, itself."""
        if not self.feedback:
            return flat
        self.vector = flat + self.memory if self.memory is not None else np.array(flat, np.float32)
        return self.vector

    def remember(self, payload: np.ndarray, ctx) -> None:
        """Error feedback: keep what this rank's payload, decoded alone, left out of the vector fed()."""
        own = self.decompress(np.array(payload, np.float32), ctx, 1)
        self.memory = (self.vector - own).astype(np.float32)
        self.residual_norm = float(np.linalg.norm(self.memory))

    @staticmethod
    def stage(flat: np.ndarray) -> np.ndarray:
        """Nothing to do on the device."""
        return flat

    def prepare(self, staged: np.ndarray, share_max: Callable[[np.ndarray], np.ndarray]):
        """Nothing to negotiate."""
        return None

    def compress(self, staged: np.ndarray, ctx) -> np.ndarray:
        """The gradient itself."""
        return staged

    def decompress(self, summed: np.ndarray, ctx, workers: int) -> np.ndarray:
        """The average, computed in place (summed is the all-reduce's scratch buffer)."""
        return np.divide(summed, np.float32(workers), out=summed)


class GatherCompressor:
    """A codec whose messages do not add on the way: each rank sends `words(layer_sizes)` 32-bit words, every rank
    gets every rank's (an all-gather), decodes them and combines them in rank order. With error feedback, what a
    rank's compression left out is added to its next gradient."""

    codec = None
    stages = False
    gathers = True
    lowrank = False
    exact_size = True
    always_feedback = False  # the method is defined with its memory (EF-signSGD)
    check = "sum"  # what gathered() returns, against the ranks' decoded contributions (workloads.verify)
    options = FeedbackOptions
    summary = ""

    def __init__(self, layer_sizes: Sequence[int], seed: int, options=None):
        self.sizes = [int(s) for s in layer_sizes]
        self.bounds = np.cumsum([0] + self.sizes)
        self.values = int(self.bounds[-1])
        self.opts = options if options is not None else self.options()
        self.rng = np.random.default_rng(seed)
        self.feedback = self.always_feedback or bool(getattr(self.opts, "error_feedback", False))
        self.memory = np.zeros(self.values, np.float32) if self.feedback else None
        self.residual_norm = 0.0  # |memory| after the last contribution

    @classmethod
    def words(cls, layer_sizes: Sequence[int], options=None) -> int:
        """32-bit words a rank sends for a gradient of these layers."""
        raise NotImplementedError

    def encode(self, vector: np.ndarray) -> np.ndarray:
        """The payload of a vector: words(sizes) uint32 words."""
        raise NotImplementedError

    def decode(self, words: np.ndarray) -> np.ndarray:
        """The dense float32 vector a payload stands for."""
        raise NotImplementedError

    def contribution(self, flat: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(payload, what it decodes to) of this rank's gradient, its memory added and renewed with error
        feedback."""
        vector = flat + self.memory if self.feedback else flat
        words = self.encode(np.ascontiguousarray(vector, dtype=np.float32))
        decoded = self.decode(words)
        if self.feedback:
            self.memory = (vector - decoded).astype(np.float32)
            self.residual_norm = float(np.linalg.norm(self.memory))
        return words, decoded

    def gathered(self, payloads: Sequence[np.ndarray]) -> np.ndarray:
        """What every rank makes of every rank's payload (rank order): the sum of what they decode to."""
        total = np.zeros(self.values, np.float32)
        for words in payloads:
            total += self.decode(words)
        return total

    def finish(self, gathered: np.ndarray, workers: int) -> np.ndarray:
        """The update each rank applies: the average."""
        return gathered / np.float32(workers)

    def decompress(self, gathered: np.ndarray, ctx, workers: int) -> np.ndarray:
        """finish(), as a summing codec's decompress is called."""
        return self.finish(gathered, workers)

    @classmethod
    def payload_fraction(cls, layer_sizes: Sequence[int], options=None) -> float:
        """A rank's payload over its fp32 gradient (a summing codec's wire_fraction is of a plan's transfers)."""
        return cls.words(layer_sizes, options) / max(1, sum(layer_sizes))


def typed_options(compressor: type, values: Optional[Dict[str, object]]):
    """The compressor's options dataclass from a dict of values (only its own fields are read)."""
    names = {f.name for f in fields(compressor.options)}
    return compressor.options(**{k: v for k, v in (values or {}).items() if k in names})


def as_words(data: np.ndarray) -> np.ndarray:
    """Bytes (uint8) as little-endian uint32 words, zero-padded to a whole word."""
    padded = np.zeros(-(-len(data) // 4) * 4, np.uint8)
    padded[:len(data)] = data
    return padded.view("<u4")


def sign_bits(values: np.ndarray) -> np.ndarray:
    """One bit a value, set where it is negative, packed little-endian into uint32 words."""
    return as_words(np.packbits(values < 0, bitorder="little"))


def set_bits(words: np.ndarray, count: int) -> np.ndarray:
    """sign_bits' bits again, one uint8 (0 or 1) a value."""
    return np.unpackbits(np.ascontiguousarray(words, dtype="<u4").view(np.uint8), bitorder="little")[:count]


def signs_of(words: np.ndarray, count: int) -> np.ndarray:
    """+1 or -1 per value from sign_bits' words."""
    out = set_bits(words, count).astype(np.float32)
    out *= -2.0
    out += 1.0
    return out
