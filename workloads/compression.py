"""TernGrad's arithmetic and the wire packings it and Parameter Flow use (the compressors that use them are in
workloads/codecs/).

TernGrad (Wen et al.): per-layer gradient clipping at c*sigma, a per-layer scaler shared across workers
(max), stochastic ternarization to {-1, 0, +1}. Workers all-reduce the integer ternary tensors, so the
sum has at most 2N+1 levels; each worker then applies scaler * sum / N to its own parameters
(parameter localization). On the wire integers travel bit-packed: 2 bits while values are ternary
(four per byte), then the narrowest width that holds a partial sum: ceil(log2(2N + 1)) bits for a sum of N
(the paper's 2N+1 levels of scaler sharing; it counts log2(2N + 1) bits, a fraction).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np

CLIP_SIGMAS = 2.5
WIDTHS = tuple(range(2, 17))  # bits per packed integer: ceil(log2(2m + 1)) for sums of magnitude m


class CodecError(ValueError):
    """A message cannot be encoded or decoded."""


def clip(layer: np.ndarray, c: float = CLIP_SIGMAS) -> np.ndarray:
    """TernGrad eq. 9: limit every value to [-c*sigma, c*sigma] of its layer."""
    sigma = float(layer.std())
    if sigma == 0.0:
        return layer.copy()
    return np.clip(layer, -c * sigma, c * sigma)


@dataclass
class Staged:
    """A worker's gradient made ready on its device for ternarizing once the scalers are shared."""

    magnitude: np.ndarray  # |clipped gradient|
    signs: np.ndarray      # its signs, float32
    draws: np.ndarray      # a uniform [0, 1) draw per value: the Bernoulli trials need no scaler until compared
    scalers: np.ndarray    # local per-layer max |clipped gradient|


