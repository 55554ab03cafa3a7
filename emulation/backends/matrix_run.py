"""Running a compare matrix's rows: each entry's checked job (a figure taken from an earlier row set first, run again
while its `until` figure is missing), in turn here or as Dask tasks (matrix_tasks.py), each recorded as it lands so
`--resume` runs only the rest."""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import List, Optional

from emulation.backends.parallel_backends import backend_for
from emulation.backends.matrix_record import record, start_record
from emulation.backends.matrix_rows import COLUMNS, MachineWatch, command_row, job_row, parallel_row, row
from emulation.backends.matrix_tasks import failed_row, run_distributed, unpack
from emulation.results.files import write_table
from emulation.results.parallel_summary import ParallelSummary
from emulation.run.options import option_of, yaml_key


class ConfigError(ValueError):
    """The compare config is malformed; the message names the key."""


def derived_config(entry: dict, rows: List[dict]):
    """The row's configuration with its derived keys set from the earlier rows' figures (the row in its own sweep
    group when there is one), or an error naming what is missing."""
    values = {}
    for key, spec in entry["derived"].items():
        mine = [r for r in rows if r["label"] == spec["from"]]
        source = next((r for r in mine if all(r.get(k) == v for k, v in entry["sweep"].items() if k in r)),
                      mine[-1] if mine else None)
        figure = None if source is None else source.get(spec["metric"])
        if not isinstance(figure, (int, float)) or isinstance(figure, bool):
            return None, f"{key}: row '{spec['from']}' has no {spec['metric']} (got {figure!r})"
        values[key] = str(round(figure * spec.get("times", 1), 6))
    return dataclasses.replace(entry["config"], **values), None


def checked_job(backend, cfg, jobs, where: str):
    """A row's configuration checked on its back end (ConfigError naming the row)."""
    try:
        return backend.prepare(cfg, lambda n: f"{where}: {yaml_key(n, option_of(n))}", in_matrix=True,
                               **({} if jobs is None else {"jobs": jobs}))
    except ValueError as exc:
        text = str(exc)
        raise ConfigError(text if text.startswith(where) else f"{where}: {text}") from None


class JobsRows:
    """A run of several jobs in a compare config (`jobs:`): the jobs back end in the row's mode."""

    @staticmethod
    def prepare(cfg, label=None, in_matrix: bool = False, jobs=()):
        from emulation.backends import shared
        return shared.prepare(cfg, list(jobs), cfg.mode)

    @staticmethod
    def execute(job, log=lambda m: None, progress: bool = True) -> dict:
        from emulation.backends import shared
        return shared.execute(job, log)


JOBS_BACKEND = JobsRows()


def run_entry(entry: dict, earlier: List[dict], machine: Optional[MachineWatch], log, progress) -> tuple:
    """One entry's rows and accuracy curve: its derived keys set from the earlier rows, run again while its `until`
    figure is missing or zero (up to its attempts; each row then says how many it took)."""
    until = entry.get("until") or {}
    attempts = until.get("attempts", 1)
    job = entry["job"]
    if entry.get("derived"):
        cfg, missing = derived_config(entry, earlier)
        if missing:
            log(f"{entry['label']}: not run: {missing}")
            return [{**dict.fromkeys(COLUMNS), "label": entry["label"], "error": f"not run: {missing}",
                     **entry["sweep"]}], []
        job = checked_job(entry["backend"], cfg, entry["jobs"], entry["where"])
        entry = dict(entry, config=job.cfg, job=job)
    for attempt in range(1, attempts + 1):
        summary = entry["backend"].execute(job, log=log, progress=progress)
        curves = []
        if entry["jobs"] is not None:  # several jobs on one network: a row per job
            rows = [job_row(entry, summary, j) for j in summary["jobs"]]
        elif entry["command"] is not None:
            rows = [command_row(entry, summary)]
        elif isinstance(summary, ParallelSummary):
            rows = [parallel_row(entry, summary.to_dict())]
        else:
            rows = [row(entry, summary)]
            curves = [{"label": entry["label"], **entry["sweep"], "iteration": i, "accuracy": a}
                      for i, a in summary.get("accuracy_curve") or []]
        if machine is not None and rows[-1].get("mode") == "emulate":
            rows[-1].update(machine.after_run())
        if not until or rows[-1].get(until["metric"]):
            break
        value = rows[-1].get(until["metric"])
        log(f"{entry['label']}: {until['metric']} is {value}: " + (f"again ({attempt}/{attempts})" if attempt < attempts
                                                                  else f"still, after {attempts} attempts: kept"))
    if until:
        for r in rows:
            r["attempts"] = attempt
    return rows, curves


