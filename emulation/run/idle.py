"""Whether a launch's ranks have all gone quiet: no CPU and no bytes on their interfaces for a while (a hang: a
collective some rank never joined, a deadlock in the script), read from /proc."""

from __future__ import annotations

import os
from typing import Callable, Dict, Iterable, Optional, Tuple

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
QUIET_CPU_SHARE = 0.02  # of one core per rank: a process blocked in a socket read uses less
QUIET_BYTES_PER_S = 2048  # per rank: keepalives and ARP, not a transfer
Sample = Tuple[float, float]  # (CPU seconds, interface bytes) summed over the ranks


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of a process and every descendant still running (0 when it is gone)."""
    total, todo, seen = 0.0, [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError, IndexError):
            continue
    return total


def interface_bytes(pid: int) -> int:
    """Bytes received and sent on the interfaces of the process's network namespace, loopback left out."""
    try:
        with open(f"/proc/{pid}/net/dev") as f:
            lines = f.read().splitlines()[2:]
    except OSError:
        return 0
    total = 0
    for line in lines:
        name, data = line.split(":", 1)
        if name.strip() != "lo":
            values = data.split()
            total += int(values[0]) + int(values[8])
    return total


def sample(pids: Iterable[int], own_links: bool = True) -> Sample:
    """The ranks' CPU seconds and interface bytes, summed (own_links False: ranks on the machine's own namespace,
    whose interfaces carry everyone's traffic, are judged by their CPU alone)."""
    pids = list(pids)
    return sum(tree_cpu_s(p) for p in pids), sum(interface_bytes(p) for p in pids) if own_links else 0


class IdleWatch:
    """Says once, when every rank has been quiet for `quiet_s` seconds, that they may be hung."""

    def __init__(self, ranks: int, quiet_s: float, read: Callable[[], Sample]):
        self.ranks, self.quiet_s, self.read = ranks, quiet_s, read
        self.last: Optional[Tuple[float, Sample]] = None
        self.quiet_since: Optional[float] = None
        self.said = False

    def look(self, now: float) -> Optional[str]:
        """The warning, the first time the ranks have been quiet long enough (None otherwise)."""
        current = self.read()
        if self.last is not None:
            then, (cpu, sent) = self.last
            span = max(now - then, 1e-9)
            quiet = (current[0] - cpu) / span < QUIET_CPU_SHARE * self.ranks and \
                (current[1] - sent) / span < QUIET_BYTES_PER_S * self.ranks
            self.quiet_since = (self.quiet_since if self.quiet_since is not None else then) if quiet else None
        self.last = (now, current)
        if self.quiet_since is not None and now - self.quiet_since >= self.quiet_s and not self.said:
            self.said = True
            return (f"every rank has been idle for {now - self.quiet_since:.0f} s (no CPU, no bytes on their links): "
                    f"they may be hung (a collective some rank never joined, a deadlock); --time-limit stops them, "
                    f"each rank's stderr is in workers/")
        return None


def readers(pids: Dict[int, int], own_links: bool = True) -> Callable[[], Sample]:
    """A reader of the ranks' summed CPU and bytes by their pids (own_links: each rank in a namespace of its own)."""
    return lambda: sample(pids.values(), own_links)
