"""What a run needs from the machine (memory), checked against what it has before anything starts."""

from __future__ import annotations

from typing import Optional

# A torch rank before its model (PSS, LeNet-5, at its first iteration): started as its own interpreter 341 MiB;
# forked from the fork server 150-200 MiB, plus the server itself once (workloads/forkserver.py).
RANK_BASE_BYTES = {"exec": 400 << 20, "fork": 200 << 20}
FORK_SERVER_BYTES = 300 << 20
RANK_MODEL_COPIES = 8         # parameters, gradient, flat gradient, result, optimizer state, send/receive buffers
SWITCH_BYTES = 1 << 30        # userspace Open vSwitch with AF_XDP ports: 0.75 GB resident measured (kernel: none)
HEADROOM = 0.9                # never plan to use more than this share of the available memory


class ResourceError(ValueError):
    """The machine cannot hold the run."""


def available_memory(meminfo: str = "/proc/meminfo") -> Optional[int]:
    """MemAvailable in bytes, or None where the kernel does not say."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def memory_needed(ranks: int, gradient_bytes: int, userspace_switch: bool, start: str = "fork") -> int:
    """Bytes a run of `ranks` torch processes with a gradient of gradient_bytes needs, started as `start` (fork:
    from the fork server; exec: each its own interpreter), plus the userspace switch where it runs."""
    return (ranks * (RANK_BASE_BYTES[start] + RANK_MODEL_COPIES * gradient_bytes)
            + (FORK_SERVER_BYTES if start == "fork" else 0) + (SWITCH_BYTES if userspace_switch else 0))


def gib(n: float) -> str:
    """Bytes as GiB with one decimal."""
    return f"{n / (1 << 30):.1f} GiB"


def check_memory(ranks: int, gradient_bytes: int, userspace_switch: bool, available: Optional[int] = None,
                 start: str = "fork") -> None:
    """Refuse a run the machine's memory cannot hold, in one line naming both figures."""
    available = available_memory() if available is None else available
    if available is None:
        return
    need = memory_needed(ranks, gradient_bytes, userspace_switch, start)
    if need > HEADROOM * available:
        raise ResourceError(f"this run needs about {gib(need)} of memory ({ranks} ranks x "
                            f"({gib(RANK_BASE_BYTES[start])} + {RANK_MODEL_COPIES} x {gib(gradient_bytes)} model)"
                            f"{' + the fork server' if start == 'fork' else ''}"
                            f"{' + the userspace switch' if userspace_switch else ''}) but the machine has "
                            f"{gib(available)} available: use a smaller --model or fewer hosts")
