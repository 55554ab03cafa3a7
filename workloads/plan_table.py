"""Plans built as arrays: a large plan's transfers as one table (what the flow model reads directly), its steps made
into Transfer tuples only when something reads them."""

from __future__ import annotations

from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from workloads.plan import COPY, LAYOUT_SHARES, REDUCE, Plan, Transfer


@dataclass(frozen=True, eq=False)
class TransferTable:
    """A plan's transfers, one row each in plan order (stream after stream, step after step)."""

    src: np.ndarray
    dst: np.ndarray
    piece: np.ndarray
    copy: np.ndarray  # True: the transfer overwrites (COPY), else it adds (REDUCE)
    level: np.ndarray  # the link level a transfer must use, -1 where none
    step_ends: Tuple[Tuple[int, ...], ...]  # per stream, per step: the row after its last

    def step_rows(self) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each row's stream, step (within its stream) and step order (among all steps, in plan order)."""
        sizes, streams, steps, begin = [], [], [], 0
        for s, ends in enumerate(self.step_ends):
            for n, end in enumerate(ends):
                sizes.append(end - begin)
                streams.append(s)
                steps.append(n)
                begin = end
        order = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
        return np.array(streams, dtype=np.int64)[order], np.array(steps, dtype=np.int64)[order], order

    def step_arrays(self, begin: int, end: int) -> Tuple[np.ndarray, ...]:
        """Rows begin..end (one step's): src, dst, piece, copy, level."""
        rows = slice(begin, end)
        return self.src[rows], self.dst[rows], self.piece[rows], self.copy[rows], self.level[rows]


class GeneratedTable:
    """A TransferTable whose rows are made step by step by a function (a ring over 10,000 ranks is 2x10^8 rows: the
    flow model reads it a step at a time); the whole table is made only when something reads a column."""

    def __init__(self, step_ends: Tuple[Tuple[int, ...], ...], make: Callable[[int], Tuple[np.ndarray, ...]],
                 tokens: bool = False):
        self.step_ends = step_ends
        self.make = make  # global step index (plan order) -> src, dst, piece, copy, level (arrays it never changes)
        self.tokens = tokens  # its pieces move as tokens: each step moves a piece at most once, from its holder
        self.begins = {}
        begin, k = 0, 0
        for ends in step_ends:
            for end in ends:
                self.begins[begin] = k
                begin, k = end, k + 1
        self._columns: Optional[Tuple[np.ndarray, ...]] = None

    step_rows = TransferTable.step_rows

    def step_arrays(self, begin: int, end: int) -> Tuple[np.ndarray, ...]:
        """One step's rows (begin..end): src, dst, piece, copy, level."""
        return self.make(self.begins[begin])

    def columns(self) -> Tuple[np.ndarray, ...]:
        """Every row, made once."""
        if self._columns is None:
            steps = [self.make(k) for k in range(len(self.begins))]
            self._columns = tuple(np.concatenate(c) for c in zip(*steps)) if steps else \
                tuple(np.zeros(0, dtype=np.int64) for _ in range(5))
        return self._columns

    src = property(lambda self: self.columns()[0])
    dst = property(lambda self: self.columns()[1])
    piece = property(lambda self: self.columns()[2])
    copy = property(lambda self: self.columns()[3])
    level = property(lambda self: self.columns()[4])


class TableStep(SequenceABC):
    """One step of a table's plan: its Transfers, made when first read."""

    __slots__ = ("table", "start", "end", "made")

    def __init__(self, table: TransferTable, start: int, end: int):
        self.table, self.start, self.end, self.made = table, start, end, None

    def transfers(self) -> Tuple[Transfer, ...]:
        """The step's transfers as Transfer objects."""
        if self.made is None:
            src, dst, piece, copy, level = self.arrays()
            self.made = tuple(Transfer(a, b, p, COPY if c else REDUCE, None if lv < 0 else lv) for a, b, p, c, lv in
                              zip(src.tolist(), dst.tolist(), piece.tolist(), copy.tolist(), level.tolist()))
        return self.made

    def arrays(self) -> Tuple[np.ndarray, ...]:
        """The step's transfers as arrays: src, dst, piece, copy, level (-1: none)."""
        return self.table.step_arrays(self.start, self.end)

    def __len__(self) -> int:
        return self.end - self.start

    def __getitem__(self, i):
        return self.transfers()[i]

    def __iter__(self):
        return iter(self.transfers())

    def __eq__(self, other) -> bool:
        return isinstance(other, SequenceABC) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(self.transfers())

    def __repr__(self) -> str:
        return repr(self.transfers())


def table_plan(name: str, ranks: int, pieces: int, table: Union[TransferTable, GeneratedTable],
               contributors: Sequence[int],
               meta: Optional[Dict[str, object]] = None, layout: str = LAYOUT_SHARES) -> Plan:
    """A plan whose transfers are this table."""
    streams, begin = [], 0
    for ends in table.step_ends:
        steps = []
        for end in ends:
            steps.append(TableStep(table, begin, end))
            begin = end
        streams.append(tuple(steps))
    return Plan(name, ranks, pieces, tuple(streams), tuple(contributors), meta or {}, layout, table=table)
