"""A parallel job's three back ends (`--parallel` in theory, simulate and run, and a compare row with `parallel:`):
the closed form, the flow model and real ranks on the emulated network, each as the Backend interface has it; and
the choice of a configuration's back end (its mode's, or a parallel job's in that mode)."""

from __future__ import annotations

from emulation.backends import BACKENDS, parallel_emulation, parallel_job
from emulation.backends.base import Backend, Log, quiet
from emulation.results.parallel_summary import ParallelSummary
from emulation.run.options import Label, RunConfig, flag_label


class ParallelModel:
    """The closed form (theory) or the flow model (simulate) of a parallel job."""

    def __init__(self, mode: str):
        self.mode = mode

    def prepare(self, cfg: RunConfig, label: Label = flag_label, in_matrix: bool = False) -> parallel_job.ParallelRun:
        return parallel_job.prepare(cfg, self.mode, label)

    def execute(self, job: parallel_job.ParallelRun, log: Log = quiet, progress: bool = True) -> ParallelSummary:
        return parallel_job.execute(job, self.mode, log=log)


class ParallelEmulate:
    """Real ranks of a parallel job on the emulated network, judged beside the flow model."""

    mode = "emulate"

    @staticmethod
    def prepare(cfg: RunConfig, label: Label = flag_label, in_matrix: bool = False):
        return parallel_emulation.prepare(cfg, label)

    @staticmethod
    def execute(job, log: Log = quiet, progress: bool = True) -> ParallelSummary:
        return parallel_emulation.execute(job, log=log)


PARALLEL_BACKENDS = {b.mode: b for b in (ParallelModel("theory"), ParallelModel("simulate"), ParallelEmulate())}


def backend_for(cfg: RunConfig) -> Backend:
    """The back end of a configuration: its mode's, or a parallel job's in that mode (--parallel)."""
    return PARALLEL_BACKENDS[cfg.mode] if cfg.parallel else BACKENDS[cfg.mode]
