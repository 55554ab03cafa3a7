"""Where a result came from: dmlbed's version and commit, the date, the command line, the kernel, Open vSwitch,
Mininet, Python, torch and controller library versions, and the machine's size (read without importing torch or
Mininet, so that every command stays fast)."""

from __future__ import annotations

import datetime
import functools
import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
from typing import Optional

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONTROLLER_LIBRARIES = ("ryu", "os-ken")


def package_version(name: str) -> Optional[str]:
    """An installed distribution's version, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _output(args) -> Optional[str]:
    """A command's first line of output, or None when it is missing or fails."""
    try:
        r = subprocess.run(args, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = r.stdout.strip().splitlines()
    return lines[0].strip() if r.returncode == 0 and lines else None


def commit() -> dict:
    """The checkout's commit and whether it had uncommitted changes (None outside a git checkout)."""
    head = _output(["git", "-C", PROJECT, "rev-parse", "HEAD"])
    if head is None:
        return {"commit": None, "dirty": None}
    status = subprocess.run(["git", "-C", PROJECT, "status", "--porcelain", "--untracked-files=no"],
                            capture_output=True, text=True)
    return {"commit": head, "dirty": bool(status.stdout.strip())}


def openvswitch_version() -> Optional[str]:
    """'3.1.0' from `ovs-vswitchd --version` (None without Open vSwitch)."""
    line = _output(["ovs-vswitchd", "--version"])
    return line.split()[-1] if line else None


def memory_bytes() -> Optional[int]:
    """MemTotal of this machine."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


@functools.lru_cache(maxsize=1)
def environment() -> dict:
    """What stays the same for every result of this process."""
    controller = {name: v for name in CONTROLLER_LIBRARIES if (v := package_version(name))}
    return {"dmlbed": package_version("dmlbed"), **commit(), "kernel": platform.release(),
            "openvswitch": openvswitch_version(), "mininet": package_version("mininet"),
            "python": platform.python_version(), "torch": package_version("torch"),
            "controller_library": controller or None, "cpus": os.cpu_count(), "memory_bytes": memory_bytes()}


def provenance(argv=None) -> dict:
    """The provenance block of a result: environment() plus the date and the command line."""
    argv = sys.argv if argv is None else argv
    command = shlex.join(["dmlbed" if os.path.basename(argv[0]) in ("dmlbed", "cli.py") else argv[0], *argv[1:]])
    return {**environment(), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": command}


def version_text() -> str:
    """What `dmlbed --version` prints: the version, then the rest of the environment one per line."""
    env = environment()
    lines = [f"dmlbed {env['dmlbed']}" + (f" (commit {env['commit'][:12]}{', modified' if env['dirty'] else ''})"
                                          if env["commit"] else "")]
    for key in ("kernel", "openvswitch", "mininet", "python", "torch"):
        lines.append(f"{key:<18} {env[key] or 'not found'}")
    libraries = env["controller_library"] or {}
    lines.append(f"{'controller':<18} " + (", ".join(f"{k} {v}" for k, v in libraries.items()) or "not found"))
    memory = env["memory_bytes"]
    lines.append(f"{'machine':<18} {env['cpus']} CPUs, " + (f"{memory / 2 ** 30:.1f} GiB" if memory else "memory unknown"))
    return "\n".join(lines)
