"""Where results go: the one --out folder policy (another command's results are replaced only with --force) and
writers that never leave half a file behind."""

from __future__ import annotations

import contextlib
import csv
import os
from typing import Iterable, List, Sequence

from emulation.orchestration.options import OptionError


def check_output(out: str, files: Sequence[str], what: str, force: bool) -> None:
    """Refuse an --out folder that holds any of `files` (another command's `what`) unless force; nothing is
    written here."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise OptionError(f"--out {out} is a file, not a folder")
    found = [f for f in files if os.path.exists(os.path.join(out, f))]
    if found and not force:
        raise OptionError(f"--out {out} already holds {what} ({', '.join(found)}): choose another folder or pass "
                          f"--force to replace {'it' if len(found) == 1 else 'them'}")


def clear(out: str, files: Iterable[str]) -> None:
    """Remove an earlier command's result files (--force): they must not sit beside this one's partial ones."""
    for name in files:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(out, name))


def write_atomic(path: str, text: str) -> None:
    """Write a text file through a temporary file and a rename (readers never see half a file)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_atomic_csv(path: str, header: List[str], rows) -> None:
    """Write a CSV to a temporary file and rename it into place (readers never see half a file)."""
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for row in rows:
            w.writerow(row)
    os.replace(tmp, path)


def write_table(path: str, rows: List[dict], columns: Sequence[str], first: Sequence[str] = ()) -> None:
    """A CSV of dict rows: columns (the keys in `first` right after the first column), then any other key the
    rows carry, sorted."""
    cols = list(columns[:1]) + list(first) + [c for c in columns[1:] if c not in first]
    cols += sorted({k for r in rows for k in r} - set(cols))
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)
    os.replace(tmp, path)
