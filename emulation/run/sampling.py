"""Live sampling while a run goes on: the machine's CPU busy share (/proc/stat; niced work counts as free) and the software switch's busiest
thread (/proc/PID/task), in a background thread; fidelity.py judges the samples after the run."""

from __future__ import annotations

import os
import statistics
import threading
import time
from typing import Dict, List, Optional, Tuple

CPU_SATURATED = 0.95              # busy share of all cores in a sample
SWITCH_PIDFILE = "/var/run/openvswitch/ovs-vswitchd.pid"
SWITCH_SATURATED = 0.9            # share of one core used by the switch's busiest thread


def switch_pid(pidfile: str = SWITCH_PIDFILE) -> Optional[int]:
    """The software switch's process id, or None when it is not running."""
    try:
        with open(pidfile) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def thread_ticks(pid: int) -> Dict[str, int]:
    """CPU ticks (user + system) of each thread of a process."""
    out = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[tid] = int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return out


class CpuSampler:
    """Samples the machine's CPU busy share from /proc/stat in a background thread, and the share of one core
    used by the software switch's busiest thread (userspace OVS forwards non-PMD ports in one thread, so the
    switch saturates long before the machine does)."""

    def __init__(self, period: float = 0.5, switch: Optional[int] = None):
        self.period, self.samples, self.switch_samples = period, [], []
        self.switch = switch
        self._hz = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _read() -> Tuple[int, int]:
        """(all ticks, ticks the emulation could have had): idle, waiting for I/O, and the user time of niced
        processes, which yield the cores to the emulation's normal-priority ones at once."""
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        available = fields[1] + fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields[:8]), available

    def _loop(self) -> None:
        total0, idle0 = self._read()
        ticks0, t0, wall0 = (thread_ticks(self.switch) if self.switch else {}), time.monotonic(), time.time()
        while not self._stop.wait(self.period):
            total, idle = self._read()
            wall = time.time()
            if total > total0:
                self.samples.append((wall0, wall, 1.0 - (idle - idle0) / (total - total0)))
            total0, idle0 = total, idle
            if self.switch:
                ticks, t = thread_ticks(self.switch), time.monotonic()
                busiest = max((v - ticks0.get(k, v) for k, v in ticks.items()), default=0)
                self.switch_samples.append((wall0, wall, busiest / self._hz / max(t - t0, 1e-3)))
                ticks0, t0 = ticks, t
            wall0 = wall

    def __enter__(self) -> "CpuSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def report(self, window: Optional[Tuple[float, float]] = None) -> Dict[str, object]:
        """Mean busy share and the share of samples in which the CPU was saturated: of the samples inside the
        window (wall-clock seconds: the measured iterations, so the workers' start-up -- importing torch --
        does not count) when it holds any, else of all."""
        s, w = values_in(self.samples, window), values_in(self.switch_samples, window)
        scope = "measured iterations" if window is not None else "whole run"
        if window is not None and not s:
            s, w, scope = values_in(self.samples), values_in(self.switch_samples), \
                "whole run (no sample fell inside the measured iterations)"
        out = {"samples": len(s), "scope": scope, "busy_mean": round(statistics.mean(s), 4) if s else None,
               "saturated_share": round(sum(v >= CPU_SATURATED for v in s) / len(s), 4) if s else None}
        if w:
            out["switch_thread_mean"] = round(statistics.mean(w), 4)
            out["switch_saturated_share"] = round(sum(v >= SWITCH_SATURATED for v in w) / len(w), 4)
        return out


def values_in(samples, window: Optional[Tuple[float, float]] = None) -> List[float]:
    """The values of (start, end, value) samples lying inside window (all of them without one)."""
    return [v for a, b, v in samples if window is None or (a >= window[0] and b <= window[1])]




