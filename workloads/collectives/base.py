"""What a collective operation says about itself: its buffer (pieces), what every rank holds after it, how
nccl-tests counts its bus bandwidth, and the plans that do it (its algorithms), each with its closed form.

A collective is defined by its result: (rank, piece, sources) triples saying that after it, `rank`'s `piece`
equals the sum over `sources` of their input `piece` (one source: a copy). Pieces not named are left undefined
(a rank's scratch). Every algorithm's plan is checked against that definition by the in-memory reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from workloads.plan import Plan, PlanError, PieceLayout, Step, fp32_sum_tolerance, piece_sizes, simulate

Result = Iterable[Tuple[int, int, Tuple[int, ...]]]  # (rank, piece, sources)


@dataclass(frozen=True)
class Way:
    """One algorithm of a collective: its plan for (ranks, root), and its time in units of TF (the op's size over
    one link) on a non-blocking network, given (ranks, size over the engine's chunk)."""

    name: str
    summary: str
    plan: Callable[[int, int], Plan]
    theory: Callable[[int, float], float]
    formula: str
    powers_of_two: bool = False  # recursive doubling and halving pair ranks by their bits
    uneven: Optional[Callable[[int, Sequence[int]], float]] = None  # ranks, elements per piece -> elements over
    # the busiest link, for an op whose pieces differ (all-to-all(v)): its closed form is then that over the rate
    exact: bool = True  # its closed form is its time on a non-blocking network (else a lower bound of it)

    def check(self, op: str, ranks: int) -> None:
        """PlanError unless this algorithm can do its collective over this many ranks."""
        if ranks < 2:
            raise PlanError(f"{op} --algo {self.name} needs at least 2 ranks, given {ranks}")
        if self.powers_of_two and ranks & (ranks - 1):
            raise PlanError(f"{op} --algo {self.name} pairs ranks by their bits and needs a power of two ranks, given "
                            f"{ranks}: use another algorithm or a topology of 2, 4, 8, 16 ... hosts")


@dataclass(frozen=True)
class Collective:
    """One collective operation, described for the plan builders, the checks, bench and theory."""

    name: str
    summary: str
    busbw_text: str  # nccl-tests' bus bandwidth factor, as doc/PERFORMANCE.md writes it
    busbw: Callable[[int], float]
    pieces: Callable[[int], int]  # pieces of the plan's buffer for this many ranks
    result: Callable[[int, int], Result]  # ranks, root -> (rank, piece, sources)
    ways: Tuple[Way, ...]
    rooted: bool = False
    into_root: bool = False  # its result lands on the root (gather, reduce): an algorithm may send it all at once
    buffer_factor: Callable[[int], int] = lambda ranks: 1  # the plan's buffer over the op's size (all-to-all: n)
    split: Optional[Callable[[int, int], List[int]]] = None  # ranks, buffer elements -> elements of each piece,
    # for an op whose pieces differ (None: the buffer in equal pieces)

    @property
    def algorithms(self) -> Tuple[str, ...]:
        """The names of its algorithms."""
        return tuple(w.name for w in self.ways)

    def way(self, name: str) -> Way:
        """The algorithm called name, or PlanError listing this op's algorithms."""
        for w in self.ways:
            if w.name == name:
                return w
        raise PlanError(f"{self.name} has no algorithm '{name}': valid are {', '.join(self.algorithms)}")

    def plan(self, algorithm: str, ranks: int, root: int = 0) -> Plan:
        """The plan of this op by that algorithm over ranks 0..ranks-1, rooted at root (rooted ops)."""
        way = self.way(algorithm)
        way.check(self.name, ranks)
        if not 0 <= root < ranks:
            raise PlanError(f"{self.name}: root {root} is not a rank: valid are 0..{ranks - 1}")
        return way.plan(ranks, root)

    def theory_s(self, algorithm: str, ranks: int, size_bytes: float, rate_bytes_s: float,
                 chunk_bytes: float) -> float:
        """Closed-form seconds of one op of size_bytes at the slowest link's payload rate."""
        way = self.way(algorithm)
        if way.uneven is not None:
            return 4 * way.uneven(ranks, self.op_pieces(size_bytes, ranks)) / rate_bytes_s
        return way.theory(ranks, size_bytes / chunk_bytes) * size_bytes / rate_bytes_s

    def op_pieces(self, size_bytes: float, ranks: int) -> List[int]:
        """Elements of each piece of the plan's buffer for an op of size_bytes."""
        return self.piece_elements(int(self.buffer_bytes(size_bytes, ranks)) // 4, ranks)

    def piece_elements(self, buffer_elements: int, ranks: int) -> List[int]:
        """Elements of each piece of a plan's buffer of this many elements."""
        if self.split is not None:
            return self.split(ranks, buffer_elements)
        return piece_sizes([buffer_elements], self.pieces(ranks))

    def layout(self, buffer_elements: int, ranks: int) -> PieceLayout:
        """The piece layout of a plan's buffer of this many elements."""
        if self.split is not None:
            return PieceLayout.per_layer(self.split(ranks, buffer_elements))
        return PieceLayout([buffer_elements], self.pieces(ranks))

    def bound_s(self, ranks: int, size_bytes: float, rate_bytes_s: float) -> float:
        """The op's bound whatever its algorithm (gloo's): the time at which busbw is the link rate, or for uneven
        pieces the busiest host link's bytes at the rate."""
        if self.split is not None:
            pieces = self.op_pieces(size_bytes, ranks)
            return min(4 * w.uneven(ranks, pieces) for w in self.ways if w.uneven) / rate_bytes_s
        return self.busbw(ranks) * size_bytes / rate_bytes_s

    def buffer_bytes(self, size_bytes: int, ranks: int) -> int:
        """The plan's buffer per rank for an op of size_bytes."""
        return size_bytes * self.buffer_factor(ranks)

    def expected(self, inputs: Dict[int, np.ndarray], layout: PieceLayout, root: int = 0
                 ) -> Dict[int, Tuple[np.ndarray, np.ndarray]]:
        """Per rank, (what its buffer must hold, where it is defined) after the op, from every rank's piece-major
        input (float64 sums)."""
        ranks = len(inputs)
        out = {r: (np.zeros(layout.total), np.zeros(layout.total, dtype=bool)) for r in range(ranks)}
        for rank, piece, sources in self.result(ranks, root):
            cut = slice(*layout.bounds[piece])
            out[rank][0][cut] = np.sum([inputs[s][cut].astype(np.float64) for s in sources], axis=0)
            out[rank][1][cut] = True
        return out

    def check_plan(self, plan: Plan, inputs: Dict[int, np.ndarray], layout: PieceLayout, root: int = 0) -> None:
        """AssertionError unless the plan, run in memory, leaves every rank what this op defines (within fp32
        rounding of its sums)."""
        out = simulate(plan, inputs, layout, zero_others=False)
        tolerance = fp32_sum_tolerance(list(inputs.values())) + 1e-30
        for rank, (want, defined) in self.expected(inputs, layout, root).items():
            err = np.where(defined, np.abs(out[rank] - want), 0.0)
            if np.any(err > tolerance):
                bad = int(np.argmax(err - tolerance))
                raise AssertionError(f"{plan.name}: rank {rank} element {bad} is {out[rank][bad]}, expected "
                                     f"{want[bad]}")


def absolute(place: int, root: int, ranks: int) -> int:
    """The rank at a place counted from the root."""
    return (place + root) % ranks


def rounds(ranks: int) -> int:
    """ceil(log2 ranks): the rounds of a binomial tree."""
    return max(1, math.ceil(math.log2(ranks)))


def make_plan(name: str, ranks: int, pieces: int, steps: Sequence[Step], contributors: Sequence[int] = (),
              barriers: bool = False) -> Plan:
    """A one-stream plan of these steps (empty steps dropped); barriers: a rank begins a step only when its
    earlier steps are done, sends out and receives in (MPI's blocking sendrecv per step)."""
    kept = tuple(tuple(step) for step in steps if step)
    return Plan(name, ranks, pieces, (kept,), tuple(contributors) or tuple(range(ranks)),
                meta={"barriers": True} if barriers else {})


def every(ranks: int) -> Tuple[int, ...]:
    """All ranks, as sources of a sum."""
    return tuple(range(ranks))


def all_but_one(ranks: int) -> float:
    """(n-1)/n: nccl-tests' bus bandwidth factor of the gathering and scattering ops."""
    return (ranks - 1) / ranks
