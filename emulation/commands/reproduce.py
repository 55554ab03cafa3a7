"""`dmlbed reproduce NAME | --all | --list | --config FILE | --bench [NAME]`: a paper's config run, with the paper's
values beside ours; with --all every paper config in turn and one table of every claim (papers.md, papers.csv), each
with the paper's value and source, ours, how ours was obtained, and the verdict; with --bench the benchmark's configs
(configs/bench/) in turn and one table of every target (targets.md, targets.csv)."""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Tuple

import yaml

from emulation.backends import matrix
from emulation.commands.base import Command, failed_rows, matrix_flags, matrix_passed
from emulation.commands.command_rows import COMMAND_ROWS
from emulation.results import claims as paper, papers_archive
from emulation.results.claims import print_paper
from emulation.results.targets import bench_line, print_targets
from emulation.run.options import OptionError, command_option
from emulation.run.outputs import check_output, claim_folder, default_parent, planned_folder
from emulation.results.files import write_atomic, write_table
from emulation.run.progress import log
from emulation.results.provenance import provenance

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIGS = os.path.join(PROJECT, "configs")
BENCH = os.path.join(CONFIGS, "bench")  # the benchmark's configs: runs with targets (`make benchmark`)
DOCS_PAGE = os.path.join(PROJECT, "docs", "reference", "papers.md")  # --docs: the documentation's papers page
ARCHIVE = papers_archive.archive_of(DOCS_PAGE)  # the rows and provenance the page was written from


class Reproduce(Command):
    name, help = "reproduce", "run a paper's config and print the paper's values beside ours"
    reports = True
    description = ("Runs one of the paper configs (configs/ with a `paper:` block) and prints each claim: the "
                   "paper's value and where it says so, ours and how it was obtained, and the verdict.")
    examples = (
        ("the papers' figures dmlbed reproduces, each with its config",
         "--list"),
        ("BML's Fig. 5 run again, the paper's values beside ours",
         "bml-fig5 --out results/bml-fig5"),
        ("every benchmark config judged against its targets (what `make benchmark` runs)",
         "--bench --out results/bench"),
        ("one benchmark config, or any config of yours with claims or targets",
         "--config configs/bench/scale.yaml --out results/bench-scale"),
    )
    own = (command_option("name", f"{', '.join(matrix.reproducible(CONFIGS))} (see --list)", positional=True,
                          nargs="?"),
           command_option("list", "list the paper configs (with --bench: the benchmark's)", False, kind=bool),
           command_option("all", "run every paper config, one after another, and write one table of every claim "
                          "(papers.md, papers.csv)", False, kind=bool),
           command_option("docs", "with --all: also write the documentation's papers page (docs/reference/papers.md), "
                          "headed by this run's command, date and commit", False, kind=bool),
           command_option("config", "run this config file (its `paper:` claims and `targets:` judged)"),
           command_option("bench", "run the benchmark's configs (configs/bench/, or the one NAME gives) and write one "
                          "table of every target (targets.md, targets.csv)", False, kind=bool),
           command_option("judge", "with --bench: run nothing, judge the runs in --out again with the configs' "
                          "targets as they are now (targets.csv rewritten; the figures keep their run's provenance)",
                          False, kind=bool),
           *matrix_flags("reproduction"))

    def prepare(self, args):
        configs = matrix.reproducible(CONFIGS)
        if args.list:  # with --bench, the benchmark's configs
            return matrix.reproducible(BENCH, "targets") if args.bench else configs
        if sum(map(bool, (args.all, args.bench, args.config))) > 1:
            raise OptionError("--all, --bench and --config each choose what runs: give one of them")
        if args.judge and not (args.bench and args.out):
            raise OptionError("--judge judges a benchmark's runs again: give it with --bench and the --out they are in")
        if args.docs and not args.all:
            raise OptionError("--docs writes the papers page from every config's claims: give it with --all")
        if args.config:
            if args.name:
                raise OptionError("--config runs the file it names: give either --config or a name, not both")
            return matrix.prepare(args.config, args.out, args.local, args.force, args.wait, kind="reproduce",
                                  command_rows=COMMAND_ROWS, scheduler=args.scheduler, resume=args.resume)
        if args.bench:
            return prepare_bench(args)
        if args.all:
            if args.name:
                raise OptionError("--all runs every paper config: give either --all or a name, not both")
            return prepare_all(configs, args.out, args.local, args.force, args.wait, DOCS_PAGE if args.docs else None,
                               scheduler=args.scheduler, resume=args.resume)
        if not args.name:
            raise OptionError(f"a name is required: {', '.join(configs)} (or --all, --bench, --config or --list)")
        if args.name not in configs:
            raise OptionError(f"no paper config named '{args.name}': valid are {', '.join(configs)}")
        return matrix.prepare(configs[args.name], args.out, args.local, args.force, args.wait, kind="reproduce",
                              scheduler=args.scheduler, resume=args.resume)

    def needs_root(self, job):
        return isinstance(job, (matrix.CompareJob, AllJob)) and job.emulated

    def execute(self, job, args):
        if isinstance(job, dict):
            return {"list": job}
        if isinstance(job, AllJob):
            return execute_all(job, log=log, progress=not args.json)
        return dict(matrix.execute(job, log=log, progress=not args.json), reproduced=args.name or job.name)

    def report(self, result):
        if "rows" not in result or "bench" in result or "claims" in result:  # --list, --all, --bench: each
            return None  # config's report is drawn in its own folder's terms (dmlbed compare draws one per config)
        from emulation.results.report import compare_report
        return compare_report(result)

    def show(self, result):
        if "list" in result:
            width = max(map(len, result["list"]), default=0) + 2
            for name, path in result["list"].items():
                print(f"{name:<{width}}{os.path.relpath(path)}")
            return
        if "bench" in result:
            print_targets(result["targets"], ["config"])
            print(f"\n{bench_line(result['targets'])}\nevery target: {result['out']}/targets.md and targets.csv; "
                  f"each config's runs in its own folder there")
            return
        if "claims" in result:
            print_claim_counts(result["claims"])
            print(f"\nevery claim: {result['out']}/papers.md and papers.csv; each config's runs in its own folder "
                  f"there" + (f"; the documentation's page: {result['docs']}" if result.get("docs") else ""))
            return
        if result.get("paper"):
            print_paper(result)
        if result.get("targets"):
            print_targets(result["targets"], result["sweep_keys"])
        print(f"\nevery run: {result['out']}/comparison.csv (paper.csv and targets.csv hold the tables above)")

    def as_json(self, result):
        if "list" in result:
            return result["list"]
        if "bench" in result:
            return {"out": result["out"], "targets": result["targets"], "configs": result["configs"]}
        if "claims" in result:
            return {"out": result["out"], "claims": result["claims"], "configs": result["configs"]}
        return {"name": result["reproduced"], "out": result["out"], "paper": result["paper"],
                "source": result.get("source"), "targets": result.get("targets")}

    def exit_code(self, result):
        return 0 if "list" in result else matrix_passed(result)

    def failure(self, result):
        return None if "list" in result or "rows" not in result else failed_rows(result)


