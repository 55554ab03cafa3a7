"""TCP as part of the emulated network: the settings every host namespace gets, as data and commands (pure).

Nothing here touches the root namespace: the sysctls below are per network namespace (Linux >= 4.15) and
rto_min is an attribute of each host's own routes. Defaults were chosen by measurement on a 2-core machine
(docs/explanation/timing-causes.md); every result records the settings it ran with.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, replace
from typing import Dict, List, Optional

CONGESTION_CONTROLS = ("cubic", "reno", "bbr", "dctcp")  # dctcp: a module many kernels lack; checked before a run
EPHEMERAL_PORTS = (32768, 60999)  # Linux's default net.ipv4.ip_local_port_range
TCPIP_HEADERS = 52   # IPv4 (20) + TCP with timestamps (32): an MTU minus this is the MSS
ETHERNET_HEADER = 14  # what HTB counts per frame beyond the IP packet
# The userspace switch's cost is per packet, so the emulated links carry 3500-byte frames by default: bcube:3,2
# with 18 flows at 100 Mbit/s reached 0.58-0.68 of the shaped rate at MTU 1500, 0.86-0.92 at 3000, 0.98-0.99
# at 3500 and 0.95 at 3600 (docs/explanation/timing-causes.md). AF_XDP ports here carry at most 3690 (a 4 KiB umem frame less XDP's and OVS's
# headroom; 3700 is dropped), the kernel datapath up to 9000 (jumbo frames).
DEFAULT_MTU = 3500
MIN_MTU, MAX_MTU, AFXDP_MAX_MTU = 576, 9000, 3690
# Sized to the rate (the defaults, "auto"): a socket may queue TSQ_TIME_S of its host's NIC rate (16 KB at 25
# Mbit/s), at most TSQ_MAX_BYTES (reached at 105 Mbit/s). The minimum RTO covers RTO_DRAINS drains of a full
# switch port buffer at the network's slowest rate: a segment can wait behind a full port buffer and its host's
# queue, and its ACK behind the same on the way back (the ACK's port also carries other hosts' data to the
# sender; a host's queue, 8 peers' TSQ on PS star:9, holds about half a port buffer). Measured on PS star:9
# (docs/explanation/timing-causes.md): at 25 Mbit/s a 64 KB TSQ and 5 ms gave 7.7 spurious RTOs per worker-iteration
# and CV 0.09; 16 KB with 100 ms 3.7, with 250 ms 0.68; at 10 Mbit/s 2.5 drains (703 ms) left 0.14-0.35 and CV
# up to 0.043 in five runs.
TSQ_TIME_S = 0.005
TSQ_MIN_BYTES, TSQ_MAX_BYTES = 4096, 65536
RTO_DRAINS = 3.0
RTO_MIN_FLOOR_MS = 5


def mss_bytes(mtu: int = DEFAULT_MTU) -> int:
    """TCP payload of a full segment on this MTU (with timestamps)."""
    return mtu - TCPIP_HEADERS


def goodput(mtu: int = DEFAULT_MTU) -> float:
    """Payload share of a shaped link's rate in full frames of this MTU (0.956 at 1500, 0.981 at 3500)."""
    return mss_bytes(mtu) / (mtu + ETHERNET_HEADER)


GOODPUT = goodput(DEFAULT_MTU)


def tsq_for_rate(mbit: float) -> int:
    """TSQ bytes for a NIC of this rate: TSQ_TIME_S of it, within [TSQ_MIN_BYTES, TSQ_MAX_BYTES]."""
    return int(min(TSQ_MAX_BYTES, max(TSQ_MIN_BYTES, mbit * 1e6 / 8 * TSQ_TIME_S)))


def rto_min_for_rate(mbit: float, switch_queue_packets: int, mtu: int = DEFAULT_MTU) -> int:
    """Minimum RTO (ms) for a network whose slowest link has this rate: RTO_DRAINS drains of a full port buffer."""
    drain_ms = switch_queue_packets * (mtu + ETHERNET_HEADER) * 8 / (mbit * 1e6) * 1000
    return max(RTO_MIN_FLOOR_MS, math.ceil(RTO_DRAINS * drain_ms))


