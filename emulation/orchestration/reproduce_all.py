"""reproduce --all: every paper config run in turn, and one table of every claim (papers.md for the README,
papers.csv), each with the paper's value and source, ours, how ours was obtained, and the verdict."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

from emulation.orchestration import compare
from emulation.orchestration.outputs import (check_output, claim_folder, default_parent, planned_folder, write_atomic,
                                             write_table)

TABLE_COLUMNS = ["config", "what", "kind", "paper", "from", "ours", "ours_over_paper", "how", "verdict", "why"]


@dataclass(frozen=True)
class AllJob:
    """Every paper config checked before the first one runs, each with its own folder inside `out`."""

    jobs: Tuple[Tuple[str, compare.CompareJob], ...]
    out: str

    @property
    def emulated(self) -> bool:
        """Whether any config brings up an emulated network."""
        return any(job.emulated for _, job in self.jobs)


def prepare_all(configs: Dict[str, str], out_root: str = None, local: bool = False, force: bool = False,
                wait: bool = False) -> AllJob:
    """Check every config (a bad one refuses the whole reproduction before anything runs)."""
    out = out_root or planned_folder(default_parent("reproduce", "all"))
    if out_root:
        check_output(out_root, ("papers.md", "papers.csv"), "a reproduction of every paper", force)
    jobs = tuple((name, compare.prepare(path, os.path.join(out, name), local, force, wait, kind="reproduce"))
                 for name, path in configs.items())
    if not out_root:
        claim_folder(out)
    return AllJob(jobs, out)


def execute_all(job: AllJob, log: Callable[[str], None] = lambda m: None, progress: bool = True) -> dict:
    """Run each config (compare.execute), then write the table of every claim."""
    results = []
    for n, (name, one) in enumerate(job.jobs, 1):
        log(f"reproduce {name} ({n}/{len(job.jobs)})")
        results.append((name, compare.execute(one, log=log, progress=progress)))
    claims = claim_rows(results)
    write_table(os.path.join(job.out, "papers.csv"), claims, TABLE_COLUMNS)
    write_atomic(os.path.join(job.out, "papers.md"), markdown(claims))
    return {"out": job.out, "claims": claims, "rows": [r for _, res in results for r in res["rows"]],
            "configs": {name: res["out"] for name, res in results}}


def claim_rows(results: List[Tuple[str, dict]]) -> List[dict]:
    """One row per claim (and sweep group) of every config, its sweep values folded into the claim's name."""
    out = []
    for name, result in results:
        keys = result.get("sweep_keys") or []
        for c in result.get("paper") or []:
            group = ", ".join(f"{k}={c[k]}" for k in keys if c.get(k) is not None)
            out.append({"config": name, "what": c["what"] + (f" ({group})" if group else ""), "kind": c["kind"],
                        "paper": c["paper"], "from": c["from"], "ours": c["ours"],
                        "ours_over_paper": c["ours_over_paper"], "how": c.get("how", ""), "verdict": c["verdict"],
                        "why": c["why"]})
    return out


def markdown(claims: List[dict]) -> str:
    """The papers' claims as one Markdown table: the papers' measurements first, dmlbed's model apart, then what is
    out of reach here."""
    def number(v):
        return "-" if v is None else f"{v:.3g}"

    def cell(text) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| config | claim | paper | source | ours | ours/paper | how | verdict | why it differs |",
             "|---|---|---|---|---|---|---|---|---|"]
    order = {"paper": 0, "model": 1}
    for c in sorted(claims, key=lambda c: (c["verdict"] == "out of reach here", order.get(c["kind"], 2))):
        what = c["what"] + (" (dmlbed's model)" if c["kind"] == "model" else "")
        lines.append("| " + " | ".join(cell(x) for x in (
            c["config"], what, c["paper"], c["from"], number(c["ours"]), number(c["ours_over_paper"]), c["how"],
            c["verdict"], c["why"])) + " |")
    return "\n".join(lines) + "\n"