def print_claim_counts(claims: List[dict]) -> None:
    """Per paper config, how many of its claims agree, differ, have no value, are not judged or are out of reach
    here; then the counts per kind of evidence."""
    counts: Dict[str, Dict[str, int]] = {}
    for c in claims:
        config = counts.setdefault(c["config"], {})
        config[c["verdict"]] = config.get(c["verdict"], 0) + 1
    for name, by_verdict in counts.items():
        print(f"  {name:<22} " + ", ".join(f"{n} {v}" for v, n in sorted(by_verdict.items())))
    print(f"\n{counts_line(claims)}")


TABLE_COLUMNS = ["config", "what", "kind", "evidence", "paper", "from", "ours", "ours_over_paper", "how", "verdict",
                 "derived", "why"]
EVIDENCE_NAMES = {"measurement": "reproductions of a paper's measurement", "model": "checks of a model",
                  "construction": "properties by construction", "": "out of reach here"}


@dataclass(frozen=True)
class AllJob:
    """Every paper config checked before the first one runs, each with its own folder inside `out`."""

    jobs: Tuple[Tuple[str, matrix.CompareJob], ...]
    out: str
    docs: Optional[str] = None  # the documentation page to write too
    bench: bool = False  # the benchmark's configs: one table of every target
    judge: bool = False  # nothing runs: the runs in `out` judged again
    runs: Dict[str, str] = field(default_factory=dict)  # with docs: per config, the digest of what it runs

    @property
    def emulated(self) -> bool:
        """Whether any config brings up an emulated network."""
        return not self.judge and any(job.emulated for _, job in self.jobs)


