"""What a run needs from the machine (memory), checked against what it has before anything starts."""

from __future__ import annotations

from typing import Optional

# A torch rank before its model: started as its own interpreter 341 MiB (PSS, LeNet-5, at its first iteration);
# forked from the fork server it shares torch with it and the other ranks: star:16 ring, 16 ranks and the server
# together peaked at 2152 MiB PSS with LeNet-5 (12.5 MiB of gradient) and 6666 MiB with mlp:52MB, so 7.2 copies of
# the model per rank and 36 MiB besides (the estimate keeps some margin above both).
RANK_BASE_BYTES = {"exec": 400 << 20, "fork": 64 << 20}
FORK_SERVER_BYTES = 300 << 20
RANK_MODEL_COPIES = 8         # parameters, gradient, flat gradient, result, optimizer state, send/receive buffers
BENCH_BUFFER_COPIES = 4       # a bench rank: its buffer, what it starts from, what it must end with, the comparison
# Userspace Open vSwitch: its own base, plus per AF_XDP port a umem of 16384 4-KiB frames that the kernel pins
# (OVS's netdev-afxdp: 4 x (2048 + 2048) descriptors), 64 MiB, and its packet metadata. Measured (ovs-vswitchd's
# VmRSS during `net --check`): 593 MiB above idle with star:8's ports, 1764 MiB with star:24's, 73 MiB a port;
# fattree:6's 270 ports took it to 20 GB and the OOM killer ended it under 54 ranks, so where AF_XDP ports on every
# link would take more than SWITCH_SHARE, the highest switch-to-switch links use plain ports (validation.plain_links:
# 66 of fattree:6's 108 links on this machine). (Kernel datapath: none.)
SWITCH_BASE_BYTES = 128 << 20
AFXDP_PORT_BYTES = 74 << 20
HEADROOM = 0.9                # never plan to use more than this share of the available memory
SWITCH_SHARE = 0.5            # AF_XDP on switch-to-switch links too while the switch takes at most this share of it


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


def switch_bytes(afxdp_ports: int) -> int:
    """Bytes the userspace switch holds with this many AF_XDP ports (0: the kernel datapath, nothing)."""
    return SWITCH_BASE_BYTES + afxdp_ports * AFXDP_PORT_BYTES if afxdp_ports else 0


def afxdp_port_budget(available: Optional[int] = None) -> Optional[int]:
    """How many AF_XDP ports the userspace switch may open within its share of the memory available (the rest is
    the ranks'); None where the kernel does not say."""
    available = available_memory() if available is None else available
    if available is None:
        return None
    return max(0, int((SWITCH_SHARE * HEADROOM * available - SWITCH_BASE_BYTES) // AFXDP_PORT_BYTES))


def memory_needed(ranks: int, gradient_bytes: int, afxdp_ports: int, start: str = "fork",
                  copies: int = RANK_MODEL_COPIES) -> int:
    """Bytes a run of `ranks` torch processes with a gradient of gradient_bytes needs (`copies` of it each),
    started as `start` (fork: from the fork server; exec: each its own interpreter), plus the userspace switch
    with its AF_XDP ports."""
    return (ranks * (RANK_BASE_BYTES[start] + copies * gradient_bytes)
            + (FORK_SERVER_BYTES if start == "fork" and ranks else 0) + switch_bytes(afxdp_ports))


def gib(n: float) -> str:
    """Bytes as GiB with one decimal (as MiB below one GiB)."""
    return f"{n / (1 << 30):.1f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.0f} MiB"


def check_memory(ranks: int, gradient_bytes: int, afxdp_ports: int, available: Optional[int] = None,
                 start: str = "fork", copies: int = RANK_MODEL_COPIES, what: str = "model") -> None:
    """Refuse a run (or, with no ranks, a network) the machine's memory cannot hold, in one line naming the
    figures."""
    available = available_memory() if available is None else available
    if available is None:
        return
    need = memory_needed(ranks, gradient_bytes, afxdp_ports, start, copies)
    if need > HEADROOM * available:
        parts = [f"{ranks} ranks x ({gib(RANK_BASE_BYTES[start])} + {copies} x {gib(gradient_bytes)} "
                 f"{what})" + (" + the fork server" if start == "fork" else "")] if ranks else []
        if afxdp_ports:
            parts.append(f"the userspace switch's {afxdp_ports} AF_XDP ports ({gib(switch_bytes(afxdp_ports))}, "
                         f"{AFXDP_PORT_BYTES >> 20} MiB each)")
        fix = ("fewer switch ports (a smaller topology) or the kernel datapath (a machine with the openvswitch "
               "module, as the Vagrant VM)" if afxdp_ports and switch_bytes(afxdp_ports) > HEADROOM * available / 2
               else "a smaller --model or fewer hosts")
        raise ResourceError(f"this {'run' if ranks else 'network'} needs about {gib(need)} of memory "
                            f"({' + '.join(parts)}) but the machine has {gib(available)} available: use {fix}")
