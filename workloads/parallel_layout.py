"""A job's parallel layout (`--parallel tp=T,pp=P,dp=D[,ep=E]`): its degrees, the order ranks are numbered in
(Megatron-LM's by default: tensor fastest, then data, then pipeline) and each kind's groups of ranks."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Tuple

KINDS = ("tp", "pp", "dp")
DEFAULT_ORDER = ("tp", "dp", "pp")  # fastest-varying first, as Megatron-LM's initialize_model_parallel numbers them
FORMAT = "tp=T,pp=P,dp=D[,ep=E][,order=tp-dp-pp]"


class LayoutError(ValueError):
    """A parallel layout that is malformed or does not fit the job."""


@dataclass(frozen=True)
class Layout:
    """Degrees of tensor, pipeline and data parallelism, expert parallelism inside the data-parallel groups."""
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    order: Tuple[str, ...] = DEFAULT_ORDER

    @property
    def ranks(self) -> int:
        """How many ranks the job has (tp x pp x dp: experts are spread over data-parallel ranks)."""
        return self.tp * self.pp * self.dp

    @property
    def label(self) -> str:
        """Its --parallel spelling."""
        text = f"tp={self.tp},pp={self.pp},dp={self.dp}" + (f",ep={self.ep}" if self.ep > 1 else "")
        return text + ("" if self.order == DEFAULT_ORDER else f",order={'-'.join(self.order)}")

    def coords(self, rank: int) -> Dict[str, int]:
        """A rank's index along each kind."""
        out, rest = {}, rank
        for kind in self.order:
            size = getattr(self, kind)
            out[kind], rest = rest % size, rest // size
        return out

    def rank_of(self, coords: Dict[str, int]) -> int:
        """The rank at these indices."""
        rank, stride = 0, 1
        for kind in self.order:
            rank += coords[kind] * stride
            stride *= getattr(self, kind)
        return rank

    def groups(self, kind: str) -> List[List[int]]:
        """The groups of ranks that communicate as `kind` ('ep': consecutive data-parallel ranks), each in
        ascending index along it."""
        along = "dp" if kind == "ep" else kind
        out: Dict[tuple, List[int]] = {}
        for rank in range(self.ranks):
            c = self.coords(rank)
            key = tuple(sorted((k, v) for k, v in c.items() if k != along))
            if kind == "ep":
                key += (c["dp"] // self.ep,)
            out.setdefault(key, []).append(rank)
        return [sorted(g, key=lambda r: self.coords(r)[along]) for g in out.values()]

    def stage_of(self, rank: int) -> int:
        """A rank's pipeline stage."""
        return self.coords(rank)["pp"]

    def check(self, ranks: int, layers: int = None, heads: int = None, experts: int = None) -> "Layout":
        """This layout if it fits a job of `ranks` ranks and the model's layers, heads and experts (LayoutError
        naming what does not fit)."""
        if self.ranks != ranks:
            raise LayoutError(f"--parallel {self.label}: tp x pp x dp = {self.ranks}, but the job has {ranks} ranks "
                              f"(give degrees whose product is {ranks})")
        if layers is not None and layers % self.pp:
            raise LayoutError(f"--parallel {self.label}: {layers} layers do not split into pp={self.pp} stages "
                              f"(pp must divide the layer count)")
        if heads is not None and heads % self.tp:
            raise LayoutError(f"--parallel {self.label}: {heads} attention heads do not split over tp={self.tp} "
                              f"(tp must divide the head count)")
        if experts is not None and experts % self.ep:
            raise LayoutError(f"--parallel {self.label}: {experts} experts do not split over ep={self.ep}")
        return self


def parse_layout(text: str) -> Layout:
    """tp=T,pp=P,dp=D[,ep=E][,order=A-B-C] (LayoutError: what is wrong and what is valid)."""
    given: Dict[str, object] = {}
    for part in filter(None, text.split(",")):
        m = re.fullmatch(r"(tp|pp|dp|ep)=([1-9]\d*)|order=([a-z-]+)", part.strip())
        if not m:
            raise LayoutError(f"--parallel {text}: '{part}' is not a degree: give {FORMAT} (positive integers)")
        key = m.group(1) or "order"
        if key in given:
            raise LayoutError(f"--parallel {text}: {key} is given twice")
        given[key] = int(m.group(2)) if m.group(1) else tuple(m.group(3).split("-"))
    if not given.keys() & set(KINDS):
        raise LayoutError(f"--parallel {text}: give at least one of tp, pp, dp ({FORMAT})")
    order = given.pop("order", DEFAULT_ORDER)
    if sorted(order) != sorted(KINDS):
        raise LayoutError(f"--parallel {text}: order must name tp, pp and dp once each, fastest first "
                          f"(Megatron-LM's is {'-'.join(DEFAULT_ORDER)})")
    layout = Layout(order=order, **given)
    if layout.dp % layout.ep:
        raise LayoutError(f"--parallel {text}: ep={layout.ep} must divide dp={layout.dp} (experts are spread over "
                          f"data-parallel ranks)")
    return layout


def check_layout_format(text: str) -> str:
    """A --parallel value as written if it parses ('' : none)."""
    if text:
        parse_layout(text)
    return text
