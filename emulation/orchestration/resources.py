"""What a run needs from the machine (memory), checked against what it has before anything starts."""

from __future__ import annotations

from typing import Optional

RANK_BASE_BYTES = 400 << 20   # a torch worker before its model: 350-370 MB measured (PSS, LeNet-5 workers)
RANK_MODEL_COPIES = 8         # parameters, gradient, flat gradient, result, optimizer state, send/receive buffers
SWITCH_BYTES = 1 << 30        # userspace Open vSwitch with AF_XDP ports: 0.75 GB resident measured
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


def memory_needed(ranks: int, gradient_bytes: int, emulated: bool) -> int:
    """Bytes a run of `ranks` torch processes with a gradient of gradient_bytes needs, plus the switch."""
    return ranks * (RANK_BASE_BYTES + RANK_MODEL_COPIES * gradient_bytes) + (SWITCH_BYTES if emulated else 0)


def gib(n: float) -> str:
    """Bytes as GiB with one decimal."""
    return f"{n / (1 << 30):.1f} GiB"


def check_memory(ranks: int, gradient_bytes: int, emulated: bool, available: Optional[int] = None) -> None:
    """Refuse a run the machine's memory cannot hold, in one line naming both figures."""
    available = available_memory() if available is None else available
    if available is None:
        return
    need = memory_needed(ranks, gradient_bytes, emulated)
    if need > HEADROOM * available:
        raise ResourceError(f"this run needs about {gib(need)} of memory ({ranks} ranks x ({gib(RANK_BASE_BYTES)} + "
                            f"{RANK_MODEL_COPIES} x {gib(gradient_bytes)} model)"
                            f"{' + the switch' if emulated else ''}) but the machine has {gib(available)} "
                            f"available: use a smaller --model or fewer hosts")
