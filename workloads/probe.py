"""A data-plane probe across one link: small UDP datagrams at a fixed interval, numbered and stamped with their send
time; the receiver keeps every gap longer than a few intervals, in arrival or in send time, which is where the path
was out (a link down, until the switches moved the flow). A gap's send times bound the datagrams the network lost;
its arrival times add the receiver's own scheduling on a busy machine."""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import struct
import sys
import time

DATAGRAM = struct.Struct("!QdQ")  # sequence number, send time, padding
GAP_INTERVALS = 5  # arrivals further apart than this many intervals are a gap


def send(dst: str, port: int, sport: int, interval_s: float) -> None:
    """Send numbered datagrams from sport to dst:port every interval_s until stopped."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", sport))
    seq, due = 0, time.monotonic()
    while True:
        try:
            sock.sendto(DATAGRAM.pack(seq, time.time(), 0), (dst, port))
        except OSError:  # no route while a link is down: the datagram is lost like one dropped on the wire
            pass
        seq += 1
        due += interval_s
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        else:
            due = time.monotonic()


def receive(port: int, interval_s: float, log: str) -> None:
    """Receive until SIGTERM, then write the arrivals' gaps, counts and first and last arrival times as JSON."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", port))
    sock.settimeout(0.2)
    state = {"received": 0, "first": None, "last": None, "last_seq": -1, "last_sent": None, "gaps": [],
             "reordered": 0}
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        try:
            data = sock.recv(64)
        except socket.timeout:
            continue
        except InterruptedError:
            continue
        now = time.time()
        seq, sent = DATAGRAM.unpack(data[:DATAGRAM.size])[:2]
        if seq <= state["last_seq"]:
            state["reordered"] += 1
            continue
        late = state["last"] is not None and max(now - state["last"], sent - state["last_sent"])
        if late and late > GAP_INTERVALS * interval_s:
            state["gaps"].append({"from": state["last"], "to": now, "sent_from": state["last_sent"], "sent_to": sent,
                                  "lost": seq - state["last_seq"] - 1})
        state["first"] = state["first"] or now
        state["last"], state["last_seq"], state["last_sent"] = now, seq, sent
        state["received"] += 1
    state["sent_to_last"] = state["last_seq"] + 1
    with open(log + ".tmp", "w") as f:
        json.dump(state, f)
    os.replace(log + ".tmp", log)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("role", choices=("send", "recv"))
    ap.add_argument("--dst")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--sport", type=int, default=0)
    ap.add_argument("--interval", type=float, default=0.002)
    ap.add_argument("--log")
    args = ap.parse_args(argv)
    if args.role == "send":
        send(args.dst, args.port, args.sport, args.interval)
    else:
        receive(args.port, args.interval, args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