class InterfaceSampler:
    """Samples every host's interface byte counters from outside its namespace (/proc/PID/net/dev of a process
    in it), in a background thread: the rate each link carried over time, for commands whose ranks record nothing
    themselves (`dmlbed launch`)."""

    def __init__(self, pids: Dict[str, int], interfaces: Dict[str, List[str]], period: float = 0.5):
        from workloads.netstats import interface_bytes, tcp_counters
        self.read_bytes, self.read_tcp = interface_bytes, tcp_counters
        self.pids, self.interfaces, self.period = pids, interfaces, period
        self.samples: List[Tuple[float, Dict[str, Dict[str, int]]]] = []  # (wall time, interface -> rx/tx bytes)
        self.tcp_before: Dict[str, Dict[str, int]] = {}
        self.tcp_after: Dict[str, Dict[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _read(self) -> Dict[str, Dict[str, int]]:
        out: Dict[str, Dict[str, int]] = {}
        for host, pid in self.pids.items():
            out.update(self.read_bytes(self.interfaces.get(host), f"/proc/{pid}"))
        return out

    def _loop(self) -> None:
        while True:
            self.samples.append((time.time(), self._read()))
            if self._stop.wait(self.period):
                self.samples.append((time.time(), self._read()))
                return

    def __enter__(self) -> "InterfaceSampler":
        self.tcp_before = {h: self.read_tcp(f"/proc/{pid}") for h, pid in self.pids.items()}
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.tcp_after = {h: self.read_tcp(f"/proc/{pid}") for h, pid in self.pids.items()}

    def totals(self) -> Dict[str, Dict[str, int]]:
        """Bytes each interface sent and received between the first and the last sample."""
        if len(self.samples) < 2:
            return {}
        first, last = self.samples[0][1], self.samples[-1][1]
        return {k: {d: last[k][d] - first[k][d] for d in ("tx", "rx")} for k in last if k in first}

    def rates(self) -> List[Tuple[float, float, Dict[str, float]]]:
        """(start, end, interface -> sent Mbit/s) between consecutive samples."""
        out = []
        for (t0, a), (t1, b) in zip(self.samples, self.samples[1:]):
            if t1 > t0:
                out.append((t0, t1, {k: (b[k]["tx"] - a[k]["tx"]) * 8 / (t1 - t0) / 1e6 for k in b if k in a}))
        return out

    def tcp(self) -> Dict[str, Dict[str, int]]:
        """Each host's TCP counters over the sampled time."""
        return gains(self.tcp_before, self.tcp_after)


def gains(before: Dict[str, Dict[str, int]], after: Dict[str, Dict[str, int]]) -> Dict[str, Dict[str, int]]:
    """Per host, what each of its counters gained from before to after (a counter missing after: 0)."""
    return {h: {k: after.get(h, {}).get(k, 0) - v for k, v in counters.items()} for h, counters in before.items()}


def counter_gains(before: Dict[str, int], after: Dict[str, int]) -> Dict[str, int]:
    """What each counter gained from before to after (a counter new since: all of it), e.g. switch ports' drops."""
    return {k: v - before.get(k, 0) for k, v in after.items()}


def pss_kib(pid: int) -> Optional[int]:
    """A process's proportional set size in KiB (shared pages divided among the processes sharing them)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def rank_memory(rank_pids: List[int], extra_pids: List[int]) -> dict:
    """Per-rank memory (PSS, MiB) of running ranks: the median rank, and the whole set's share per rank with the
    processes they were started from (extra_pids: the fork server) counted in."""
    ranks = [k for k in (pss_kib(p) for p in rank_pids) if k is not None]
    extra = [k for k in (pss_kib(p) for p in extra_pids) if k is not None]
    if not ranks:
        return {}
    return {"pss_mib_median": round(statistics.median(ranks) / 1024, 1),
            "pss_mib_per_rank": round((sum(ranks) + sum(extra)) / len(ranks) / 1024, 1),
            "pss_mib_total": round((sum(ranks) + sum(extra)) / 1024, 1), "ranks_sampled": len(ranks)}


def first_iteration_s(rows: Dict[int, List[dict]], started: float) -> Optional[float]:
    """Seconds from starting the ranks until the last of them began its first iteration."""
    firsts = [r[0]["start"] for r in rows.values() if r and "start" in r[0]]
    return round(max(firsts) - started, 3) if firsts and len(firsts) == len(rows) else None
