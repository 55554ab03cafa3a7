"""Active queue management of the switch port buffers: RED marking ECN at K packets (--aqm red-ecn:K), its tc
arguments, and the closed forms of the queue it holds under DCTCP and of a drop-tail queue under loss-based TCP
(pure)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict

from emulation.core.tcp import ETHERNET_HEADER

NONE = "none"
RED_ECN = "red-ecn"
AQM_HELP = f"{NONE} (a drop-tail FIFO) or {RED_ECN}:K (RED marking ECN at K packets, as Mininet's enable_ecn)"
MAX_MARK_PACKETS = 100000
CUBIC_BETA, RENO_BETA = 0.7, 0.5  # what a loss leaves of the window


def parse_aqm(text: str) -> int:
    """K, the packets at which RED marks, from 'red-ecn:K' (0 for 'none'); ValueError naming what is valid."""
    text = (text or NONE).strip().lower()
    if text == NONE:
        return 0
    kind, _, k = text.partition(":")
    if kind != RED_ECN or not k.strip().isdigit() or not 1 <= int(k) <= MAX_MARK_PACKETS:
        raise ValueError(f"--aqm {text!r} is not valid: give {AQM_HELP}, K in 1-{MAX_MARK_PACKETS}")
    return int(k)


def describe(mark_packets: int) -> str:
    """The --aqm text of a marking threshold."""
    return f"{RED_ECN}:{mark_packets}" if mark_packets else NONE


def red_ecn_args(mark_packets: int, limit_packets: int, mbps: float, mtu: int) -> str:
    """tc arguments of a RED qdisc that marks (ECN) every packet once its average queue passes mark_packets
    full frames, holding at most limit_packets of them. Marking goes from none at K to all at K + 1 (probability
    1): DCTCP's step marking, as Mininet-HiFi's DCTCP reproduction set it. burst, the averaging's depth, is the
    least tc takes above K, so the average follows the queue within a few packets."""
    frame = mtu + ETHERNET_HEADER
    low, high = mark_packets * frame, (mark_packets + 1) * frame
    return (f"red limit {limit_packets * frame} min {low} max {high} avpkt {frame} burst {mark_packets + 1} "
            f"bandwidth {max(mbps, 0.001):g}Mbit probability 1 ecn")


@dataclass(frozen=True)
class QueueForecast:
    """The bottleneck queue's closed form, in packets: where it swings between, and its middle."""

    low: float
    high: float
    law: str

    @property
    def middle(self) -> float:
        return (self.low + self.high) / 2

    def to_dict(self) -> Dict[str, object]:
        return {"low_packets": round(self.low, 2), "high_packets": round(self.high, 2),
                "middle_packets": round(self.middle, 2), "law": self.law}


def bdp_packets(mbps: float, rtt_s: float, mtu: int) -> float:
    """The bottleneck's bandwidth-delay product in full frames."""
    return mbps * 1e6 * rtt_s / 8 / (mtu + ETHERNET_HEADER)


def dctcp_queue(mark_packets: int, senders: int, bdp: float) -> QueueForecast:
    """DCTCP's queue with N long flows through one port marking at K (Alizadeh et al., SIGCOMM'10, section 3.3):
    it peaks at K + N and swings by A = sqrt(2N(C*RTT + K)) / 2 below that."""
    high = mark_packets + senders
    amplitude = math.sqrt(2 * senders * (bdp + mark_packets)) / 2
    return QueueForecast(max(0.0, high - amplitude), high, "DCTCP: Qmax = K + N, amplitude sqrt(2N(C*RTT+K))/2")


def droptail_queue(buffer_packets: int, bdp: float, congestion_control: str) -> QueueForecast:
    """A loss-based TCP's queue in a drop-tail buffer it fills: from full (the loss) down to what the window cut by
    the control's beta leaves above the pipe, beta(B + BDP) - BDP (synchronised losses: the deepest swing)."""
    beta = RENO_BETA if congestion_control == "reno" else CUBIC_BETA
    return QueueForecast(max(0.0, beta * (buffer_packets + bdp) - bdp), float(buffer_packets),
                         f"drop-tail: from B down to beta(B+BDP)-BDP, beta {beta:g}")


def queue_forecast(mark_packets: int, congestion_control: str, senders: int, buffer_packets: int,
                   bdp: float) -> QueueForecast:
    """The closed form for this queue: DCTCP's with marking and dctcp, else the drop-tail swing (a loss-based TCP
    reacting to marks as to losses halves at K: the drop-tail form with B = K)."""
    if mark_packets and congestion_control == "dctcp":
        return dctcp_queue(mark_packets, senders, bdp)
    if congestion_control == "bbr":
        return QueueForecast(0.0, max(1.0, bdp), "BBR: about one BDP in flight above the pipe at most")
    return droptail_queue(mark_packets or buffer_packets, bdp, congestion_control)
