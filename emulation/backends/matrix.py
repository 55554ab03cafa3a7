"""A compare config's matrix of runs (what `dmlbed compare` and `dmlbed reproduce` run): every row checked on its
back end before the first one starts, then run in turn -> comparison.csv/json, plots, the paper's claims beside
ours (paper.csv) and simulated beside emulated GST (sim_vs_emu.csv)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shlex
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import yaml

from emulation.backends import BACKENDS
from emulation.backends.parallel_backends import backend_for
from emulation.backends.matrix_record import check_resumable
from emulation.backends.matrix_rows import COLUMNS
from emulation.backends.matrix_run import JOBS_BACKEND, ConfigError, checked_job, entry_emulated, run_rows
from emulation.backends.matrix_tasks import Scheduler, check_reachable, parse_scheduler
from emulation.core.job_specs import parse_jobs
from emulation.core.topology_file import is_topology_file
from emulation.results import claims as paper
from emulation.results import targets as bench_targets
from emulation.run.options import OptionError, RunConfig, from_mapping
from emulation.run.outputs import check_output, claim_folder, default_parent, planned_folder
from emulation.results.files import read_json, write_atomic, write_table
from emulation.results.figures import plot
from emulation.results.provenance import provenance



def load(path: str) -> dict:
    """Read and check a compare config."""
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list) or not data["runs"]:
        raise ConfigError(f"{path} needs a non-empty 'runs' list")
    return beside(data, os.path.dirname(os.path.abspath(path)))


def beside(data: dict, folder: str) -> dict:
    """The config with each relative topology file it names (a `topo` value, a command row's word) that exists
    beside it read from there, so a config and its files run from any directory."""
    def resolved(value):
        text = str(value)
        near = os.path.join(folder, text)
        return near if is_topology_file(text) and not os.path.isabs(text) and os.path.isfile(near) else value
    for part in [data.get("defaults")] + [e for e in data["runs"] if isinstance(e, dict)]:
        if isinstance(part, dict) and "topo" in part:
            part["topo"] = resolved(part["topo"])
    for entry in data["runs"]:
        if isinstance(entry, dict) and isinstance(entry.get("command"), str):
            try:
                words = shlex.split(entry["command"])
            except ValueError:  # a malformed line: the command rows' own check says what is wrong
                continue
            if [resolved(w) for w in words] != words:
                entry["command"] = shlex.join(resolved(w) for w in words)
    return data


def rows(data: dict, out_root: str, local: bool = False) -> List[dict]:
    """Every run of the matrix (runs x the cartesian product of `sweep` values; with `repeat: N` all of it N times
    over), its keys read but not yet checked on its back end: a label, its sweep values, where it is (for messages)
    and its RunConfig (or, for a `command:` row, the command line)."""
    defaults = data.get("defaults", {}) or {}
    sweep = data.get("sweep", {}) or {}
    if not isinstance(defaults, dict) or not isinstance(sweep, dict):
        raise ConfigError("'defaults' and 'sweep' must be mappings")
    for key, values in sweep.items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"sweep: '{key}' needs a non-empty list of values")
    try:
        from_mapping(defaults, "defaults")
        from_mapping({k: v[0] for k, v in sweep.items()}, "sweep")
    except OptionError as exc:
        raise ConfigError(str(exc)) from None
    repeats = repeat_values(data)
    out, names = [], {}
    for i, entry in enumerate(data["runs"]):
        if not isinstance(entry, dict):
            raise ConfigError(f"runs[{i}] must be a mapping")
        entry = dict(entry)
        jobs, command = entry.pop("jobs", None), entry.pop("command", None)
        until = checked_until(entry.pop("until", None), f"runs[{i}]")
        check_special(jobs, command, entry, f"runs[{i}]")
        combos = combinations(sweep, entry.pop("sweep", None), f"runs[{i}]") if command is None else [{}]
        for combo in ([{**c, REPEAT: n} for c in combos for n in repeats] if repeats else combos):
            merged = {**defaults, **{k: v for k, v in combo.items() if k != REPEAT}, **entry}
            if merged.get("mode", "emulate") != "emulate":  # a default for the machine the row does not use
                merged = {k: v for k, v in merged.items() if k not in EMULATION_ONLY or k in entry or k in combo}
            if command is None and ("topo" not in merged or "algo" not in merged):
                raise ConfigError(f"runs[{i}] needs 'topo' and 'algo' (or 'command')")
            label = str(merged.pop("label", None) or f"{merged.get('algo')} {merged.get('topo')}")
            where, out_dir = named(label, combo, f"runs[{i}]", names, out_root)
            if command is not None:
                out.append({"label": label, "sweep": combo, "where": where, "config": None, "jobs": None,
                            "command": command, "out": out_dir, "until": until})
                continue
            merged, derived = derived_options(merged, where, {e["label"] for e in out})
            try:  # compare owns its run folders: a rerun of the matrix replaces them
                fixed = dict(out=out_dir, force=True, **({"local": True} if local else {}))
                cfg = from_mapping(merged, where, **fixed)
            except ValueError as exc:
                text = str(exc)
                raise ConfigError(text if text.startswith(where) else f"{where}: {text}") from None
            out.append({"label": label, "sweep": combo, "where": where, "config": cfg, "jobs": jobs, "command": None,
                        "out": out_dir, "until": until, "derived": derived})
    # repetitions run round-robin (the whole matrix, then again), so a drift of the machine spreads over every row
    return sorted(out, key=lambda e: e["sweep"].get(REPEAT, 0))


# defaults that stretch or load this machine under an emulated run: a simulated or closed-form row of the same
# config has no machine, so it does not take them from `defaults` (given on the row or swept, they are refused)
EMULATION_ONLY = ("dilation", "cpu_hog")
REPEAT = "repeat"  # the sweep key of a config's `repeat: N` (each row run N times, judged each time)
MAX_REPEAT = 100


def repeat_values(data: dict) -> List[int]:
    """The repetitions of every row ([] when the config does not repeat them)."""
    n = data.get(REPEAT)
    if n is None:
        return []
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_REPEAT:
        raise ConfigError(f"'{REPEAT}' must be a whole number of runs from 1 to {MAX_REPEAT}, got {n!r}")
    if REPEAT in (data.get("sweep") or {}):
        raise ConfigError(f"'{REPEAT}' is the key of the config's repetitions: it cannot also be swept")
    return list(range(1, n + 1))


def sweep_keys_of(data: dict) -> List[str]:
    """The keys a row's sweep values are kept under (the config's sweep, then its repetition)."""
    return list((data.get("sweep") or {}).keys()) + ([REPEAT] if data.get(REPEAT) is not None else [])


MAX_ATTEMPTS = 20
DERIVED_KEYS = {"from", "metric", "times"}


def derived_options(merged: dict, where: str, earlier: set) -> tuple:
    """The row's keys with each `{from: LABEL, metric: FIGURE, times: F}` value (set when the row runs, from an
    earlier row's figure) in place of its option's default for checking, and those derived keys."""
    derived = {k: v for k, v in merged.items() if isinstance(v, dict) and "from" in v}
    for key, spec in derived.items():
        times = spec.get("times", 1)
        if set(spec) - DERIVED_KEYS or not isinstance(spec.get("metric"), str) or isinstance(times, bool) or \
                not isinstance(times, (int, float)) or times <= 0:
            raise ConfigError(f"{where}: '{key}' from another row needs {{from: LABEL, metric: FIGURE, times: F}} "
                              f"(F > 0, default 1), e.g. {{from: alone, metric: communication_s, times: 1.2}}")
        if spec["from"] not in earlier:
            raise ConfigError(f"{where}: '{key}' is taken from row '{spec['from']}', which is not listed before it "
                              f"(earlier labels: {', '.join(sorted(earlier)) or 'none'})")
    defaults = {f.name: f.default for f in dataclasses.fields(RunConfig)}
    return {**merged, **{k: defaults.get(k, 0) for k in derived}}, derived


def checked_until(until, where: str) -> Optional[dict]:
    """A row's `until: {metric: FIGURE, attempts: N}` (run again while the figure is missing or zero), or None."""
    if until is None:
        return None
    if not isinstance(until, dict) or set(until) != {"metric", "attempts"} or not isinstance(until["metric"], str) \
            or not isinstance(until["attempts"], int) or not 1 <= until["attempts"] <= MAX_ATTEMPTS:
        raise ConfigError(f"{where}: 'until' needs {{metric: FIGURE, attempts: N}} (N 1-{MAX_ATTEMPTS}): the row "
                          f"runs again while its FIGURE is missing or zero, e.g. {{metric: "
                          f"link_events.0.connections_across_before, attempts: 10}}")
    return until