def prepare_all(configs: Dict[str, str], out_root: str = None, local: bool = False, force: bool = False,
                wait: bool = False, docs: Optional[str] = None, bench: bool = False, scheduler: Optional[str] = None,
                resume: bool = False) -> AllJob:
    """Check every config (a bad one refuses the whole reproduction before anything runs); bench: the benchmark's
    configs (their `command:` rows run as dmlbed runs them, one table of every target)."""
    out = out_root or planned_folder(default_parent("reproduce", "bench" if bench else "all"))
    if resume and not out_root:
        raise OptionError("--resume runs the rows missing from an earlier run's folder: give that folder as --out")
    if out_root and not resume:
        check_output(out_root, (BENCH_TABLE + ".md", BENCH_TABLE + ".csv") if bench else ("papers.md", "papers.csv"),
                     "a benchmark" if bench else "a reproduction of every paper", force)
    jobs = tuple((name, matrix.prepare(path, os.path.join(out, name), local, force, wait, kind="reproduce",
                                       command_rows=COMMAND_ROWS if bench else None, scheduler=scheduler,
                                       resume=resume))
                 for name, path in configs.items())
    if not out_root:
        claim_folder(out)
    return AllJob(jobs, out, docs, bench, runs=runs_digests(configs) if docs else {})


def prepare_bench(args) -> AllJob:
    """The benchmark's configs (or the one named), each checked before the first one runs."""
    configs = matrix.reproducible(BENCH, "targets")
    if args.name:
        if args.name not in configs:
            raise OptionError(f"no benchmark config named '{args.name}': valid are {', '.join(configs)}")
        configs = {args.name: configs[args.name]}
    if args.judge:
        missing = [name for name in configs if not os.path.exists(os.path.join(args.out, name, "comparison.json"))]
        if missing:
            raise OptionError(f"--judge: {args.out} holds no run of {', '.join(missing)} (no comparison.json): run "
                              f"it first")
    job = prepare_all(configs, args.out, args.local, args.force or args.judge, args.wait, bench=True,
                      scheduler=args.scheduler, resume=args.resume)
    return replace(job, judge=args.judge)


BENCH_TABLE = "targets"  # the benchmark's table of every target: targets.md and targets.csv
BENCH_COLUMNS = ["config", "what", "target", "ours", "verdict", "how", "why"]


def run_each(job: AllJob, log, progress) -> List[Tuple[str, dict]]:
    """Every config of the job run in turn (matrix.execute)."""
    results = []
    for n, (name, one) in enumerate(job.jobs, 1):
        log(f"{'judge' if job.judge else 'reproduce'} {name} ({n}/{len(job.jobs)})")
        results.append((name, matrix.judge_again(one) if job.judge else matrix.execute(one, log=log,
                                                                                      progress=progress)))
    return results


def execute_bench(job: AllJob, log: Callable[[str], None] = lambda m: None, progress: bool = True) -> dict:
    """Run each benchmark config, then write the table of every target and where it came from."""
    started, origin = time.time(), provenance()
    results = run_each(job, log, progress)
    origin["judged_only"] = job.judge  # the figures are the runs' (each folder's provenance.json)
    rows = target_rows(results)
    origin["duration_s"] = round(time.time() - started, 1)
    write_table(os.path.join(job.out, BENCH_TABLE + ".csv"), rows, BENCH_COLUMNS + ["met"])
    write_atomic(os.path.join(job.out, BENCH_TABLE + ".md"), targets_markdown(rows))
    write_atomic(os.path.join(job.out, "provenance.json"), json.dumps(origin, indent=1))
    return {"bench": True, "out": job.out, "targets": rows, "rows": [r for _, res in results for r in res["rows"]],
            "configs": {name: res["out"] for name, res in results}}


def target_rows(results: List[Tuple[str, dict]]) -> List[dict]:
    """One row per target (and sweep group) of every config, its sweep values folded into the target's name."""
    out = []
    for name, result in results:
        keys = result.get("sweep_keys") or []
        for t in result.get("targets") or []:
            out.append({**{k: t[k] for k in ("target", "ours", "verdict", "met", "how", "why")}, "config": name,
                        "what": in_group(t, keys)})
    return out


