"""Background traffic on an emulated host (no torch): `recv` takes one flow and discards it, `send` sends one as fast
as its share, at a capped rate, or only in its on periods; both log their cumulative bytes over time as JSON lines.

    python -m workloads.traffic_endpoint recv --port P --log FILE [--congestion CC --buffer BYTES]
    python -m workloads.traffic_endpoint send --dst IP --port P --log FILE [--rate-mbps R] [--schedule FILE --t0 T]
                                        [--congestion CC --buffer BYTES]

Its sockets take the job's congestion control and buffers (--congestion, --buffer), as the job's transport does, so
the two share a link as equals.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import sys
import time
from typing import List, Optional, Tuple

CHUNK = 64 << 10
LOG_EVERY_S = 0.1
CONNECT_FOR_S = 30.0
POLL_S = 0.05  # a blocked send returns this often, so an on period ends on time


class Stop(Exception):
    """SIGTERM: the run is over."""


def on_term(*_):
    raise Stop()


class ByteLog:
    """Cumulative bytes, one JSON line per LOG_EVERY_S (and a last one at the end)."""

    def __init__(self, path: str):
        self.file = open(path, "w", buffering=1)
        self.total, self.last = 0, 0.0

    def add(self, n: int, now: float) -> None:
        self.total += n
        if now - self.last >= LOG_EVERY_S:
            self.write(now)

    def write(self, now: float, **extra) -> None:
        self.last = now
        self.file.write(json.dumps({"t": now, "bytes": self.total, **extra}) + "\n")


def tune(sock: socket.socket, congestion: Optional[str], buffer: Optional[int]) -> None:
    """The job's congestion control and socket buffers (before connecting or listening)."""
    if congestion:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, congestion.encode())
    if buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)


def receive(port: int, log_path: str, congestion: Optional[str] = None, buffer: Optional[int] = None) -> None:
    """Accept one connection and read it until it closes or the run stops us."""
    log = ByteLog(log_path)
    server = socket.socket()
    tune(server, congestion, buffer)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", port))
    server.listen(1)
    log.write(time.time(), listening=port)
    buf = bytearray(CHUNK)
    try:
        conn, _ = server.accept()
        while True:
            n = conn.recv_into(buf)
            if not n:
                break
            log.add(n, time.time())
    except (Stop, OSError):
        pass
    log.write(time.time(), end=True)


def connect(dst: str, port: int, congestion: Optional[str], buffer: Optional[int]) -> socket.socket:
    """Connect, retrying while the receiver comes up."""
    deadline = time.time() + CONNECT_FOR_S
    while True:
        sock = socket.socket()
        tune(sock, congestion, buffer)
        sock.settimeout(5)
        try:
            sock.connect((dst, port))
            return sock
        except OSError:
            sock.close()
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def on_at(schedule: Optional[List[Tuple[float, float]]], t: float) -> Tuple[bool, float]:
    """Whether the flow sends at run time t, and the run time its state next changes."""
    if schedule is None:
        return True, float("inf")
    for a, b in schedule:
        if t < a:
            return False, a
        if t < b:
            return True, b
    return False, float("inf")


def send(dst: str, port: int, log_path: str, rate_mbps: Optional[float],
         schedule: Optional[List[Tuple[float, float]]], t0: float, congestion: Optional[str] = None,
         buffer: Optional[int] = None) -> None:
    """Send until stopped: as fast as the connection takes it, or paced to rate_mbps, and only in the schedule's on
    periods (seconds after t0)."""
    log = ByteLog(log_path)
    data = memoryview(bytes(CHUNK))
    paced_from, paced_bytes, sock = None, 0, None
    try:
        sock = connect(dst, port, congestion, buffer)
        sock.settimeout(POLL_S)
        log.write(time.time(), port=sock.getsockname()[1])
        while True:
            now = time.time()
            sending, change = on_at(schedule, now - t0)
            if not sending:
                paced_from = None
                if change == float("inf"):
                    break
                time.sleep(min(change - (now - t0), 0.5))
                continue
            if rate_mbps is not None:
                if paced_from is None:
                    paced_from, paced_bytes = now, 0
                ahead = paced_bytes * 8 / (rate_mbps * 1e6) - (now - paced_from)
                if ahead > 0:
                    time.sleep(min(ahead, POLL_S))
                    continue
            try:
                n = sock.send(data)
            except socket.timeout:
                continue
            paced_bytes += n
            log.add(n, time.time())
    except (Stop, OSError):
        pass
    log.write(time.time(), end=True)
    if sock is not None:
        sock.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("role", choices=("send", "recv"))
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--dst")
    ap.add_argument("--rate-mbps", type=float)
    ap.add_argument("--schedule", help="JSON file: [[start, end], ...] seconds after --t0 in which to send")
    ap.add_argument("--t0", type=float, default=0.0)
    ap.add_argument("--congestion", help="TCP congestion control of the socket (the job's)")
    ap.add_argument("--buffer", type=int, help="SO_SNDBUF and SO_RCVBUF, bytes (the job's)")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGTERM, on_term)
    if args.role == "recv":
        receive(args.port, args.log, args.congestion, args.buffer)
    else:
        schedule = None
        if args.schedule:
            with open(args.schedule) as f:
                schedule = [tuple(p) for p in json.load(f)]
        send(args.dst, args.port, args.log, args.rate_mbps, schedule, args.t0, args.congestion, args.buffer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