def check_special(jobs, command, entry: dict, where: str) -> None:
    """A row of several jobs (`jobs:`) or a row that is one dmlbed command (`command:`), checked for form."""
    if jobs is not None and (not isinstance(jobs, list) or not jobs or not all(isinstance(j, str) for j in jobs)):
        raise ConfigError(f"{where}: 'jobs' must be a non-empty list of job strings ('name=a hosts=h0..h3 "
                          f"...', as dmlbed jobs --job takes)")
    if command is None:
        return
    if not isinstance(command, str) or not command.strip() or jobs is not None:
        raise ConfigError(f"{where}: 'command' must be one dmlbed command line without 'dmlbed' (e.g. 'net "
                          f"bcube:3,2 --bw 100 --check'), and a row has either 'command' or 'jobs'")
    if set(entry) - {"label"}:
        raise ConfigError(f"{where}: a 'command' row takes only a 'label' (and 'until') beside it (its options are "
                          f"in the command line), not '{sorted(set(entry) - {'label'})[0]}'")
    if "label" not in entry:
        raise ConfigError(f"{where}: a 'command' row needs a 'label'")


def named(label: str, combo: dict, where: str, names: Dict[str, str], out_root: str):
    """(where the row is, its results folder), refused when another row has the same label and sweep values."""
    suffix = "-".join(f"{k}{v}" for k, v in combo.items())
    name = "".join(c if c.isalnum() or c in "-_." else "_" for c in f"{label}-{suffix}".strip("-"))
    where = f"{where} ({label})"
    if name in names:
        raise ConfigError(f"{where}: label '{label}' {('with ' + suffix + ' ') if suffix else ''}is also "
                          f"{names[name]}'s: each run needs its own label (its results folder)")
    names[name] = where
    return where, os.path.join(out_root, name)


