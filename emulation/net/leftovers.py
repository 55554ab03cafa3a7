"""What a finished emulated run left on the machine (bridges, interfaces, processes, run records), and the software
switch's resident memory: the figures a soak judges after every run."""

import os
from typing import List, Optional, Set

from emulation.net.runstate import STATE_ROOT, list_bridges

# command-line fragments of the processes an emulated run starts (workers, their fork server, controllers, host shells)
RUN_PROCESSES = ("workloads.worker", "workloads.forkserver", "ryu-manager", "controllers/ryu_manager.py", "mininet:")


def interfaces() -> Set[str]:
    """The machine's network interfaces now (a soak's baseline before its first run)."""
    return set(os.listdir("/sys/class/net"))


def rss_kb(pid: Optional[int]) -> Optional[int]:
    """Resident memory of a process in kB (None when it is gone or pid is None)."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration, ValueError):
        return None


def run_processes() -> List[str]:
    """Workers, controllers and Mininet host shells still running ('PID: command')."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if any(fragment in cmd for fragment in RUN_PROCESSES):
            found.append(f"{pid}: {cmd[:80]}")
    return found


def leftovers(baseline: Set[str]) -> List[str]:
    """What runs left behind since baseline (the interfaces there were before them): bridges, new interfaces,
    processes of runs and run records."""
    out = [f"bridge {b}" for b in list_bridges()]
    out += [f"interface {i}" for i in sorted(interfaces() - baseline)]
    out += [f"process {p}" for p in run_processes()]
    if os.path.isdir(STATE_ROOT):
        out += [f"run record {d}" for d in sorted(os.listdir(STATE_ROOT)) if d.isdigit()]
    return out
