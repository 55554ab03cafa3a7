"""Every file name of a run folder, in one place: the results a command writes (summary.json, CSVs, the timeline)
and, in its workers/ folder, what each rank is told and writes (rank-N.*)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Callable, Dict, List

RANKS_FOLDER = "workers"


def json_lines(path: str) -> List[dict]:
    """Every complete JSON line of a file (a torn last line, or one that does not parse, is skipped)."""
    out: List[dict] = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.endswith("\n"):
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        continue
    return out


@dataclass(frozen=True)
class RankRecords:
    """Everything a set of ranks wrote, read once after they ended: iteration records by rank, final records by rank,
    every traced transfer and every DDP bucket."""

    rows: Dict[int, List[dict]]
    finals: Dict[int, dict]
    transfers: List[dict]
    buckets: List[dict]


def _json_per_rank(path_of: Callable[[int], str], ranks: int) -> Dict[int, dict]:
    """Each rank's JSON file, of the ranks that wrote a whole one."""
    out = {}
    for r in range(ranks):
        try:
            with open(path_of(r)) as f:
                out[r] = json.load(f)
        except (OSError, ValueError):
            continue
    return out


class RankFiles:
    """A folder of per-rank files: each rank's config, stderr, iteration records, transfers, final record, bench
    repetitions, and the first iteration's result checks."""

    def __init__(self, path: str):
        self.path = path

    def _file(self, rank: int, suffix: str) -> str:
        return os.path.join(self.path, f"rank-{rank}.{suffix}")

    def config(self, rank: int) -> str:
        """What the runner tells the rank (a RankConfig as JSON)."""
        return self._file(rank, "config.json")

    def stderr(self, rank: int) -> str:
        """The rank's standard error."""
        return self._file(rank, "stderr")

    def records(self, rank: int) -> str:
        """One IterationRecord per line."""
        return self._file(rank, "jsonl")

    def transfers(self, rank: int) -> str:
        """One engine transfer (step, peer, direction, bytes, times, TCP ports) per line."""
        return self._file(rank, "trace.jsonl")

    def final(self, rank: int) -> str:
        """The end-of-run record (checksum, accuracy, strategy extras, qdisc counters)."""
        return self._file(rank, "final.json")

    def buckets(self, rank: int) -> str:
        """One DDP bucket's synchronization per line (ready, start, end, bytes by level)."""
        return self._file(rank, "buckets.jsonl")

    def stdout(self, rank: int) -> str:
        """The rank's standard output (`dmlbed launch`)."""
        return self._file(rank, "stdout")

    def measured(self, rank: int) -> str:
        """What a launched script measured, for launch's verdict: its measured seconds (wall clock) and how often
        its real compute overran the device time it holds (`dmlbed launch`; see write_measured)."""
        return self._file(rank, "measured.json")

    def read_measured(self, ranks: int) -> Dict[int, dict]:
        """The measured records of the ranks that wrote one."""
        return _json_per_rank(self.measured, ranks)

    def bench(self, rank: int) -> str:
        """One timed or warm-up repetition of a bench or calibration rank per line."""
        return self._file(rank, "bench.jsonl")

    @property
    def fork_server_stderr(self) -> str:
        """The standard error of the process the ranks were forked from (workloads/forkserver.py)."""
        return os.path.join(self.path, "forkserver.stderr")

    @property
    def checks(self) -> str:
        """The folder of the first iteration's saved inputs and outputs (workloads.verify)."""
        return os.path.join(self.path, "checks")

    def read_rows(self, ranks: int) -> Dict[int, List[dict]]:
        """Every complete iteration record each rank wrote so far."""
        return {r: json_lines(self.records(r)) for r in range(ranks)}

    def read_all(self, ranks: int) -> RankRecords:
        """Every record of every rank, read once."""
        return RankRecords(self.read_rows(ranks), self.read_finals(ranks), self.read_transfers(ranks),
                           self.read_buckets(ranks))

    def read_transfers(self, ranks: int) -> List[dict]:
        """Every transfer every rank traced."""
        return [t for r in range(ranks) for t in json_lines(self.transfers(r))]

    def read_buckets(self, ranks: int) -> List[dict]:
        """Every bucket every rank synchronized."""
        return [b for r in range(ranks) for b in json_lines(self.buckets(r))]

    def read_bench(self, ranks: int) -> List[dict]:
        """Every repetition every bench rank recorded."""
        return [t for r in range(ranks) for t in json_lines(self.bench(r))]

    def read_finals(self, ranks: int) -> Dict[int, dict]:
        """The end-of-run record of each rank that finished."""
        return _json_per_rank(self.final, ranks)

    def write_final(self, rank: int, record: dict) -> None:
        """Write a rank's final record through a temporary file (the runner never reads half of it)."""
        path = self.final(rank)
        try:
            with open(path + ".tmp", "w") as f:
                json.dump(record, f)
            os.replace(path + ".tmp", path)
        except OSError:
            try:
                os.remove(path + ".tmp")
            except OSError:
                pass
            raise

    def last_error_line(self, rank: int) -> str:
        """The last non-empty line a rank wrote to stderr."""
        try:
            with open(self.stderr(rank)) as f:
                lines = [line.strip() for line in f if line.strip()]
            return lines[-1] if lines else "(no output)"
        except OSError:
            return "(no log)"


class RunFolder:
    """A command's --out folder: its result files, and the rank files of its workers/ folder (or of a named
    sub-folder of it: bench and calibrate run one set of ranks per algorithm or probe)."""

    SUMMARY = "summary.json"
    ITERATIONS = "iterations.csv"
    WORKERS_CSV = "workers.csv"
    LINKS = "links.csv"
    TRACE = "trace.json"
    TIMELINE = "timeline.png"
    BACKGROUND = "background.csv"
    RESULTS = (SUMMARY, ITERATIONS, WORKERS_CSV, LINKS, TRACE, TIMELINE, BACKGROUND)

    def __init__(self, root: str):
        self.root = root

    def file(self, name: str) -> str:
        """The path of one of the folder's result files."""
        return os.path.join(self.root, name)

    @property
    def workers(self) -> str:
        """The ranks' folder."""
        return os.path.join(self.root, RANKS_FOLDER)

    def ranks(self, name: str = "") -> RankFiles:
        """The per-rank files in workers/ (or in workers/NAME)."""
        return RankFiles(os.path.join(self.workers, name) if name else self.workers)