def expand(data: dict, out_root: str, local: bool = False, command_rows=None) -> List[dict]:
    """Every run of the matrix (rows), each validated once on its back end: a label, its sweep values, its RunConfig,
    its back end and its checked job (a `command:` row checked by command_rows, the commands layer's)."""
    out = []
    for entry in rows(data, out_root, local):
        where, cfg = entry.pop("where"), entry["config"]
        if entry["command"] is not None:
            if command_rows is None:
                raise ConfigError(f"{where}: a 'command' row runs only from dmlbed compare or reproduce")
            out.append(dict(entry, backend=command_rows, job=command_rows.prepare(entry["command"], entry["out"],
                                                                                  where)))
            continue
        if entry["jobs"] is not None and cfg.parallel:
            raise ConfigError(f"{where}: 'parallel' is one job on its own row; a row of several jobs ('jobs') "
                              f"takes none (give the parallel job a row of its own)")
        backend = backend_for(cfg) if entry["jobs"] is None else JOBS_BACKEND
        job = checked_job(backend, cfg, entry["jobs"], where)
        cfg = job.cfg  # the configuration the checked job runs
        if job.replays_sibling:
            cfg.ecmp_ports = emulated_sibling(out, entry["label"], entry["sweep"], where)
        out.append(dict(entry, where=where, config=cfg, backend=backend, job=job))
    return out


def row_labels(entries: List[dict]) -> List[str]:
    """The labels of the matrix's rows: each run's, and for a run of several jobs each job's (LABEL/JOB)."""
    out = []
    for e in entries:
        out.append(e["label"])
        out += [f"{e['label']}/{spec.name}" for spec in parse_jobs(e["jobs"] or ())]
    return list(dict.fromkeys(out))


def emulated_sibling(entries: List[dict], label: str, combo: dict, where: str) -> str:
    """The folder of the emulated run listed before with this label and these sweep values (but mode)."""
    same = {k: v for k, v in combo.items() if k != "mode"}
    for e in entries:
        if e["label"] == label and e["backend"] is BACKENDS["emulate"] and e["command"] is None and \
                {k: v for k, v in e["sweep"].items() if k != "mode"} == same:
            return e["config"].out
    raise ConfigError(f"{where}: ecmp_ports 'emulated' needs an emulated run with the label '{label}' listed "
                      f"before it")