def run_rows(job, sweep_keys: List[str], log, progress) -> tuple:
    """Every entry's rows and curves, in the config's order: those that landed in an earlier run taken from it
    (--resume), the others run in turn here or as tasks on the scheduler, each recorded as it lands."""
    entries, out_root = job.entries, job.out
    landed = start_record(out_root, job.name, entries, job.resume)
    if job.resume:
        log(f"resume: {sum(x is not None for x in landed)} of {len(entries)} rows landed before; running the rest")
    todo = [i for i, x in enumerate(landed) if x is None]

    def done(i: int, result: dict) -> None:
        if result.get("tarball"):
            unpack(result["tarball"], entries[i]["out"])
        rows = result["rows"] if result["rows"] is not None else \
            [failed_row(entries[i], COLUMNS, f"failed on {result.get('machine') or 'a lost worker'}: "
                                             f"{result.get('error')}")]
        landed[i] = {"rows": rows, "curves": result.get("curves") or [],
                     **{k: result.get(k) for k in ("machine", "machine_id", "started", "finished")}}
        record(out_root, entries[i], landed[i])
        so_far = [r for x in landed if x is not None for r in x["rows"]]
        write_table(os.path.join(out_root, "comparison.csv"), so_far, COLUMNS, sweep_keys)

    if job.scheduler is not None:
        before = [r for x in landed if x is not None for r in x["rows"]]
        run_distributed(job.scheduler, [entries[i] for i in todo], [spec_of(entries[i], job) for i in todo],
                        out_root, before, lambda k, result: done(todo[k], result), log, run_in_worker)
    else:
        machine = MachineWatch() if job.emulated else None
        for n, i in enumerate(todo, 1):
            log(f"[{n}/{len(todo)}] {entries[i]['label']} {entries[i]['sweep'] or ''}")
            earlier = [r for x in landed[:i] if x is not None for r in x["rows"]]
            rows, curves = run_entry(entries[i], earlier, machine, log, progress)
            done(i, {"rows": rows, "curves": curves})
    return [r for x in landed for r in x["rows"]], [c for x in landed for c in x["curves"]]


def entry_emulated(entry: dict) -> bool:
    """Whether a matrix entry brings up an emulated network."""
    if entry["jobs"] is not None or entry["command"] is not None:
        return entry["job"].emulated
    return entry["backend"].mode == "emulate" and not entry["config"].local


def spec_of(entry: dict, job) -> dict:
    """What a task needs to check and run an entry on another machine (its checked job is built there again)."""
    return {**{k: v for k, v in entry.items() if k not in ("job", "backend")}, "emulated": entry_emulated(entry),
            "in_worker": entry["command"] is None and entry["config"].mode != "emulate",  # no process of its own
            "out_root": job.out, "sibling": bool(entry["job"].replays_sibling) if entry["command"] is None else False}


def rechecked(spec: dict, command_rows) -> dict:
    """A task's entry checked again on the machine that runs it (ValueError: this machine refuses it)."""
    where = spec.get("where") or spec["label"]
    if spec["command"] is not None:
        return dict(spec, backend=command_rows, job=command_rows.prepare(spec["command"], spec["out"], where))
    backend = backend_for(spec["config"]) if spec["jobs"] is None else JOBS_BACKEND
    job = checked_job(backend, spec["config"], spec["jobs"], where)
    if spec["config"].ecmp_ports and job.cfg.ecmp_ports != spec["config"].ecmp_ports:
        job.cfg.ecmp_ports = spec["config"].ecmp_ports
    return dict(spec, backend=backend, job=job, config=job.cfg)


def run_in_worker(spec: dict, earlier: List[dict]) -> dict:
    """A row that needs neither root nor the dmlbed parser (simulated, closed form) run in a Dask worker's process,
    whose imports stay loaded from row to row; a row that fails says why in its row."""
    try:
        rows, curves = run_alone(rechecked(spec, None), earlier, lambda m: None)
    except Exception as exc:  # noqa: BLE001 (the row failed: said in its row, the matrix goes on)
        return {"rows": None, "curves": [], "error": f"{type(exc).__name__}: {exc}"}
    return {"rows": rows, "curves": curves}


def run_alone(entry: dict, earlier: List[dict], log) -> tuple:
    """One entry run by itself (a task's child process), holding this machine's network lock if it is emulated."""
    from emulation.net.lock import NetworkLock
    with NetworkLock(wait=True) if entry["emulated"] else contextlib.nullcontext():
        return run_entry(entry, earlier, MachineWatch() if entry["emulated"] else None, log, progress=False)
