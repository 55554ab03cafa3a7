"""What a matrix's rows left in its folder as each landed (OUT/.matrix/NAME.json, beside OUT/.matrix/matrix.json naming
the config and its rows), so `--resume` runs only the rows missing or failed."""

from __future__ import annotations

import json
import os
from typing import List, Optional

from emulation.results.files import read_json, write_atomic

RECORDS = ".matrix"  # OUT/.matrix/NAME.json: one landed entry's rows, curves and the machine that ran it
MATRIX = os.path.join(RECORDS, "matrix.json")


def names(entries: List[dict]) -> List[str]:
    """Each entry's folder name (unique in a matrix)."""
    return [os.path.basename(e["out"]) for e in entries]


def check_resumable(out_root: str, name: str, entries: List[dict]) -> None:
    """--resume on a folder of this config's matrix (ValueError naming what differs); a folder with no matrix yet
    is a fresh start."""
    mine = read_json(os.path.join(out_root, MATRIX))
    if mine is None:
        return
    if mine.get("name") != name or mine.get("rows") != names(entries):
        raise ValueError(f"--resume: {out_root} holds the rows of config '{mine.get('name')}' "
                         f"({len(mine.get('rows') or [])} rows), not this config's '{name}' ({len(entries)} rows): "
                         f"give the folder this config ran in, or a new --out")


def start_record(out_root: str, name: str, entries: List[dict], resume: bool) -> List[Optional[dict]]:
    """Per entry what landed before (resume: its record, unless a row of it failed) or None; a run that does not
    resume starts the record afresh."""
    folder = os.path.join(out_root, RECORDS)
    os.makedirs(folder, exist_ok=True)
    landed: List[Optional[dict]] = []
    for entry_name in names(entries):
        path = os.path.join(folder, entry_name + ".json")
        kept = read_json(path) if resume else None
        if kept is None or any(r.get("failed") for r in kept.get("rows") or [{"failed": True}]):
            kept = None
            if os.path.exists(path):
                os.remove(path)
        landed.append(kept)
    write_atomic(os.path.join(out_root, MATRIX), json.dumps({"name": name, "rows": names(entries)}, indent=1))
    return landed


def record(out_root: str, entry: dict, landed: dict) -> None:
    """One entry's rows, curves and machine, as it landed."""
    path = os.path.join(out_root, RECORDS, os.path.basename(entry["out"]) + ".json")
    write_atomic(path, json.dumps(landed, indent=1, default=str))