def combinations(sweep: dict, override, where: str) -> List[dict]:
    """The sweep values one run takes: the config's sweep, with the run's own `sweep:` replacing some keys' lists
    (e.g. a 1024-server run only simulated in a matrix that also emulates)."""
    if override is not None:
        if not isinstance(override, dict) or not set(override) <= set(sweep):
            raise ConfigError(f"{where}: 'sweep' must be a mapping over the config's sweep keys "
                              f"({', '.join(sweep) or 'none'})")
        for key, values in override.items():
            if not isinstance(values, list) or not values:
                raise ConfigError(f"{where}: sweep '{key}' needs a non-empty list of values")
        sweep = {**sweep, **override}
    return [dict(zip(sweep, values)) for values in itertools.product(*sweep.values())] if sweep else [{}]


PROVENANCE_FILE = "provenance.json"  # where the comparison's rows came from
TARGETS_FILE = "targets.csv"  # the config's targets, judged
TARGET_COLUMNS = ["target", "ours", "verdict", "met", "how", "why"]
SIM_AGREES = 0.10  # simulated GST within 10% of emulated


def sim_vs_emu(rows: List[dict], sweep_keys: List[str]) -> List[dict]:
    """Rows that ran both emulated and simulated (same label and sweep values but mode): GSTs, their ratio,
    whether they agree within 10%, and the emulated run's fidelity verdict."""
    keys = [k for k in sweep_keys if k != "mode"]
    emulated = {(r["label"], *(r.get(k) for k in keys)): r for r in rows if r["mode"] == "emulate"}
    out = []
    for r in rows:
        e = emulated.get((r["label"], *(r.get(k) for k in keys))) if r["mode"] == "simulate" else None
        if e is None:
            continue
        ratio = r["gst_median_s"] / e["gst_median_s"] if r.get("gst_median_s") and e.get("gst_median_s") else None
        out.append({"label": r["label"], **{k: r.get(k) for k in keys}, "emulated_gst_s": e.get("gst_median_s"),
                    "simulated_gst_s": r.get("gst_median_s"), "sim_over_emu": ratio,
                    "agrees": None if ratio is None else abs(ratio - 1) <= SIM_AGREES,
                    "emulation_fidelity": e.get("fidelity")})
    return out


def config_name(data: dict, path: str) -> str:
    """A compare config's name: its `name`, else its file name."""
    return data.get("name") or os.path.splitext(os.path.basename(path))[0]


@dataclass(frozen=True)
class CompareJob:
    """A comparison checked before anything starts: the config, every run's checked job, the paper claims."""

    name: str
    data: dict
    entries: List[dict]
    claims: List[dict]
    out: str
    wait: bool = False
    targets: List[dict] = ()
    scheduler: Optional[Scheduler] = None  # the Dask scheduler the rows run on (None: in turn, here)
    resume: bool = False  # run only the rows that have not landed in out

    @property
    def emulated(self) -> bool:
        """Whether any run brings up an emulated network (then the matrix holds the network lock)."""
        return any(entry_emulated(e) for e in self.entries)


def prepare(path: str, out_root: str = None, local: bool = False, force: bool = False,
            wait: bool = False, kind: str = "compare", command_rows=None, scheduler: Optional[str] = None,
            resume: bool = False) -> CompareJob:
    """Everything a compare needs, checked before anything starts: config, every run, paper claims, targets, output
    (--out, or a new results/KIND/NAME/DATE-TIME), the scheduler its rows run on (reached, with a worker)."""
    where_to = parse_scheduler(scheduler)
    if resume and not out_root:
        raise ConfigError("--resume runs the rows missing from an earlier run's folder: give that folder as --out")
    data = load(path)
    planned = out_root or planned_folder(default_parent(kind, config_name(data, path)))
    entries = expand(data, planned, local, command_rows)
    labels = row_labels(entries)
    try:
        claims = paper.claims(data, labels)
        repeats = repeat_values(data)
        checked_targets = bench_targets.targets(data, labels, {**(data.get("sweep") or {}),
                                                               **({REPEAT: repeats} if repeats else {})})
    except (paper.PaperError, bench_targets.TargetError) as exc:
        raise ConfigError(str(exc)) from None
    name = config_name(data, path)
    if resume:
        check_resumable(out_root, name, entries)
    elif out_root:
        check_output(out_root, ("comparison.json",), "a comparison", force)
    else:
        claim_folder(planned)  # its runs' folders are named inside it already
    job = CompareJob(name, data, entries, claims, planned, wait, checked_targets, where_to, resume)
    if where_to is not None:
        check_reachable(where_to, job.emulated)
    return job