class TernGrad:
    """Per-layer clip, scaler, ternarize; decode(sum) = scaler * sum / workers."""

    def __init__(self, layer_sizes: Sequence[int], seed: int):
        self.bounds = np.cumsum([0] + list(layer_sizes))
        self.rng = np.random.default_rng(seed)

    def layers(self, flat: np.ndarray) -> List[np.ndarray]:
        """Views of each layer in a flat (layer-major) gradient."""
        return [flat[a:b] for a, b in zip(self.bounds[:-1], self.bounds[1:])]

    def clip_and_scale(self, flat: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """(clipped flat gradient, local per-layer scalers max|g|) -- scalers are then shared by max."""
        clipped = np.concatenate([clip(l) for l in self.layers(flat)]) if len(flat) else flat.copy()
        scalers = np.array([float(np.abs(l).max()) if l.size else 0.0 for l in self.layers(clipped)],
                           dtype=np.float32)
        return clipped, scalers

    def stage(self, flat: np.ndarray) -> Staged:
        """Everything ternarizing needs but the shared scalers (clip, local scalers, magnitudes, signs, random draws):
        a worker's device does this right after backward."""
        clipped, scalers = self.clip_and_scale(flat)
        draws = self.rng.random(len(clipped), dtype=np.float32)
        return Staged(np.abs(clipped), np.sign(clipped).astype(np.float32, copy=False), draws, scalers)

    def ternary(self, staged: Staged, shared: np.ndarray) -> np.ndarray:
        """Eq. 1-2 with the shared scalers: sign(g) * [draw * scaler < |g|], as float32 in {-1, 0, 1}."""
        out = np.zeros(len(staged.signs), np.float32)
        for a, b, s in zip(self.bounds[:-1], self.bounds[1:], shared):
            if s > 0.0:
                np.multiply(staged.signs[a:b], staged.draws[a:b] * np.float32(s) < staged.magnitude[a:b], out=out[a:b])
        return out

    def decompress(self, summed: np.ndarray, shared: np.ndarray, workers: int) -> np.ndarray:
        """The averaged gradient: scaler * (sum of ternaries) / workers, per layer."""
        out = summed.astype(np.float32).copy()
        for view, s in zip(self.layers(out), shared):
            view *= s / workers
        return out


def width_for(values: np.ndarray) -> int:
    """Narrowest wire width (bits) holding every integer in values, offset to be non-negative."""
    m = int(np.abs(values).max()) if values.size else 0
    for w in WIDTHS:
        if 2 * m + 1 <= 2 ** w:
            return w
    raise CodecError(f"integer {m} does not fit in {WIDTHS[-1]} bits")


def partial_sum_width(contributors: int) -> int:
    """Bits per value the packed codec needs, at most, for a partial sum of `contributors` ternary gradients."""
    for w in WIDTHS:
        if 2 * contributors + 1 <= 2 ** w:
            return w
    raise CodecError(f"a sum of {contributors} ternaries does not fit in {WIDTHS[-1]} bits")


def terngrad_widths(plan) -> Dict[Tuple[int, int, int, int, int], int]:
    """Bits per value of every transfer of a plan when TernGrad's integers travel packed, keyed (stream, step, src,
    dst, piece): a transfer carries a partial sum of c gradients, at most partial_sum_width(c) bits (2 while
    ternary)."""
    contributors = set(plan.contributors)
    counts: Dict[Tuple[int, int], int] = {}
    widths: Dict[Tuple[int, int, int, int, int], int] = {}
    for s, stream in enumerate(plan.streams):
        for n, step in enumerate(stream):
            moved = []
            for t in step:
                c = counts.get((t.src, t.piece), 1 if t.src in contributors else 0)
                widths[(s, n, t.src, t.dst, t.piece)] = partial_sum_width(max(c, 1))
                moved.append((t, c))
            for t, c in moved:
                key = (t.dst, t.piece)
                mine = counts.get(key, 1 if t.dst in contributors else 0)
                counts[key] = mine + c if t.op == "reduce" else c
    return widths


def terngrad_wire_fraction(plan, piece_elems: Sequence[int]) -> float:
    """Wire bytes over fp32 bytes of the plan's busiest sender when TernGrad's integers travel packed
    (terngrad_widths)."""
    fp32: Dict[int, float] = {}
    wire: Dict[int, float] = {}
    for (_, _, src, _, piece), width in terngrad_widths(plan).items():
        size = piece_elems[piece] * 4
        fp32[src] = fp32.get(src, 0.0) + size
        wire[src] = wire.get(src, 0.0) + size * width / 32
    if not fp32:
        return 1.0
    busiest = max(fp32, key=lambda r: (fp32[r], wire[r]))
    return wire[busiest] / fp32[busiest]


def pack_words(offset: np.ndarray, w: int) -> bytes:
    """Values below 2**w (w <= 8) as a little-endian bit stream, 8 values per w bytes: each group of 8 is
    or-ed into one 64-bit word whose low w bytes are the group's bytes (what np.packbits(bitorder="little") of
    every value's w bits gives, at a tenth of its time for odd widths)."""
    count = len(offset)
    groups = -(-count // 8)
    padded = np.zeros(groups * 8, np.uint64)
    padded[:count] = offset
    padded = padded.reshape(groups, 8)
    words = np.zeros(groups, np.uint64)
    for j in range(8):
        words |= padded[:, j] << np.uint64(j * w)
    body = words.astype("<u8").view(np.uint8).reshape(groups, 8)[:, :w].reshape(-1)
    return body[:-(-count * w // 8)].tobytes()


def unpack_words(body: np.ndarray, count: int, w: int) -> np.ndarray:
    """The inverse of pack_words: `count` values of w <= 8 bits from a little-endian bit stream."""
    groups = -(-count // 8)
    head = body[:groups * w]
    padded = np.zeros(groups * w, np.uint8)
    padded[:len(head)] = head
    words = np.zeros((groups, 8), np.uint8)
    words[:, :w] = padded.reshape(groups, w)
    words = words.view("<u8").reshape(-1)
    out = np.empty((groups, 8), np.int32)
    for j in range(8):
        out[:, j] = (words >> np.uint64(j * w)) & np.uint64(2 ** w - 1)
    return out.reshape(-1)[:count]


class PackedIntCodec:
    """Wire codec for float32 arrays holding small integers: 1 header byte (width), then packed values."""

    name = "packed-int"

    def encode(self, values: np.ndarray) -> bytes:
        """Pack integer-valued floats with the narrowest width."""
        ints = np.rint(values).astype(np.int32)
        if not np.array_equal(ints, values):
            raise CodecError("packed-int codec only carries integer values")
        w = width_for(ints)
        offset = ints + (2 ** (w - 1) - 1)
        if w == 16:
            body = offset.astype("<u2").tobytes()
        elif w == 8:
            body = offset.astype(np.uint8).tobytes()
        elif w < 8:
            body = pack_words(offset, w)
        else:  # 9 to 15 bits (sums of over 127 ternaries): a little-endian bit stream
            bits = ((offset.astype(np.uint32)[:, None] >> np.arange(w, dtype=np.uint32)) & 1).astype(np.uint8)
            body = np.packbits(bits.reshape(-1), bitorder="little").tobytes()
        return bytes([w]) + body

    def decode(self, data: bytes, count: int) -> np.ndarray:
        """Unpack `count` values encoded by encode()."""
        w = data[0]
        body = np.frombuffer(data, dtype=np.uint8, offset=1)
        if w == 16:
            u = np.frombuffer(data, dtype="<u2", offset=1)[:count].astype(np.int32)
        elif w == 8:
            u = body[:count].astype(np.int32)
        elif w in WIDTHS and w < 8:
            if len(body) < -(-count * w // 8):
                raise CodecError(f"message holds {len(body) * 8 // w} values, expected {count}")
            u = unpack_words(body, count, w)
        elif w in WIDTHS:
            bits = np.unpackbits(body, bitorder="little")[:count * w]
            if len(bits) != count * w:
                raise CodecError(f"message holds {len(bits) // w} values, expected {count}")
            u = (bits.reshape(count, w).astype(np.int32) << np.arange(w, dtype=np.int32)).sum(axis=1)
        else:
            raise CodecError(f"unknown width {w}")
        if len(u) != count:
            raise CodecError(f"message holds {len(u)} values, expected {count}")
        return (u - (2 ** (w - 1) - 1)).astype(np.float32)


class LZ4Codec:
    """Wire codec for sparse float32 updates (DVF leaves most entries zero): LZ4 frame of the raw bytes."""

    name = "lz4"

    def encode(self, values: np.ndarray) -> bytes:
        """Compress the float32 bytes."""
        import lz4.frame
        return lz4.frame.compress(np.ascontiguousarray(values, dtype=np.float32).tobytes())

    def decode(self, data: bytes, count: int) -> np.ndarray:
        """Decompress `count` float32 values."""
        import lz4.frame
        out = np.frombuffer(lz4.frame.decompress(data), dtype=np.float32)
        if len(out) != count:
            raise CodecError(f"message holds {len(out)} values, expected {count}")
        return out
