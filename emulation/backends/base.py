"""The interface the three back ends share (emulate, simulate, theory): prepare a checked job from a configuration,
execute it into a typed Summary. compare, reproduce and the Python API pick a back end from the registry in
__init__.py by a row's mode, and nothing else tells them apart."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol

from emulation.run.options import Label, RunConfig, flag_label
from emulation.run.resolution import Checked
from emulation.results.summary import Summary

Log = Callable[[str], None]


def quiet(message: str) -> None:
    """A log that says nothing."""


@dataclass(frozen=True)
class Job:
    """A configuration checked before anything starts, with what validation resolved."""

    cfg: RunConfig
    checked: Checked

    @property
    def replays_sibling(self) -> bool:
        """Whether it takes its TCP ports from the emulated row of its label in a compare config."""
        return False


class Backend(Protocol):
    """One way of answering a run-shaped question: real ranks on an emulated network, the flow model, or the
    closed forms."""

    mode: str

    def prepare(self, cfg: RunConfig, label: Label = flag_label, in_matrix: bool = False) -> Job:
        """The checked job (ValueError naming the bad input; in_matrix: a compare row, whose sibling rows have not
        run yet)."""

    def execute(self, job: Job, log: Log = quiet, progress: bool = True) -> Summary:
        """Run the checked job; its summary (written to the job's folder where the back end has one)."""
