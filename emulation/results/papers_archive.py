"""The papers page's archive (docs/reference/papers/): every paper config's rows, fidelity verdicts and causes as the
run that wrote the page saved them, and that run's provenance, so the page is rebuilt from it alone and its age can
be checked against the code and configs its claims run."""

from __future__ import annotations

import os
from typing import Dict, List, Optional, Sequence, Tuple

from emulation.results.files import read_json, write_json

ORIGIN = "provenance.json"   # the run that wrote the page
RUNS = "configs.json"        # per paper config, a digest of what it runs (all but its claims) as it was then
REBUILT = "rebuilt.json"     # the rebuild of its claims' text from the saved rows, when one changed the page
DROPPED = ("out",)           # where a row's run folder was on the machine that ran it: not the archive's business


def archive_of(page: str) -> str:
    """The archive folder beside a page (docs/reference/papers.md -> docs/reference/papers/)."""
    return os.path.splitext(page)[0]


def write(folder: str, results: Sequence[Tuple[str, List[dict]]], origin: dict, runs: Dict[str, str]) -> None:
    """Each config's rows (NAME.json), the run's provenance and what each config ran (runs: name -> digest); a
    rebuild record of an earlier page is dropped."""
    os.makedirs(folder, exist_ok=True)
    for stale in os.listdir(folder):
        if stale.endswith(".json"):
            os.remove(os.path.join(folder, stale))
    for name, rows in results:
        write_json(os.path.join(folder, f"{name}.json"), [{k: v for k, v in r.items() if k not in DROPPED}
                                                           for r in rows])
    write_json(os.path.join(folder, ORIGIN), origin)
    write_json(os.path.join(folder, RUNS), runs)


def rows_of(folder: str, name: str) -> Optional[List[dict]]:
    """A config's saved rows: an archive's NAME.json or a reproduce --all folder's NAME/comparison.json."""
    for path in (os.path.join(folder, f"{name}.json"), os.path.join(folder, name, "comparison.json")):
        if os.path.exists(path):
            return read_json(path)
    return None


def origin_of(folder: str) -> Optional[dict]:
    """The provenance of the run whose rows the folder holds."""
    return read_json(os.path.join(folder, ORIGIN))


def runs_of(folder: str) -> Dict[str, str]:
    """Per paper config, the digest of what it ran when the archived rows were made."""
    return read_json(os.path.join(folder, RUNS)) or {}


def rebuilt_of(folder: str) -> Optional[dict]:
    """The provenance of the rebuild that last changed the page's claims' text (None: the page is the run's own)."""
    return read_json(os.path.join(folder, REBUILT))


def note_rebuild(folder: str, rebuilt: Optional[Dict[str, object]]) -> None:
    """Record (or, with None, clear) the rebuild the page names."""
    path = os.path.join(folder, REBUILT)
    if rebuilt is not None:
        write_json(path, rebuilt)
    elif os.path.exists(path):
        os.remove(path)
