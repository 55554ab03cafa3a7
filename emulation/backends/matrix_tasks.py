"""A compare matrix's rows as Dask tasks (`--scheduler local:N` or `tcp://HOST:PORT`): an emulated row runs in a child
process on a worker (its own main thread, for the run's signal handlers; stopped with its worker) while it holds its
whole machine (one emulated network per machine, nothing beside it, however many workers share the machine), a
simulated row in the worker's process on one of its machine's slots. Its folder comes home: written in place where
the worker sees the submitter's --out, else shipped back as a tarball and unpacked at the same path."""

from __future__ import annotations

import ctypes
import io
import os
import pickle
import re
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Dict, Iterator, List, Optional

SCHEDULER_ENV = "DMLBED_SCHEDULER"
MAX_LOCAL_WORKERS = 64
CONNECT_S = 10.0  # a scheduler that does not answer in this long is unreachable
TOKEN_FILE = ".dmlbed-matrix-token"  # a worker that reads the submitter's token here shares its --out
STOP_POLL_S = 0.5
CHILD_GRACE_S = 120.0  # a child told to stop tears its network down within this long, else it is killed
RETRIES = 2  # a row whose worker died runs again elsewhere up to this many times


class SchedulerError(ValueError):
    """The --scheduler value or the cluster behind it cannot run the matrix; the message says why and what is valid."""


@dataclass(frozen=True)
class Scheduler:
    """Where the rows run: a LocalCluster of `workers` processes here, or the running scheduler at `address`."""

    address: Optional[str] = None
    workers: int = 0

    def __str__(self) -> str:
        return self.address or f"local:{self.workers}"


def parse_scheduler(text: Optional[str]) -> Optional[Scheduler]:
    """--scheduler (or DMLBED_SCHEDULER): 'local:N' or 'tcp://HOST:PORT'; None runs the rows in turn here."""
    text = text if text not in (None, "") else os.environ.get(SCHEDULER_ENV) or None
    if text is None:
        return None
    local = re.fullmatch(r"local:(\d+)", text)
    if local and 1 <= int(local.group(1)) <= MAX_LOCAL_WORKERS:
        return Scheduler(workers=int(local.group(1)))
    if re.fullmatch(r"(tcp|tls)://[^:/\s]+:\d{1,5}", text):
        return Scheduler(address=text)
    raise SchedulerError(f"--scheduler {text} is invalid: give local:N (N worker processes on this machine, 1-"
                         f"{MAX_LOCAL_WORKERS}) or tcp://HOST:PORT (a running dask scheduler)")


def worker_facts() -> dict:
    """What a worker offers a row: root rights, and the dmlbed it runs (version and commit)."""
    from emulation.results.provenance import environment
    env = environment()
    return {"root": os.geteuid() == 0, "dmlbed": env["dmlbed"], "commit": env["commit"], "machine": machine_id()}


def fitting(client) -> Dict:
    """The workers that run this dmlbed ('any': its version and commit) and, of those, the ones that run as root
    ('emulated'): a row is only sent where it fits; 'slots': per machine, how many workers it has; 'mine': this
    machine's facts."""
    mine = worker_facts()
    facts = client.run(worker_facts)
    same = [w for w, f in facts.items() if f["dmlbed"] == mine["dmlbed"] and  # a commit git will not tell is unknown
            (f["commit"] == mine["commit"] or None in (f["commit"], mine["commit"]))]
    slots: Dict[str, int] = {}
    for f in facts.values():
        slots[f["machine"]] = slots.get(f["machine"], 0) + 1
    return {"any": same, "emulated": [w for w in same if facts[w]["root"]], "all": list(facts), "slots": slots,
            "mine": mine}


def check_reachable(scheduler: Scheduler, emulated: bool) -> None:
    """A remote scheduler reached, with a worker that runs this dmlbed (and, for emulated rows, one that runs as
    root), checked before anything starts (SchedulerError saying what is missing)."""
    if scheduler.address is None:
        return
    from distributed import Client
    try:
        with Client(scheduler.address, timeout=CONNECT_S) as client:
            workers = fitting(client)
    except (OSError, TimeoutError) as exc:
        raise SchedulerError(f"--scheduler {scheduler.address}: cannot reach it ({str(exc).splitlines()[0]}): start "
                             f"one with `dask scheduler` and its workers with `dask worker ADDRESS`") from None
    if not workers["all"]:
        raise SchedulerError(f"--scheduler {scheduler.address} has no worker: start one with `dask worker "
                             f"{scheduler.address}` on a machine set up with `make setup`")
    mine = workers["mine"]
    if not workers["any"]:
        raise SchedulerError(f"--scheduler {scheduler.address}: none of its {len(workers['all'])} workers runs this "
                             f"dmlbed ({mine['dmlbed']}, commit {str(mine['commit'])[:12]}): check the same commit "
                             f"out on every machine and run `make setup`")
    if emulated and not workers["emulated"]:
        raise SchedulerError(f"--scheduler {scheduler.address}: no worker runs as root, and the matrix has emulated "
                             f"rows (they bring networks up): start `dask worker` as root on a machine for them")