@dataclass(frozen=True)
class TcpSettings:
    """TCP and queue settings of every emulated host.

    congestion_control: set on every socket dmlbed opens (the machine's default is not inherited);
    rto_min_ms: minimum retransmission timeout on every host route (the kernel's default is 200 ms; 0 keeps it;
        None sizes it to the network's slowest rate, see rto_min_for_rate);
    quickack: every host route ACKs each segment at once (the route's quickack) instead of delaying ACKs;
    slow_start_after_idle: whether cwnd collapses after idle (off: steps that pause do not restart slowly);
    tsq_bytes: TCP Small Queues limit per socket (net.ipv4.tcp_limit_output_bytes): how much one socket
        may hold in its host's queue, so a host's own NIC queue pushes back instead of dropping (None: sized
        to each host's own NIC rate, see tsq_for_rate);
    host_queue_packets: HTB leaf at a host's egress (the NIC queue; TSQ keeps it from overflowing);
    switch_queue_packets: HTB leaf of switch-side queues (shaping bridges, ingress IFB): a switch port buffer;
    socket_buffer_bytes: SO_SNDBUF/SO_RCVBUF the transport asks for: small, so that handing a chunk to the
        socket means it is about to go on the wire and the engine, not the kernel, orders what a link carries;
    mtu: bytes of every emulated interface (hosts, switch ports, shaping boxes, tunnels): fewer, larger frames
        for the userspace switch, whose forwarding thread pays per packet;
    ecn_mark_packets: switch port buffers are RED queues marking ECN from this many packets (0: drop-tail FIFOs),
        and the hosts ask for ECN on every connection (net.ipv4.tcp_ecn=1).
    """

    congestion_control: str = "cubic"
    rto_min_ms: Optional[int] = None
    quickack: bool = False
    slow_start_after_idle: bool = False
    tsq_bytes: Optional[int] = None
    host_queue_packets: int = 1000
    switch_queue_packets: int = 100
    socket_buffer_bytes: int = 256 << 10
    mtu: int = DEFAULT_MTU
    ecn_mark_packets: int = 0

    def sized(self, host_mbit: float, slowest_mbit: float) -> "TcpSettings":
        """These settings for one host: TSQ sized to its own NIC rate and the minimum RTO to the network's slowest
        link where they were left to the rate (None); given values stay."""
        return replace(self, tsq_bytes=tsq_for_rate(host_mbit) if self.tsq_bytes is None else self.tsq_bytes,
                       rto_min_ms=rto_min_for_rate(slowest_mbit, self.switch_queue_packets, self.mtu)
                       if self.rto_min_ms is None else self.rto_min_ms)

    def sysctl_commands(self) -> List[str]:
        """sysctl commands to run inside a host's namespace. The congestion control is not among them: a
        namespace may only default to one of the root's net.ipv4.tcp_allowed_congestion_control, so dmlbed's
        transport and iperf3 set it on every socket (TCP_CONGESTION, which root may set to any available)."""
        return [f"sysctl -qw net.ipv4.tcp_slow_start_after_idle={int(self.slow_start_after_idle)}",
                f"sysctl -qw net.ipv4.tcp_limit_output_bytes={self.tsq_bytes}",
                f"sysctl -qw net.ipv4.tcp_rmem='4096 131072 {max(self.socket_buffer_bytes, 131072)}'",
                f"sysctl -qw net.ipv4.tcp_wmem='4096 131072 {max(self.socket_buffer_bytes, 131072)}'"] + \
            (["sysctl -qw net.ipv4.tcp_ecn=1"] if self.ecn_mark_packets else [])

    def route_options(self) -> str:
        """Options appended to every host route ('' keeps the kernel's 200 ms minimum RTO and delayed ACKs)."""
        return " ".join(([f"rto_min {self.rto_min_ms}ms"] if self.rto_min_ms else []) +
                        (["quickack 1"] if self.quickack else []))

    def to_dict(self) -> Dict[str, object]:
        """JSON-ready form (recorded in summary.json and net --check reports)."""
        return asdict(self)


def route_rto_min_ms(route: str) -> Optional[int]:
    """The minimum RTO (ms) a line of `ip route show` carries ('rto_min lock 282ms', '1.2s'), or None."""
    found = re.search(r"\brto_min (?:lock )?([\d.]+)(ms|s)\b", route)
    return None if not found else round(float(found.group(1)) * (1 if found.group(2) == "ms" else 1000))


def wire_bytes(payload: float, mtu: int = DEFAULT_MTU) -> float:
    """Bytes a payload occupies on the wire in full segments of this MTU (headers, framing)."""
    return payload / goodput(mtu)


def even_ephemeral_port(n: int) -> int:
    """The even port of Linux's ephemeral range that n picks (connect() prefers even ports), n any integer."""
    span = (EPHEMERAL_PORTS[1] - EPHEMERAL_PORTS[0]) // 2
    return EPHEMERAL_PORTS[0] + 2 * (n % span)
