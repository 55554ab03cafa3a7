"""Gradient compression, GRACE-style: a compressor (what values, with its own memory), a wire codec (how many
bits), a registry. A compressor wraps an all-reduce strategy: stage (the device's local work right after backward,
charged to the compute time), prepare (may negotiate with the other ranks), compress, all-reduce what it returns
with its codec, decompress into the averaged gradient.

TernGrad (Wen et al.): per-layer gradient clipping at c*sigma, a per-layer scaler shared across workers
(max), stochastic ternarization to {-1, 0, +1}. Workers all-reduce the integer ternary tensors, so the
sum has at most 2N+1 levels; each worker then applies scaler * sum / N to its own parameters
(parameter localization). On the wire integers travel bit-packed: 2 bits while values are ternary
(four per byte), then the narrowest width that holds a partial sum: ceil(log2(2N + 1)) bits for a sum of N
(the paper's 2N+1 levels of scaler sharing; it counts log2(2N + 1) bits, a fraction).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence, Tuple

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


def transfer_keys(plan):
    """Every transfer of a plan, keyed (stream, step, src, dst, piece) as the flow model's wire_bits are."""
    return [(s, n, t.src, t.dst, t.piece) for s, stream in enumerate(plan.streams) for n, step in enumerate(stream)
            for t in step]


class NoCompression:
    """fp32 as is: the all-reduce sums gradients and decompress averages them."""

    codec = None
    stages = False  # no local work before the exchange
    reduce = staticmethod(np.add)  # how the plan adds what it receives to what a rank holds
    check = "sum"  # the first iteration's sum is checked within fp32's rounding (workloads.verify)
    summary = "fp32 as is"

    @staticmethod
    def wire_bits(plan) -> None:
        """fp32 on the wire."""
        return None

    @staticmethod
    def wire_fraction(plan, piece_elems: Sequence[int]) -> float:
        """Wire bytes over fp32 bytes of the busiest sender."""
        return 1.0

    def __init__(self, layer_sizes: Sequence[int], seed: int):
        pass

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


class HalfCompressor(NoCompression):
    """A 16-bit float on the wire, as torch's fp16/bf16 DDP hooks and NCCL's half all-reduce: each gradient rounded
    to the format, every partial sum rounded again as it is made (so each hop carries exact format values and every
    rank ends with the same sum), averaged in fp32 after."""

    fmt = "fp16"
    rounding = staticmethod(round_fp16)
    check = "sum-fp16"
    summary = "IEEE half on the wire (each partial sum rounded to it): half of fp32's bytes"

    def __init__(self, layer_sizes: Sequence[int], seed: int):
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


class TernGradCompressor(NoCompression):
    """TernGrad around an all-reduce: clip and scale locally, share the scalers by max with every rank,
    ternarize, all-reduce the integers bit-packed on the wire, decode scaler * sum / N."""

    codec = PackedIntCodec()
    stages = True
    summary = ("TernGrad: per-layer clip and shared scaler, stochastic ternaries, integer sums bit-packed on the wire "
               "(ceil(log2(2c+1)) bits for c gradients)")

    def __init__(self, layer_sizes: Sequence[int], seed: int):
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


COMPRESSORS: Dict[str, type] = {"none": NoCompression, "terngrad": TernGradCompressor, "fp16": HalfCompressor,
                                 "bf16": Bf16Compressor}
SUMMING = tuple(COMPRESSORS)  # every compressor here composes with a summing plan (its values add on the way)
CODECS: Dict[str, type] = {"packed-int": PackedIntCodec, "lz4": LZ4Codec}
