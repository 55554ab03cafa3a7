"""Every result file a command writes or reads back, in one place: written through a temporary file and a rename
(a reader never sees half a file; a full disk is one named error), read back by the same module."""

from __future__ import annotations

import base64
import contextlib
import csv
import json
import os
from typing import Dict, List, Optional, Sequence

from emulation.core.topology import Topology
from workloads.runfolder import RunFolder, json_lines


class OutputError(RuntimeError):
    """Results could not be written (a full disk, a folder that became unwritable): the message names the folder
    and the cause."""


def output_error(path: str, exc: OSError) -> OutputError:
    """The one-line error for a result file that could not be written."""
    folder = os.path.dirname(os.path.abspath(path))
    return OutputError(f"cannot write results to {folder}: {exc.strerror or exc} ({os.path.basename(path)})")


@contextlib.contextmanager
def atomic_file(path: str, newline: Optional[str] = None):
    """Open a temporary file beside path and rename it into place when the block ends (readers never see half a
    file); if writing fails, the temporary file is removed and OutputError names the folder and the cause."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", newline=newline) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise output_error(path, exc) from None


def write_atomic(path: str, text: str) -> None:
    """Write a text file through a temporary file and a rename."""
    with atomic_file(path) as f:
        f.write(text)


def write_atomic_csv(path: str, header: List[str], rows) -> None:
    """Write a CSV through a temporary file and a rename."""
    with atomic_file(path, newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for row in rows:
            w.writerow(row)


def write_table(path: str, rows: List[dict], columns: Sequence[str], first: Sequence[str] = ()) -> None:
    """A CSV of dict rows: columns (the keys in `first` right after the first column), then any other key the
    rows carry, sorted."""
    cols = list(columns[:1]) + list(first) + [c for c in columns[1:] if c not in first]
    cols += sorted({k for r in rows for k in r} - set(cols))
    with atomic_file(path, newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow(r)


ITERATION_COLUMNS = ("iteration", "gst_s", "compute_s", "compute_real_s", "compute_cpu_s", "iteration_s", "loss")


def cell(value, decimals: int = 6) -> str:
    """A CSV cell of seconds or a loss, a missing value empty."""
    return "" if value is None else f"{value:.{decimals}f}"


def write_iterations(out_dir: str, iterations: List[dict], decimals: int = 6) -> None:
    """iterations.csv, one schema in every mode: ITERATION_COLUMNS, then the bytes each link level sent
    (tx_bytes_L<level>); a mode that has no value for a column leaves its cell empty (decimals: of the seconds;
    a loss has 6)."""
    levels = sorted({k for it in iterations for k in it.get("tx_bytes_by_level", {})})
    write_atomic_csv(RunFolder(out_dir).file(RunFolder.ITERATIONS),
                     list(ITERATION_COLUMNS) + [f"tx_bytes_{l}" for l in levels],
                     ([it["iteration"]] + [cell(it.get(c), decimals) for c in ITERATION_COLUMNS[1:-1]] +
                      [cell(it.get("loss"))] +
                      [it["tx_bytes_by_level"].get(l, 0) for l in levels] for it in iterations))


def read_iterations(out_dir: str) -> List[Dict[str, float]]:
    """iterations.csv as rows of floats (empty cells left out); [] without the file."""
    return [{k: float(v) for k, v in r.items() if v not in (None, "")}
            for r in read_table(RunFolder(out_dir).file(RunFolder.ITERATIONS))]


def write_workers(out_dir: str, rows: Dict[int, List[dict]], topo: Optional[Topology]) -> None:
    """workers.csv: one row per rank and iteration."""
    write_atomic_csv(RunFolder(out_dir).file(RunFolder.WORKERS_CSV),
                     ["rank", "host", "role", "iteration", "compute_s", "compute_real_s", "compute_cpu_s", "gst_s",
                      "iteration_s", "loss", "tx_bytes", "rx_bytes"],
                     ([r, topo.hosts[r].name if topo is not None else f"rank{r}", row["role"], row["iteration"],
                       cell(row["compute_s"]), cell(row["compute_real_s"]), cell(row["compute_cpu_s"]),
                       cell(row["gst_s"]), cell(row["iteration_s"]), cell(row["loss"]),
                       sum(row["tx_bytes"].values()), sum(row["rx_bytes"].values())]
                      for r, rank_rows in sorted(rows.items()) for row in rank_rows))


def read_table(path: str) -> List[Dict[str, str]]:
    """A CSV result file's rows as they are written; [] without the file."""
    if not os.path.isfile(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_json(path: str, data, indent: Optional[int] = 1) -> None:
    """A JSON result file (through a temporary file and a rename); indent None: compact."""
    write_atomic(path, json.dumps(data, indent=indent, default=str))


def read_json(path: str) -> Optional[dict]:
    """A JSON result file, or None when it is missing or cut short."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def read_json_lines(path: str) -> List[dict]:
    """A JSON-lines result file's complete lines ([] when it is missing; a torn last line is left out)."""
    return json_lines(path)


def write_summary(out_dir: str, summary: dict) -> None:
    """A command's summary.json."""
    write_json(RunFolder(out_dir).file(RunFolder.SUMMARY), summary)


def read_summary(out_dir: str) -> Optional[dict]:
    """A folder's summary.json (None: none, or cut short)."""
    return read_json(RunFolder(out_dir).file(RunFolder.SUMMARY))


def figure_uri(folder: str, stem: str) -> str:
    """A PNG figure of a report as a data: URI."""
    with open(os.path.join(folder, f"{stem}.png"), "rb") as f:
        return "data:image/png;base64," + base64.b64encode(f.read()).decode()
