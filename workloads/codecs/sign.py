"""signSGD with majority vote (Bernstein et al., ICLR'19) and EF-signSGD (Karimireddy et al., ICML'19): one bit a
value on the wire, gathered. signSGD's update is the element-wise majority of the ranks' signs (a tie gives 0), so
--lr is the step of every coordinate; EF-signSGD sends each layer's scaled sign, mean |value| x sign, with its
memory of what that left out, and the ranks average the scaled signs."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from workloads.codecs.base import GatherCompressor, NoCodecOptions, set_bits, sign_bits, signs_of


CODE_RANKS = 8  # EF-signSGD's gathered() reads ranks' sign bits as one uint8 code per value up to this many ranks


def sign_words(values: int) -> int:
    """32-bit words of one bit a value."""
    return -(-values // 32)


class SignSGD(GatherCompressor):
    """Each rank's signs (bit set: negative; zero counts as +), the majority vote of all ranks' signs applied."""

    options = NoCodecOptions
    check = "vote"
    summary = "signSGD: 1 bit a value (its sign), gathered; the update is the ranks' majority vote"

    @classmethod
    def words(cls, layer_sizes: Sequence[int], options=None) -> int:
        """One bit a value."""
        return sign_words(sum(layer_sizes))

    def encode(self, vector: np.ndarray) -> np.ndarray:
        """The sign bits."""
        return sign_bits(vector)

    def decode(self, words: np.ndarray) -> np.ndarray:
        """+1 / -1 per value."""
        return signs_of(words, self.values)

    def gathered(self, payloads: Sequence[np.ndarray]) -> np.ndarray:
        """The majority vote: the sign of the sum of the ranks' signs (0 on a tie), counted in integers: the sum is
        the ranks less twice the negative ones."""
        negative = np.zeros(self.values, np.uint8 if len(payloads) < 256 else np.int32)  # a byte a count: 4x less
        for words in payloads:
            negative += set_bits(words, self.values)
        return np.sign(len(payloads) - 2 * negative.astype(np.int32)).astype(np.float32)

    def finish(self, gathered: np.ndarray, workers: int) -> np.ndarray:
        """The vote itself."""
        return gathered


class EFSignSGD(GatherCompressor):
    """Scaled sign with error feedback: per layer, mean |value| x sign (the layer's scale as one float32 word before its
    sign bits), the memory adding what it left out to the next gradient; the ranks' scaled signs averaged."""

    options = NoCodecOptions
    always_feedback = True
    summary = ("EF-signSGD: per layer mean |value| x sign, 1 bit a value and a 4-byte scale, with error feedback; "
               "gathered and averaged")

    @classmethod
    def words(cls, layer_sizes: Sequence[int], options=None) -> int:
        """A scale word per layer, then one bit a value."""
        return len(layer_sizes) + sign_words(sum(layer_sizes))

    def encode(self, vector: np.ndarray) -> np.ndarray:
        """Each layer's mean |value|, then the sign bits."""
        scales = np.array([np.abs(vector[a:b]).mean() if b > a else 0.0
                           for a, b in zip(self.bounds[:-1], self.bounds[1:])], dtype="<f4")
        return np.concatenate([scales.view("<u4"), sign_bits(vector)])

    def decode(self, words: np.ndarray) -> np.ndarray:
        """Each layer's scale times its signs."""
        layers = len(self.sizes)
        signs = signs_of(words[layers:], self.values)
        scales = words[:layers].view("<f4")
        return signs * np.repeat(scales, self.sizes).astype(np.float32)

    def gathered(self, payloads: Sequence[np.ndarray]) -> np.ndarray:
        """The ranks' scaled signs summed in rank order, read from one table per layer: a value's sign bits of all
        ranks form a code (bit r: rank r's), and the layer's table holds, for every code, the float32 sum in rank order
        that adding every rank's decode gives, bit for bit, at a fifth of its CPU time (more than 8 ranks: one
        decode at a time)."""
        ranks = len(payloads)
        if not 0 < ranks <= CODE_RANKS:
            return super().gathered(payloads)
        layers = len(self.sizes)
        codes = np.zeros(self.values, np.uint8)
        for rank, words in enumerate(payloads):
            bits = set_bits(words[layers:], self.values)
            np.left_shift(bits, rank, out=bits)
            np.bitwise_or(codes, bits, out=codes)
        every = np.arange(1 << ranks)
        table = np.zeros((layers, 1 << ranks), np.float32)
        for rank, words in enumerate(payloads):
            signs = np.where((every >> rank) & 1, np.float32(-1), np.float32(1)).astype(np.float32)
            table += words[:layers].view("<f4")[:, None] * signs[None, :]
        out = np.empty(self.values, np.float32)
        for layer, (a, b) in enumerate(zip(self.bounds[:-1], self.bounds[1:])):
            np.take(table[layer], codes[a:b], out=out[a:b])
        return out
