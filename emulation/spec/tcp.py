"""TCP as part of the emulated network: the settings every host namespace gets, as data and commands (pure).

Nothing here touches the root namespace: the sysctls below are per network namespace (Linux >= 4.15) and
rto_min is an attribute of each host's own routes. Defaults were chosen by measurement on a 2-core machine
(see README, "Faithful timings"); every result records the settings it ran with.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Dict, List

CONGESTION_CONTROLS = ("cubic", "reno", "bbr")  # what a stock kernel has built in; checked at bring-up
MSS_BYTES = 1448    # payload of a full segment on a 1500-byte MTU with timestamps
FRAME_OVERHEAD = 66  # TCP/IP headers with timestamps (52) + Ethernet header (14): what HTB counts per segment
GOODPUT = MSS_BYTES / (MSS_BYTES + FRAME_OVERHEAD)  # payload share of the shaped rate in full frames


@dataclass(frozen=True)
class TcpSettings:
    """TCP and queue settings of every emulated host.

    congestion_control: set on every socket dmlbed opens (the machine's default is not inherited);
    rto_min_ms: minimum retransmission timeout on every host route (the kernel's default is 200 ms);
    slow_start_after_idle: whether cwnd collapses after idle (off: steps that pause do not restart slowly);
    tsq_bytes: TCP Small Queues limit per socket (net.ipv4.tcp_limit_output_bytes): how much one socket
        may hold in its host's queue, so a host's own NIC queue pushes back instead of dropping;
    host_queue_packets: HTB leaf at a host's egress (the NIC queue; TSQ keeps it from overflowing);
    switch_queue_packets: HTB leaf of switch-side queues (shaping bridges, ingress IFB): a switch port buffer;
    socket_buffer_bytes: SO_SNDBUF/SO_RCVBUF the transport asks for: small, so that handing a chunk to the
        socket means it is about to go on the wire and the engine, not the kernel, orders what a link carries.
    """

    congestion_control: str = "cubic"
    rto_min_ms: int = 5
    slow_start_after_idle: bool = False
    tsq_bytes: int = 65536
    host_queue_packets: int = 1000
    switch_queue_packets: int = 100
    socket_buffer_bytes: int = 256 << 10

    def sysctl_commands(self) -> List[str]:
        """sysctl commands to run inside a host's namespace. The congestion control is not among them: a
        namespace may only default to one of the root's net.ipv4.tcp_allowed_congestion_control, so dmlbed's
        transport and iperf3 set it on every socket (TCP_CONGESTION, which root may set to any available)."""
        return [f"sysctl -qw net.ipv4.tcp_slow_start_after_idle={int(self.slow_start_after_idle)}",
                f"sysctl -qw net.ipv4.tcp_limit_output_bytes={self.tsq_bytes}",
                f"sysctl -qw net.ipv4.tcp_rmem='4096 131072 {max(self.socket_buffer_bytes, 131072)}'",
                f"sysctl -qw net.ipv4.tcp_wmem='4096 131072 {max(self.socket_buffer_bytes, 131072)}'"]

    def route_options(self) -> str:
        """Options appended to every host route ('' keeps the kernel's 200 ms minimum RTO)."""
        return f"rto_min {self.rto_min_ms}ms" if self.rto_min_ms else ""

    def to_dict(self) -> Dict[str, object]:
        """JSON-ready form (recorded in summary.json and net --check reports)."""
        return asdict(self)


def wire_bytes(payload: float) -> float:
    """Bytes a payload occupies on the wire in full segments (headers, framing)."""
    return payload * (MSS_BYTES + FRAME_OVERHEAD) / MSS_BYTES
