"""`dmlbed run --parallel`: a transformer job under tensor, pipeline and data parallelism by real processes on the
emulated network (`workloads.parallel_train` on every host, started as `dmlbed launch` starts a command), read back
and judged against the flow model of the same job on the same network: the summary holds what was measured (bytes
per kind, iteration, each stage's bubble, the pipeline's timeline), the flow model's and the closed form's iteration
beside it, whether every rank's weights equal the unsplit model's, and a fidelity verdict in which the run's time
over the flow model's counts as the emulator's share, as a run's does."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace

from emulation.backends import launcher as launch
from emulation.backends import parallel_job
from emulation.backends.base import Log, quiet
from emulation.results.cause_rules import verdict_and_cause
from emulation.results.files import write_summary
from emulation.results.parallel_summary import ParallelSummary
from emulation.run.options import Label, RunConfig, flag_label
from workloads.parallel_records import collect

LAUNCH_FOLDER = "launch"  # the ranks' outputs and launch's own summary, under the run's folder
EXACT = 1e-5  # fp32 on the wire against the unsplit model in fp32 on one process


@dataclass(frozen=True)
class ParallelEmulation:
    """A checked emulated parallel job: the job and its network, and the ranks' command as launch runs it."""
    run: parallel_job.ParallelRun
    launch: launch.LaunchJob

    @property
    def cfg(self) -> RunConfig:
        return self.run.cfg

    @property
    def replays_sibling(self) -> bool:
        """A parallel job takes no TCP ports from another row."""
        return False


def rank_command(run: parallel_job.ParallelRun) -> list:
    """What every host runs: workloads.parallel_train with the job's model, layout, batches, schedule and compute."""
    cfg, job = run.cfg, run.job
    return [sys.executable, "-m", "workloads.parallel_train", "--model", job.model.label, "--parallel",
            job.layout.label, "--micro-batches", str(job.micro_batches), "--batch", str(cfg.batch), "--schedule",
            job.schedule, "--iterations", str(cfg.iters), "--compute-time", repr(run.compute_s), "--seed",
            str(cfg.seed)]


def prepare(cfg: RunConfig, label: Label = flag_label) -> ParallelEmulation:
    """The job checked as theory and simulate check it, with a rank on every host, then the launch of its ranks
    (the network, the command, the folder) checked before anything starts."""
    run = parallel_job.prepare(cfg, "emulate", label)
    inner = replace(run.cfg, out=os.path.join(run.cfg.out, LAUNCH_FOLDER), force=True, algo=None)
    return ParallelEmulation(run, launch.prepare(inner, rank_command(run)))


def execute(job: ParallelEmulation, log: Log = quiet) -> ParallelSummary:
    """Launch the ranks, read them back, run the flow model of the same job, judge, write summary.json."""
    launched = launch.execute(job.launch, log=log)
    flow = parallel_job.execute(replace(job.run, cfg=replace(job.cfg, out="")), "simulate", log=log)
    summary = replace(flow, mode="emulate", out=job.cfg.out, dilation=job.cfg.dilation,
                      flow_model_iteration_s=flow.iteration_s, error=launched.error)
    if launched.completed:
        measured(summary, collect(job.launch.cfg.out), flow.iteration_s)
    else:  # nothing of the flow model's stands in for what the ranks did not measure
        summary.bytes_per_kind, summary.bubble_per_stage, summary.timeline = {}, [], []
        summary.iteration_s = summary.pipeline_s = summary.over_theory = None
        summary.correct = False
    summary.fidelity = judged(launched.fidelity, summary.over_flow_model, flow.iteration_s)
    os.makedirs(job.cfg.out, exist_ok=True)
    write_summary(job.cfg.out, summary.to_dict())
    return summary


def measured(summary: ParallelSummary, got: dict, flow_s: float) -> None:
    """The ranks' numbers in place of the flow model's: bytes per kind, iteration, pipeline, bubbles, timeline."""
    summary.bytes_per_kind = {k: round(v) for k, v in got["bytes_per_iteration_by_kind"].items()}
    summary.iteration_s, summary.pipeline_s = got["iteration_median_s"], got["pipeline_median_s"]
    summary.bubble_per_stage, summary.timeline = got["bubble_per_stage"], got["timeline"]
    summary.over_theory = summary.iteration_s / summary.iteration_theory_s if summary.iteration_theory_s else None
    summary.over_flow_model = summary.iteration_s / flow_s if flow_s else None
    summary.max_weight_difference = got["max_weight_difference"]
    summary.correct = got["max_weight_difference"] is not None and got["max_weight_difference"] < EXACT


def judged(fidelity: dict, over: float, flow_s: float) -> dict:
    """Launch's verdict from outside the ranks, with the iteration over the flow model of the same job and network
    as the scenario model's ratio (beyond it: the emulator's share)."""
    fid = dict(fidelity or {})
    if over is None or fid.get("verdict") == "not measured":
        return fid
    fid["scenario_model"] = {"measured_over_model": round(over, 4), "model_iteration_s": flow_s,
                             "model": "the flow model of the same job on the same network (simulate --parallel)"}
    fid.update(verdict_and_cause(fid, 1, flow_s))
    return fid