@contextmanager
def connected(scheduler: Scheduler) -> Iterator:
    """A Dask client of the scheduler (a LocalCluster started here and stopped after, for local:N)."""
    import logging

    from distributed import Client, LocalCluster
    if scheduler.address is not None:
        with Client(scheduler.address, timeout=CONNECT_S) as client:
            yield client
        return
    with LocalCluster(n_workers=scheduler.workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        yield client


def machine_id() -> str:
    """This machine, as workers sharing it agree on it (its boot id, else its host name)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return socket.gethostname()


def write_token(out_root: str) -> str:
    """A fresh token in --out, by which a worker tells that it sees the submitter's folder."""
    token = uuid.uuid4().hex
    os.makedirs(out_root, exist_ok=True)
    with open(os.path.join(out_root, TOKEN_FILE), "w") as f:
        f.write(token)
    return token


def sees_folder(out_root: str, token: str) -> bool:
    """Whether this machine sees the submitter's --out (the same disk, or a shared file system)."""
    try:
        with open(os.path.join(out_root, TOKEN_FILE)) as f:
            return f.read().strip() == token
    except OSError:
        return False


def packed(folder: str) -> bytes:
    """A row's folder as a gzipped tarball (its name relative to its parent)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        if os.path.isdir(folder):
            tar.add(folder, arcname=os.path.basename(folder))
    return buffer.getvalue()


def unpack(data: bytes, folder: str) -> None:
    """A shipped row folder unpacked at its path (what was there replaced)."""
    import shutil
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    name = os.path.basename(folder)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = tar.getmembers()
        for m in members:  # only the row's own files and folders, inside it (Python 3.11 has no extraction filter)
            parts = m.name.split("/")
            if parts[0] != name or ".." in parts or not (m.isfile() or m.isdir()):
                raise ValueError(f"a shipped row folder holds {m.name!r}, outside {name} or not a plain file")
        tar.extractall(os.path.dirname(folder), members=members)


def die_with_parent() -> None:
    """In a child before exec: SIGTERM when the worker that started it dies (a SIGKILLed worker's row stops and
    tears its network down)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def run_child(spec: dict, earlier: List[dict], stop) -> dict:
    """The row run by `python -m emulation.commands.matrix_child` here; stopped (SIGTERM, then SIGKILL after
    CHILD_GRACE_S) when the submitter sets `stop`."""
    with tempfile.TemporaryDirectory(prefix="dmlbed-row-") as tmp:
        given, taken = os.path.join(tmp, "in.pickle"), os.path.join(tmp, "out.pickle")
        with open(given, "wb") as f:
            pickle.dump({"spec": spec, "earlier": earlier}, f)
        log = open(os.path.join(tmp, "log.txt"), "w+")
        child = subprocess.Popen([sys.executable, "-m", "emulation.commands.matrix_child", given, taken],
                                 stdout=log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        told = None
        while child.poll() is None:
            if told is None and stop is not None and stop.is_set():
                child.terminate()
                told = time.monotonic()
            if told is not None and time.monotonic() - told > CHILD_GRACE_S:
                child.kill()
            time.sleep(STOP_POLL_S)
        log.seek(0)
        text = log.read()
        log.close()
        if child.returncode == 0 and os.path.exists(taken):
            with open(taken, "rb") as f:
                return pickle.load(f)
        last = [line for line in text.splitlines() if line.strip()][-1:] or [f"exit {child.returncode}"]
        return {"rows": None, "curves": [],
                "error": "stopped" if told is not None else f"exit {child.returncode}: {last[0]}"}


@contextmanager
def machine_share(emulated: bool, slots: Dict[str, int]) -> Iterator[None]:
    """This machine for a row: a simulated row takes one of its slots (one per worker on it); an emulated row takes
    every slot, one emulated row at a time, so nothing else runs beside its network to take the cores it needs."""
    from distributed import Lock, Semaphore
    if not slots:  # a matrix without emulated rows: no network to keep its rows from
        yield
        return
    here = machine_id()
    slots_here = slots.get(here, 1)
    share = Semaphore(max_leases=slots_here, name=f"dmlbed-machine@{here}")
    if not emulated:
        with share:
            yield
        return
    with Lock(f"dmlbed-network@{here}"):
        taken = 0
        try:
            for _ in range(slots_here):
                share.acquire()
                taken += 1
            yield
        finally:
            for _ in range(taken):
                share.release()


def run_row(spec: dict, earlier: List[dict], token: str, stop_name: Optional[str], here: Callable,
            slots: Dict[str, int]) -> dict:
    """A Dask task: one matrix row on this worker (see the module's docstring), in this process by here(spec,
    earlier) where it needs neither root nor the dmlbed parser; its rows, curves, the machine that ran it and,
    where this machine does not see --out, its folder packed. slots: per machine, its workers."""
    from distributed import Event
    stop = Event(stop_name) if stop_name else None
    home = sees_folder(spec["out_root"], token)
    with machine_share(spec["emulated"], slots):
        started = time.time()
        result = here(spec, earlier) if spec["in_worker"] else run_child(spec, earlier, stop)
        finished = time.time()
    result.update(machine=socket.gethostname(), machine_id=machine_id(), started=started, finished=finished,
                  tarball=None)
    if not home:
        import shutil
        result["tarball"] = packed(spec["out"])
        shutil.rmtree(spec["out"], ignore_errors=True)  # this machine's copy: the submitter's is the result
    return result


def failed_row(entry: dict, columns: List[str], error: str) -> dict:
    """The row of an entry that did not finish: its label, sweep values and why."""
    return {**dict.fromkeys(columns), "label": entry["label"], **entry["sweep"], "error": error, "failed": True}


def waves(entries: List[dict]) -> List[List[int]]:
    """The entries' indices in waves: an entry that takes a figure or the ports of an earlier row starts a new wave,
    so every row before it has landed when it is sent."""
    out: List[List[int]] = [[]]
    for i, e in enumerate(entries):
        if (e.get("derived") or e.get("sibling")) and out[-1]:
            out.append([])
        out[-1].append(i)
    return [w for w in out if w]


def run_distributed(scheduler: Scheduler, entries: List[dict], specs: List[dict], out_root: str, before: List[dict],
                    done: Callable[[int, dict], None], log: Callable[[str], None], here: Callable) -> None:
    """Every spec a task on the cluster, wave by wave (before: the rows that landed in an earlier run); done(index,
    result) as each lands. Ctrl-C or SIGTERM: every task told to stop (its network torn down on its machine) and
    waited for, then the error raised."""
    from distributed import Event, as_completed, wait
    token = write_token(out_root)
    stop_name = f"dmlbed-stop-{token}"
    earlier, landed, failed = list(before), 0, 0
    with connected(scheduler) as client:
        stop = Event(stop_name, client=client)
        workers = fitting(client)
        slots = workers["slots"] if any(spec["emulated"] for spec in specs) else {}
        futures: Dict = {}
        try:
            for wave in waves(specs):
                sent = list(earlier)
                futures = {client.submit(run_row, specs[i], sent, token, stop_name, here, slots,
                                         key=f"row-{token}-{i}", pure=False, retries=RETRIES,
                                         workers=workers["emulated" if specs[i]["emulated"] else "any"] or None,
                                         allow_other_workers=False): i for i in wave}
                log(f"{len(futures)} row{'s' if len(futures) > 1 else ''} sent to {scheduler}")
                for future in as_completed(futures):
                    i = futures[future]
                    try:
                        result = future.result()
                    except Exception as exc:  # noqa: BLE001 (its workers died more often than allowed)
                        result = {"rows": None, "curves": [], "error": f"lost: {type(exc).__name__}: {exc}"}
                    failed += result["rows"] is None
                    landed += 1
                    earlier.extend(result["rows"] or [])
                    done(i, result)
                    log(f"[{landed}/{len(specs)}] {entries[i]['label']} {entries[i]['sweep'] or ''} on "
                        f"{result.get('machine') or '?'}: {result.get('error') or 'done'} (running "
                        f"{sum(not f.done() for f in futures)}, failed {failed})")
        except BaseException:
            stop.set()  # each running row's child tears its network down; wait for them to say so
            wait(list(futures), timeout=CHILD_GRACE_S + 10)
            raise