def targets_markdown(rows: List[dict]) -> str:
    """Every target as one Markdown table, the missed first."""
    lines = [bench_line(rows), "", "| config | target | bound | ours | verdict | how | why |",
             "|---|---|---|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: r["met"] is True):
        verdict = r["verdict"] if r["met"] else f"**{r['verdict']}**"
        ours = number(r["ours"]) if r["ours"] is None or isinstance(r["ours"], float) else r["ours"]
        lines.append("| " + " | ".join(cell(x) for x in (r["config"], r["what"], r["target"], ours, verdict,
                                                          r["how"], r["why"])) + " |")
    return "\n".join(lines) + "\n"


def execute_all(job: AllJob, log: Callable[[str], None] = lambda m: None, progress: bool = True) -> dict:
    """Run each config (matrix.execute), then write the table of every claim, where it came from
    (provenance.json), and with docs the documentation's papers page."""
    if job.bench:
        return execute_bench(job, log, progress)
    started, origin = time.time(), provenance()
    results = run_each(job, log, progress)
    origin["judged_only"] = job.judge  # the figures are the runs' (each folder's provenance.json)
    claims = claim_rows(results)
    origin["duration_s"] = round(time.time() - started, 1)
    write_table(os.path.join(job.out, "papers.csv"), claims, TABLE_COLUMNS)
    write_atomic(os.path.join(job.out, "papers.md"), markdown(claims))
    write_atomic(os.path.join(job.out, "provenance.json"), json.dumps(origin, indent=1))
    if job.docs:
        papers_archive.write(papers_archive.archive_of(job.docs), [(name, res["rows"]) for name, res in results],
                             origin, job.runs)
        write_atomic(job.docs, docs_page(claims, origin))
    return {"out": job.out, "claims": claims, "rows": [r for _, res in results for r in res["rows"]],
            "configs": {name: res["out"] for name, res in results}, "docs": job.docs}


def results_of(folder: str, configs: str = CONFIGS) -> List[Tuple[str, dict]]:
    """(name, result) per paper config in `configs`, its claims as the config has them now evaluated on the rows the
    folder saved (a reproduce --all folder or the page's archive); ValueError when a config's rows are missing."""
    out = []
    for name, path in matrix.reproducible(configs).items():
        rows = papers_archive.rows_of(folder, name)
        if rows is None:
            raise ValueError(f"{folder} holds no rows of {name}: it is not a complete reproduce --all folder")
        data = matrix.load(path)
        keys = list((data.get("sweep") or {}).keys())
        claims = paper.claims(data, list(dict.fromkeys(r["label"] for r in rows)))
        out.append((name, {"paper": paper.table(claims, rows, keys), "sweep_keys": keys}))
    return out


def runs_digests(configs: Dict[str, str]) -> Dict[str, str]:
    """Per paper config (name -> path), a digest of what it runs (all but its claims, whose text a rebuild may
    change)."""
    out = {}
    for name, path in configs.items():
        with open(path) as f:
            data = yaml.safe_load(f)
        runs = {k: v for k, v in data.items() if k != "paper"}
        out[name] = hashlib.sha256(json.dumps(runs, sort_keys=True, default=str).encode()).hexdigest()[:16]
    return out


def page_from_archive(archive: str = ARCHIVE, configs: str = CONFIGS) -> str:
    """The papers page as its archive's rows and provenance and the configs' current claims make it."""
    origin = papers_archive.origin_of(archive)
    if origin is None:
        raise ValueError(f"{archive} holds no provenance.json: the page has no archive to be rebuilt from")
    return docs_page(claim_rows(results_of(archive, configs)), origin, papers_archive.rebuilt_of(archive))


def in_group(item: dict, keys: List[str]) -> str:
    """A claim's or target's name with the sweep values of its group folded in ("w (mode=emulate)")."""
    group = ", ".join(f"{k}={item[k]}" for k in keys if item.get(k) is not None)
    return item["what"] + (f" ({group})" if group else "")


def claim_rows(results: List[Tuple[str, dict]]) -> List[dict]:
    """One row per claim (and sweep group) of every config, its sweep values folded into the claim's name."""
    out = []
    for name, result in results:
        keys = result.get("sweep_keys") or []
        for c in result.get("paper") or []:
            out.append({"config": name, "what": in_group(c, keys), "kind": c["kind"],
                        "evidence": c.get("evidence", ""), "paper": c["paper"], "from": c["from"], "ours": c["ours"],
                        "ours_over_paper": c["ours_over_paper"], "how": c.get("how", ""), "verdict": c["verdict"],
                        "derived": c.get("derived", ""), "why": c["why"]})
    return out


def claim_counts(claims: List[dict]) -> Dict[str, Dict[str, int]]:
    """Per kind of evidence, how many claims have each verdict; derived claims are counted apart ('derived')."""
    counts: Dict[str, Dict[str, int]] = {}
    for c in claims:
        kind = "derived" if c.get("derived") else c.get("evidence", "")
        counts.setdefault(kind, {})
        counts[kind][c["verdict"]] = counts[kind].get(c["verdict"], 0) + 1
    return counts


def counts_line(claims: List[dict]) -> str:
    """The summary line: verdicts per kind of evidence, derived claims apart."""
    names = dict(EVIDENCE_NAMES, derived="derived from other rows (not counted again)")
    parts = []
    for kind, by_verdict in sorted(claim_counts(claims).items(), key=lambda kv: list(names).index(kv[0])):
        total = sum(by_verdict.values())
        detail = ", ".join(f"{n} {v}" for v, n in sorted(by_verdict.items()))
        parts.append(f"{names[kind]}: {total}" + (f" ({detail})" if kind != "" else ""))
    return "; ".join(parts)


def docs_page(claims: List[dict], origin: dict, rebuilt: Optional[dict] = None) -> str:
    """The documentation's papers page: where the table came from (the run's command, date, commit and duration;
    and when its claims' text was rebuilt from the saved rows, by what), the counts, then the table."""
    commit = (origin.get("commit") or "unknown")[:12] + (" (modified)" if origin.get("dirty") else "")
    lines = ["# The papers, claim by claim", "",
             "<!-- written by `dmlbed reproduce --all --docs` (or scripts/papers_table.py --docs): do not edit -->", "",
             f"Every claim of the paper configs in `configs/`, as `{origin.get('command', 'dmlbed reproduce --all')}` "
             f"wrote it on {origin.get('date', '?')} at commit `{commit}`"
             + (f" in {origin['duration_s'] / 60:.0f} minutes" if origin.get("duration_s") else "")
             + (f", on a machine with {origin['cpus']} CPUs" if origin.get("cpus") else "") + "."]
    if rebuilt:
        lines.append(f"Its claims' text was rebuilt from the saved rows by `{rebuilt.get('command')}` on "
                     f"{rebuilt.get('date')} at commit `{(rebuilt.get('commit') or 'unknown')[:12]}` (no value "
                     f"changed).")
    lines += ["", f"{len(claims)} claims. {counts_line(claims)}.", "",
              "\"Evidence\" says what an agreement shows: a paper's measurement reproduced, a model (the paper's "
              "formula or dmlbed's) checked, or a property that holds by construction. \"How\" says where ours comes "
              "from: a closed form, the flow model (\"simulated\"), loopback, or the emulated network with the worst "
              "[fidelity verdict](../explanation/fidelity.md) of the runs the claim uses; a claim resting on a run "
              "that was degraded or not faithful is not judged, and says which. A derived claim follows from others "
              "and is not counted again. Run it yourself: [Reproduce the papers](../how-to/reproduce-papers.md).", "",
              markdown(claims)]
    return "\n".join(lines)


def markdown(claims: List[dict]) -> str:
    """The papers' claims as one Markdown table: the papers' measurements first, dmlbed's model apart, then what is
    out of reach here."""
    lines = ["| config | claim | evidence | paper | source | ours | ours/paper | how | verdict | why |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    order = {"measurement": 0, "model": 1, "construction": 2}
    for c in sorted(claims, key=lambda c: (c["verdict"] == "out of reach here", bool(c.get("derived")),
                                           order.get(c.get("evidence", ""), 3))):
        what = c["what"] + (" (dmlbed's model)" if c["kind"] == "model" else "")
        why = c["why"] + (f" Derived: {c['derived']}" if c.get("derived") else "")
        lines.append("| " + " | ".join(cell(x) for x in (
            c["config"], what, c.get("evidence", ""), c["paper"], c["from"], number(c["ours"]),
            number(c["ours_over_paper"]), c["how"], c["verdict"], why.strip())) + " |")
    return "\n".join(lines) + "\n"


def number(v) -> str:
    """A value in a Markdown table: three significant figures, '-' for none."""
    return "-" if v is None else f"{v:.3g}"


def cell(text) -> str:
    """Text safe inside a Markdown table's cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


COMMAND = Reproduce()