def compare(path: str, out_root: str = None, local: bool = False,
            log: Callable[[str], None] = lambda m: None, progress: bool = True, force: bool = False,
            wait: bool = False, command_rows=None) -> Dict[str, object]:
    """Check and run a compare config (see execute)."""
    return execute(prepare(path, out_root, local, force, wait, command_rows=command_rows), log, progress)


def execute(job: CompareJob, log: Callable[[str], None] = lambda m: None, progress: bool = True) -> Dict[str, object]:
    """Run every checked configuration; write comparison.csv/json, paper.csv and plots (holding the network lock
    for the whole matrix, so no other run slips in between two of its runs; on a scheduler, each emulated row holds
    its own machine's)."""
    if not job.emulated or job.scheduler is not None:
        return _execute(job, log, progress)
    from emulation.net.lock import NetworkLock
    with NetworkLock(wait=job.wait):
        return _execute(job, log, progress)


def _execute(job: CompareJob, log, progress) -> Dict[str, object]:
    """execute() holding the lock."""
    data, out_root = job.data, job.out
    sweep_keys = sweep_keys_of(data)
    os.makedirs(out_root, exist_ok=True)
    rows, curves = run_rows(job, sweep_keys, log, progress)
    write_table(os.path.join(out_root, "comparison.csv"), rows, COLUMNS, sweep_keys)
    write_atomic(os.path.join(out_root, "comparison.json"), json.dumps(rows, indent=1))
    write_atomic(os.path.join(out_root, PROVENANCE_FILE), json.dumps({"name": job.name, **provenance()}, indent=1))
    plots = plot(out_root, rows, sweep_keys, curves)
    if curves:
        write_table(os.path.join(out_root, "accuracy.csv"), curves, ["label", *sweep_keys, "iteration", "accuracy"])
    claims = paper.table(job.claims, rows, sweep_keys)
    if claims:
        write_table(os.path.join(out_root, "paper.csv"), claims, ["what", "kind", "evidence", *sweep_keys, "paper",
                                                                  "ours", "ours_over_paper", "verdict", "agrees",
                                                                  "how", "derived", "why"])
    pairs = sim_vs_emu(rows, sweep_keys)
    if pairs:
        write_table(os.path.join(out_root, "sim_vs_emu.csv"), pairs, list(pairs[0]))
    judged = bench_targets.table(list(job.targets), rows, sweep_keys)
    if judged:
        write_table(os.path.join(out_root, TARGETS_FILE), judged, ["what", *sweep_keys, *TARGET_COLUMNS])
    return {"name": job.name, "out": out_root, "rows": rows, "plots": plots, "sweep_keys": sweep_keys,
            "paper": claims, "source": (data.get("paper") or {}).get("source"), "sim_vs_emu": pairs,
            "targets": judged}


def judge_again(job: CompareJob) -> Dict[str, object]:
    """The config's runs in job.out judged again with its targets as they are now (nothing runs): targets.csv
    rewritten, the rows and their provenance as the run left them."""
    rows = read_json(os.path.join(job.out, "comparison.json"))
    if rows is None:
        raise ConfigError(f"{job.out} holds no comparison.json: run the config first")
    sweep_keys = sweep_keys_of(job.data)
    judged = bench_targets.table(list(job.targets), rows, sweep_keys)
    if judged:
        write_table(os.path.join(job.out, TARGETS_FILE), judged, ["what", *sweep_keys, *TARGET_COLUMNS])
    return {"name": job.name, "out": job.out, "rows": rows, "plots": [], "sweep_keys": sweep_keys, "paper": [],
            "source": None, "sim_vs_emu": [], "targets": judged}


def reproducible(folder: str, block: str = "paper") -> Dict[str, str]:
    """Name -> path of every config in folder with a `paper:` block (what `dmlbed reproduce` can run), or with
    another block (`targets`: the benchmark's configs)."""
    out = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if name.endswith(".yaml"):
            with open(os.path.join(folder, name)) as f:  # libyaml's loader where built: --help lists them at once
                if block in (yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}):
                    out[name[:-5]] = os.path.join(folder, name)
    return out
