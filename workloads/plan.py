"""Synchronization plans as pure data, the piece layout they act on, and the in-memory reference simulator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

import numpy as np

if TYPE_CHECKING:
    from workloads.plan_table import TransferTable

REDUCE = "reduce"
COPY = "copy"
LAYOUT_SHARES = "even"        # a plan's piece p is the p-th share of every layer (balanced whatever the layers' sizes)
LAYOUT_TENSORS = "tensors"  # a plan's piece p is the whole tensor (layer) p, in order: pieces = the model's tensors


class PlanError(ValueError):
    """A plan is malformed, or an algorithm cannot run on a topology."""


@dataclass(frozen=True, slots=True)
class Transfer:
    """src sends its current value of `piece` to dst, which adds it (reduce) or overwrites with it (copy)."""

    src: int
    dst: int
    piece: int
    op: str = REDUCE
    level: Optional[int] = None  # BCube link level the transfer must use (None: routed/primary address)


Step = Tuple[Transfer, ...]


@dataclass(frozen=True)
class Plan:
    """Streams of steps: streams run concurrently on disjoint pieces; a step's transfers run concurrently."""

    name: str
    ranks: int
    pieces: int
    streams: Tuple[Tuple[Step, ...], ...]
    contributors: Tuple[int, ...]
    meta: Dict[str, object] = field(default_factory=dict, compare=False, hash=False)
    layout: str = LAYOUT_SHARES  # how a vector of layers is cut into its pieces (LAYOUT_SHARES or LAYOUT_TENSORS)
    table: Optional["TransferTable"] = field(default=None, compare=False, hash=False, repr=False)  # built as arrays

    def piece_layout(self, layer_sizes: Sequence[int]) -> "PieceLayout":
        """The layout of a vector of these layers in this plan's pieces (PlanError when a LAYOUT_TENSORS plan was built
        for another number of tensors)."""
        if self.layout == LAYOUT_TENSORS:
            self._check_tensors(layer_sizes)
            return PieceLayout.per_layer(layer_sizes)
        return PieceLayout(layer_sizes, self.pieces)

    def piece_sizes(self, layer_sizes: Sequence[int]) -> List[int]:
        """Elements per piece of piece_layout(layer_sizes), without building its index."""
        if self.layout == LAYOUT_TENSORS:
            self._check_tensors(layer_sizes)
            return [int(s) for s in layer_sizes]
        return piece_sizes(layer_sizes, self.pieces)

    def scaler_layout(self, layers: int) -> "PieceLayout":
        """The layout of one value per layer (a compressor's per-layer scalers) in this plan's pieces."""
        return self.piece_layout([1] * layers) if self.layout == LAYOUT_TENSORS else PieceLayout([layers], self.pieces)

    def _check_tensors(self, layer_sizes: Sequence[int]) -> None:
        if len(layer_sizes) != self.pieces:
            raise PlanError(f"{self.name}: built for {self.pieces} whole tensors, given {len(layer_sizes)} layers")

    def transfers(self):
        """Every transfer of every step of every stream."""
        return [t for stream in self.streams for step in stream for t in step]

    def bytes_sent(self, piece_bytes: Sequence[int]) -> Dict[int, int]:
        """Payload bytes each rank sends in one synchronization."""
        out = {r: 0 for r in range(self.ranks)}
        for t in self.transfers():
            out[t.src] += piece_bytes[t.piece]
        return out


def validate(plan: Plan) -> None:
    """Raise PlanError unless the plan is well formed (ranges, no self-sends, no read/write race)."""
    owners: Dict[int, int] = {}
    for s, stream in enumerate(plan.streams):
        for n, step in enumerate(stream):
            sent, received = set(), set()
            for t in step:
                if not (0 <= t.src < plan.ranks and 0 <= t.dst < plan.ranks) or t.src == t.dst:
                    raise PlanError(f"{plan.name}: bad transfer {t} in stream {s} step {n}")
                if not 0 <= t.piece < plan.pieces:
                    raise PlanError(f"{plan.name}: piece {t.piece} out of range in stream {s} step {n}")
                if t.op not in (REDUCE, COPY):
                    raise PlanError(f"{plan.name}: unknown op {t.op!r}")
                if owners.setdefault(t.piece, s) != s:
                    raise PlanError(f"{plan.name}: piece {t.piece} used by streams {owners[t.piece]} and {s}")
                sent.add((t.src, t.piece))
                received.add((t.dst, t.piece))
            race = sent & received
            if race:
                raise PlanError(f"{plan.name}: stream {s} step {n} both sends and receives {sorted(race)[:3]}")


