"""The jobs back end (`dmlbed jobs`): several jobs on one network, each on its own hosts, emulated, simulated or in
closed form; each job's iteration together against the same job alone on the same hosts (its slowdown), and per
iteration how much of its synchronization overlapped another job's."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from emulation.backends.base import Log, quiet
from emulation.backends.job_rows import job_row, overlap_fields, start_s, thin_gap_note, timing
from emulation.backends.jobs_flow import JobsFlowModel
from emulation.core.job_specs import JobSpec, holds
from emulation.run.jobs_check import CheckedJobs, check_jobs
from emulation.run.options import RunConfig
from emulation.run.outputs import output_folder
from emulation.results.files import write_atomic
from emulation.results.provenance import provenance
from emulation.run.resolution import Checked
from emulation.results.iterations import WARMUP, median_after_warmup
from emulation.backends.heads import head
from workloads.models import tensor_sizes

EMULATE = "emulate"
MODES = (EMULATE, "simulate", "theory")
REPORT = "jobs.json"


@dataclass(frozen=True)
class JobsRun:
    """Jobs checked before anything starts, and how to answer: emulate, simulate or theory."""

    jobs: CheckedJobs
    mode: str

    @property
    def cfg(self) -> RunConfig:
        return self.jobs.cfg

    @property
    def emulated(self) -> bool:
        """Whether real ranks run on an emulated network."""
        return self.mode == EMULATE

    @property
    def replays_sibling(self) -> bool:
        """A compare row of jobs never takes another row's TCP ports."""
        return False


def prepare(cfg: RunConfig, texts: Sequence[str], mode: str) -> JobsRun:
    """Check every job (ValueError naming the bad input) and the output folder (theory writes one only when --out
    is given)."""
    if mode not in MODES:
        raise ValueError(f"--mode {mode} is unknown: valid are {', '.join(MODES)}")
    jobs = check_jobs(cfg, texts, mode == EMULATE)
    for spec, c in zip(jobs.specs, jobs.checked):
        if mode == EMULATE:
            continue
        if c.compute.varies:
            raise ValueError(f"job {spec.name}: simulate and theory time jobs of fixed compute (an emulated run "
                             f"takes drawn compute)")
        if c.cfg.overlap or c.algorithm.forward_phase is not None or c.algorithm.plan is None:
            raise ValueError(f"job {spec.name}: simulate and theory time jobs whose iteration is compute then one "
                             f"plan ({c.cfg.algo}{' with --overlap' if c.cfg.overlap else ''} is not)")
    if mode != "theory" or cfg.out:  # the folder last: bad input leaves nothing behind
        cfg = replace(cfg, out=output_folder(cfg.out, (REPORT,), "a jobs run", cfg.force, "jobs"))
        jobs = check_jobs(cfg, texts, mode == EMULATE)
    return JobsRun(jobs, mode)


def execute(run: JobsRun, log: Log = quiet) -> dict:
    """Answer in the run's mode; jobs.json in --out (theory: only when --out is given)."""
    rows = ANSWERS[run.mode](run.jobs, log)
    report = {"mode": run.mode, "topology": run.jobs.network.topo.spec, "jobs": rows,
              "warmup": WARMUP, "config": {"out": run.cfg.out, "iters": run.cfg.iters, "bw": run.cfg.bw},
              "provenance": provenance()}
    if run.cfg.out:
        os.makedirs(run.cfg.out, exist_ok=True)
        write_atomic(os.path.join(run.cfg.out, REPORT), json.dumps(report, indent=1))
    return report


def plan_links(checked: Checked, router) -> set:
    """The directed links a job's plan uses."""
    plan = checked.algorithm.build_plan(checked.topo, checked.servers, checked.options, checked.bw,
                                        4 * sum(tensor_sizes(checked.cfg.model)), tensor_sizes(checked.cfg.model))
    names = {h.index: h.name for h in checked.topo.hosts}
    return {hop for t in plan.transfers() for hop in router.between(names[t.src], names[t.dst])}


