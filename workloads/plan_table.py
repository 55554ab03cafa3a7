"""Plans built as arrays: a large plan's transfers as one table (what the flow model reads directly), its steps made
into Transfer tuples only when something reads them."""

from __future__ import annotations

from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple

import numpy as np

from workloads.plan import COPY, EVEN, REDUCE, Plan, Transfer


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


class TableStep(SequenceABC):
    """One step of a table's plan: its Transfers, made when first read."""

    __slots__ = ("table", "start", "end", "made")

    def __init__(self, table: TransferTable, start: int, end: int):
        self.table, self.start, self.end, self.made = table, start, end, None

    def transfers(self) -> Tuple[Transfer, ...]:
        """The step's transfers as Transfer objects."""
        if self.made is None:
            t, rows = self.table, slice(self.start, self.end)
            self.made = tuple(Transfer(a, b, p, COPY if c else REDUCE, None if lv < 0 else lv) for a, b, p, c, lv in
                              zip(t.src[rows].tolist(), t.dst[rows].tolist(), t.piece[rows].tolist(),
                                  t.copy[rows].tolist(), t.level[rows].tolist()))
        return self.made

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


def table_plan(name: str, ranks: int, pieces: int, table: TransferTable, contributors: Sequence[int],
               meta: Optional[Dict[str, object]] = None, layout: str = EVEN) -> Plan:
    """A plan whose transfers are this table."""
    streams, begin = [], 0
    for ends in table.step_ends:
        steps = []
        for end in ends:
            steps.append(TableStep(table, begin, end))
            begin = end
        streams.append(tuple(steps))
    return Plan(name, ranks, pieces, tuple(streams), tuple(contributors), meta or {}, layout, table=table)