def piece_sizes(layer_sizes: Sequence[int], pieces: int) -> List[int]:
    """Elements per piece of PieceLayout(layer_sizes, pieces), without building its index."""
    total = np.zeros(pieces, dtype=np.int64)
    steps = np.arange(pieces + 1, dtype=np.int64)
    for size in layer_sizes:
        total += np.diff(int(size) * steps // pieces)
    return [int(x) for x in total]


class PieceLayout:
    """Splits every layer into `pieces` chunks and lays the gradient out piece-major, so each piece is one
    contiguous slice (BML splits per layer; doing it for every plan keeps pieces balanced per layer)."""

    def __init__(self, layer_sizes: Sequence[int], pieces: int):
        self.layer_sizes = [int(s) for s in layer_sizes]
        self.pieces = pieces
        lengths = [sum(size * (p + 1) // pieces - size * p // pieces for size in self.layer_sizes)
                   for p in range(pieces)]
        bounds = np.cumsum([0] + lengths)
        self.bounds = [(int(bounds[p]), int(bounds[p + 1])) for p in range(pieces)]
        self.total = int(sum(self.layer_sizes))
        self._index: Optional[np.ndarray] = None
        self._whole_layers = False

    @property
    def index(self) -> np.ndarray:
        """Position in the flat (layer-major) gradient of each piece-major element, built on first use: a raw
        buffer's plan never needs it, and as int64 it is twice the buffer."""
        if self._index is None and self._whole_layers:
            self._index = np.arange(self.total, dtype=np.int64)
        if self._index is None:
            offsets = np.cumsum([0] + self.layer_sizes)
            per_piece: List[List[np.ndarray]] = [[] for _ in range(self.pieces)]
            for layer, size in enumerate(self.layer_sizes):
                cuts = [size * p // self.pieces for p in range(self.pieces + 1)]
                for p in range(self.pieces):
                    per_piece[p].append(np.arange(offsets[layer] + cuts[p], offsets[layer] + cuts[p + 1]))
            chunks = [np.concatenate(c) if c else np.zeros(0, dtype=np.int64) for c in per_piece]
            self._index = np.concatenate(chunks).astype(np.int64)
        return self._index

    @classmethod
    def per_layer(cls, layer_sizes: Sequence[int]) -> "PieceLayout":
        """One piece per layer, in order (parameter pulls move whole layers)."""
        self = cls.__new__(cls)
        self.layer_sizes = [int(s) for s in layer_sizes]
        self.pieces = len(self.layer_sizes)
        bounds = np.cumsum([0] + self.layer_sizes)
        self.bounds = [(int(bounds[p]), int(bounds[p + 1])) for p in range(self.pieces)]
        self.total = int(bounds[-1])
        self._index, self._whole_layers = None, True
        return self

    def piece_sizes(self) -> List[int]:
        """Number of elements in each piece."""
        return [b - a for a, b in self.bounds]

    def to_piece_major(self, flat: np.ndarray) -> np.ndarray:
        """Reorder a flat (layer-major) gradient into piece-major order."""
        return flat[self.index]

    def from_piece_major(self, buf: np.ndarray) -> np.ndarray:
        """Inverse of to_piece_major."""
        out = np.empty_like(buf)
        out[self.index] = buf
        return out


def simulate(plan: Plan, inputs: Dict[int, np.ndarray], layout: PieceLayout,
             zero_others: bool = True, reduce=None, codec=None) -> Dict[int, np.ndarray]:
    """Run a plan in memory on piece-major buffers; ranks that do not contribute start from zeros
    (servers aggregating gradients) unless zero_others is False (servers holding parameters); reduce: how a
    received value is added (reduce(mine, received, out=mine); default +=), codec: every transfer encoded and
    decoded on the way, as the engine sends it."""
    validate(plan)
    size = layout.total
    state = {r: (inputs[r].astype(np.float32).copy() if r in plan.contributors or not zero_others
                 else np.zeros(size, dtype=np.float32)) for r in range(plan.ranks)}
    for stream in plan.streams:
        for step in stream:
            outgoing = [(t, state[t.src][slice(*layout.bounds[t.piece])].copy()) for t in step]
            for t, value in outgoing:
                view = state[t.dst][slice(*layout.bounds[t.piece])]
                if codec is not None:
                    value = codec.decode(codec.encode(value), len(value))
                if t.op == REDUCE and reduce is not None:
                    reduce(view, value, out=view)
                elif t.op == REDUCE:
                    view += value
                else:
                    view[:] = value
    return state


def fp32_sum_tolerance(parts: Sequence[np.ndarray]) -> np.ndarray:
    """Per-element error bound of summing `parts` in fp32 in any order: 2 * n * eps * sum |x_i|."""
    return 2 * len(parts) * np.finfo(np.float32).eps * np.sum([np.abs(p.astype(np.float64)) for p in parts], axis=0)


def check_sum(plan: Plan, inputs: Dict[int, np.ndarray], layout: PieceLayout) -> None:
    """Raise AssertionError unless every contributor ends with the exact sum (within fp32 rounding)."""
    out = simulate(plan, inputs, layout)
    parts = [inputs[r] for r in plan.contributors]
    expected = np.sum([p.astype(np.float64) for p in parts], axis=0)
    tol = fp32_sum_tolerance(parts) + 1e-30
    for r in plan.contributors:
        err = np.abs(out[r] - expected)
        if np.any(err > tol):
            bad = int(np.argmax(err - tol))
            raise AssertionError(f"{plan.name}: rank {r} element {bad} is {out[r][bad]}, expected {expected[bad]}")