def theory_rows(jobs: CheckedJobs, log: Log = quiet) -> List[dict]:
    """The closed forms: alone, C + M; jobs that share no link keep it; k jobs in phase on a shared link take
    C + kM; two jobs whose synchronizations are at least M apart (M <= C) keep C + M; anything else has none."""
    from emulation.simulation.routes import Router
    router = Router(jobs.network.topo, "spread")
    alone = {s.name: (c.compute.mean, head(c).gst_theory_s) for s, c in zip(jobs.specs, jobs.checked)}
    links = {s.name: plan_links(c, router) for s, c in zip(jobs.specs, jobs.checked)}
    rows = []
    for spec, checked in zip(jobs.specs, jobs.checked):
        c, m = alone[spec.name]
        sharing = [o for o in jobs.specs if o.name != spec.name and links[o.name] & links[spec.name]]
        row = job_row(spec, checked, jobs.hosts[spec.name])
        row["alone"] = {"iteration_s": c + m, "gst_s": m, "formula": "C + M (compute, then the job's GST alone)"}
        together, formula, gap = closed_form_together(spec, c, m, sharing, alone)
        row["together"] = {"iteration_s": together, "formula": formula}
        row["gap_min_s"] = gap
        note = thin_gap_note(gap, c + m, "the closed form")
        if note:
            row["note"] = note
        row["shares_links_with"] = [o.name for o in sharing]
        row["slowdown"] = together / (c + m) if together is not None else None
        rows.append(row)
    return rows


def closed_form_together(spec: JobSpec, c: float, m: float, sharing: Sequence[JobSpec],
                         alone: Dict[str, Tuple[float, float]]) -> Tuple[Optional[float], str, Optional[float]]:
    """A job's iteration beside the jobs it shares links with, where a closed form exists, and the gap between its
    synchronizations and theirs where the form keeps them apart."""
    if not sharing:
        return c + m, "C + M: it shares no link with another job", None
    group = [spec, *sharing]
    periods = {round(sum(alone[j.name]), 12) for j in group}
    if len(periods) > 1 or any(alone[j.name][1] != m for j in group):
        return None, "no closed form: the jobs sharing its links differ in compute or GST (simulate answers)", None
    period = c + m
    starts = sorted(start_s(j, period) % period for j in group)
    if len(set(starts)) == 1:
        return c + len(group) * m, (f"C + {len(group)}M: {len(group)} jobs in phase share a link, each "
                                    f"synchronization at 1/{len(group)} of it (the shared link their bottleneck)"), None
    gaps = [(b - a) for a, b in zip(starts, starts[1:])] + [period - starts[-1] + starts[0]]
    if len(group) == 2 and min(gaps) >= m - 1e-12 and m <= c:
        return (c + m, "C + M: two jobs offset by at least M (M <= C): their synchronizations never meet",
                max(0.0, min(gaps) - m))
    return None, "no closed form: the jobs' synchronizations partly meet (simulate answers)", None


def simulated_rows(jobs: CheckedJobs, log: Log = quiet) -> List[dict]:
    """The flow model: each job alone on its hosts, then every job together, each iteration timed."""
    from emulation.simulation.jobs_model import others_syncs
    model = JobsFlowModel(jobs)
    alone_s = {}
    for t in model.timed:
        log(f"simulating {t.name} alone")
        alone_s[t.name] = model.run([t])
    periods = {t.name: median_after_warmup(alone_s[t.name].iterations(t)) for t in model.timed}
    together_jobs = model.starting({spec.name: start_s(spec, periods[spec.name]) for spec in jobs.specs})
    log(f"simulating {len(together_jobs)} jobs together")
    waits = holds(jobs.specs, {t.name: t.start_s for t in together_jobs},
                  {t.name: (t.compute_s, periods[t.name] - t.compute_s) for t in model.timed})
    together = model.run(together_jobs, waits)
    rows = []
    for spec, checked, t in zip(jobs.specs, jobs.checked, together_jobs):
        row = job_row(spec, checked, jobs.hosts[spec.name])
        row["alone"] = timing(alone_s[t.name].iterations(t), alone_s[t.name].gsts(t.name))
        row["together"] = timing(together.iterations(t), together.gsts(t.name))
        row["start_s"] = t.start_s
        row["slowdown"] = row["together"]["iteration_mean_s"] / row["alone"]["iteration_mean_s"]
        row.update(overlap_fields(together.syncs[t.name], others_syncs(together, t.name)))
        note = thin_gap_note(row["gap_min_s"], row["alone"]["iteration_mean_s"], "the flow model")
        if note:
            row["note"] = note
        rows.append(row)
    return rows


def emulated(jobs: CheckedJobs, log: Log = quiet) -> List[dict]:
    """Real ranks on the emulated network (shared_emulation.py)."""
    from emulation.backends.shared_emulation import emulated_rows
    return emulated_rows(jobs, log)


ANSWERS = {EMULATE: emulated, "simulate": simulated_rows, "theory": theory_rows}  # how each mode answers
