"""The background flows of an emulated run: receivers, then senders, started on their hosts before the ranks and
stopped after them (workloads/traffic_endpoint.py); their logs read back into each flow's throughput over time, and the
periods each flow sent in, which the fidelity verdict counts as the scenario's load on the links."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

from emulation.core.background import BACKGROUND_PORT, ONOFF, BackgroundFlow, schedule
from emulation.results.files import read_json_lines, write_atomic_csv, write_json
from workloads.runfolder import RunFolder

FOLDER = "background"
BIN_S = 0.5          # the throughput series' bins, emulated seconds
START_WAIT_S = 10.0  # for every sender to connect before the ranks start


class BackgroundTraffic:
    """What a run injects beside its job, in emulated time (dilation: real seconds per emulated second)."""

    def __init__(self, flows: Sequence[BackgroundFlow], out: str, seed: int, dilation: float, horizon_s: float,
                 congestion: str, buffer: int):
        self.flows, self.seed, self.dilation, self.horizon_s = tuple(flows), seed, dilation, horizon_s
        self.tcp = ["--congestion", congestion, "--buffer", str(buffer)]  # the job's sockets' settings
        self.folder = os.path.join(out, FOLDER)
        self.procs: List[subprocess.Popen] = []
        self.t0: Optional[float] = None
        self.shared_nics: Dict[str, List[str]] = {}  # source host -> its interfaces split between job and flows
        self.stopped = False
        self.final: Dict[Tuple[int, str], List[dict]] = {}

    def path(self, n: int, role: str) -> str:
        """Flow n's log of one role (send, recv)."""
        return os.path.join(self.folder, f"flow-{n}.{role}.jsonl")

    def start(self, hosts, address_of) -> None:
        """Start every receiver, then every sender (address_of: host name -> its primary address); wait until each
        sender is connected."""
        if not self.flows:
            return
        shutil.rmtree(self.folder, ignore_errors=True)  # an earlier run's logs (--force) must not mix in
        os.makedirs(self.folder)
        by_source: Dict[str, List[Tuple[str, int]]] = {}
        for n, f in enumerate(self.flows):
            by_source.setdefault(f.src, []).append((address_of(f.dst), BACKGROUND_PORT + n))
        self.shared_nics = {src: hosts.share_nic(src, flows) for src, flows in by_source.items()}
        self.t0 = time.time()
        for n, f in enumerate(self.flows):
            self.procs.append(hosts.popen(f.dst, [sys.executable, "-m", "workloads.traffic_endpoint", "recv",
                                                  "--port", str(BACKGROUND_PORT + n), "--log", self.path(n, "recv"),
                                                  *self.tcp],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for n, f in enumerate(self.flows):
            args = [sys.executable, "-m", "workloads.traffic_endpoint", "send", "--dst", address_of(f.dst),
                    "--port", str(BACKGROUND_PORT + n), "--log", self.path(n, "send"), "--t0", repr(self.t0),
                    *self.tcp]
            if f.rate_mbps is not None:
                args += ["--rate-mbps", repr(f.rate_mbps / self.dilation)]
            if f.kind == ONOFF:
                periods = [(a * self.dilation, b * self.dilation) for a, b in schedule(f, n, self.seed,
                                                                                        self.horizon_s)]
                write_json(os.path.join(self.folder, f"flow-{n}.schedule.json"), periods, indent=None)
                args += ["--schedule", os.path.join(self.folder, f"flow-{n}.schedule.json")]
            self.procs.append(hosts.popen(f.src, args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.time() + START_WAIT_S
        while time.time() < deadline and not all(self.sender_port(n) for n in range(len(self.flows))):
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.05)
        missing = [f.name for n, f in enumerate(self.flows) if not self.sender_port(n)]
        if missing:
            raise RuntimeError(f"background flow {missing[0]} did not connect within {START_WAIT_S:g} s")

    def stop(self, hosts) -> None:
        """Stop senders, then receivers (they log their last bytes on SIGTERM)."""
        for proc in self.procs:
            hosts.stop_process(proc)
        self.procs = []
        self.stopped = True

    def lines(self, n: int, role: str) -> List[dict]:
        """Flow n's log lines of one role ([] when missing); read once after the flows stopped (final by then)."""
        if (n, role) in self.final:
            return self.final[(n, role)]
        got = read_json_lines(self.path(n, role))
        if self.stopped:
            self.final[(n, role)] = got
        return got

    def sender_port(self, n: int) -> Optional[int]:
        """The TCP source port flow n's sender connected from (its ECMP path), once connected."""
        return next((l["port"] for l in self.lines(n, "send") if "port" in l), None)

    def foreign(self) -> List[Dict[str, object]]:
        """What fidelity counts as the scenario's load: per flow its ends, its source port (its path) and its
        received bytes over wall-clock time."""
        out = []
        for n, f in enumerate(self.flows):
            port = self.sender_port(n)
            out.append({"src": f.src, "dst": f.dst, "ports": (port, BACKGROUND_PORT + n) if port else None,
                        "received": [(l["t"], l["bytes"]) for l in self.lines(n, "recv") if "bytes" in l]})
        return out

    def periods(self, n: int) -> List[Tuple[float, float]]:
        """Wall-clock (start, end) in which flow n sent: its on periods, within its sender's life."""
        sent = self.lines(n, "send")
        if not sent or self.t0 is None:
            return []
        first, last = sent[0]["t"], sent[-1]["t"]
        f = self.flows[n]
        if f.kind != ONOFF:
            return [(first, last)]
        spans = [(self.t0 + a * self.dilation, self.t0 + b * self.dilation)
                 for a, b in schedule(f, n, self.seed, self.horizon_s)]
        return [(max(a, first), min(b, last)) for a, b in spans if min(b, last) > max(a, first)]

    def series(self) -> List[Tuple[float, str, float]]:
        """(emulated seconds since the flows started, flow, Mbit/s received in that bin), one row per BIN_S."""
        out = []
        step = BIN_S * self.dilation
        for n, f in enumerate(self.flows):
            counts = [(l["t"], l["bytes"]) for l in self.lines(n, "recv") if "bytes" in l]
            if not counts or self.t0 is None:
                continue
            edge, i, before = self.t0 + step, 0, 0
            while edge - step < counts[-1][0]:
                while i + 1 < len(counts) and counts[i + 1][0] <= edge:
                    i += 1
                at = counts[i][1] if counts[i][0] <= edge else before
                out.append(((edge - step - self.t0) / self.dilation, f.name, (at - before) * 8 / step / 1e6 *
                            self.dilation))
                before, edge = at, edge + step
        return out

    def report(self, window: Optional[Tuple[float, float]]) -> List[Dict[str, object]]:
        """Per flow: as given, its path's ends, source port, bytes received, its mean rate over the measured
        window (the iterations past warm-up) and while it sent."""
        out = []
        for n, f in enumerate(self.flows):
            got = [l for l in self.lines(n, "recv") if "bytes" in l]
            spans = self.periods(n)
            sent_s = sum(b - a for a, b in spans)
            in_window = received_mbps(got, [window]) if window else None
            row = {"flow": f.name, "given": f.shown(), "kind": f.kind, "port": self.sender_port(n),
                   "nic_split_with_job": bool(self.shared_nics.get(f.src)),
                   "bytes": got[-1]["bytes"] if got else 0,
                   "mbps_in_window": round(in_window * self.dilation, 3) if in_window is not None else None,
                   "on_share": round(sent_s / (spans[-1][1] - spans[0][0]), 4) if spans and f.kind == ONOFF
                   else (1.0 if spans else 0.0)}
            if f.kind == ONOFF and spans:
                on_bytes = received_mbps(got, spans)
                row["mbps_while_on"] = round(on_bytes * self.dilation, 3) if on_bytes is not None else None
            out.append(row)
        return out


def received_mbps(got: List[dict], spans: List[Tuple[float, float]]) -> Optional[float]:
    """Mean received Mbit/s (real time) inside the spans, from cumulative log lines."""
    moved = seconds = 0.0
    for a, b in spans:
        inside = [l for l in got if a <= l["t"] <= b]
        if len(inside) >= 2:
            moved += inside[-1]["bytes"] - inside[0]["bytes"]
            seconds += inside[-1]["t"] - inside[0]["t"]
    return moved * 8 / seconds / 1e6 if seconds else None


def write_series(out: str, rows: List[Tuple[float, str, float]]) -> None:
    """background.csv: time (emulated s since the flows started), flow, Mbit/s."""
    write_atomic_csv(os.path.join(out, RunFolder.BACKGROUND), ["t_s", "flow", "mbps"],
                     ([f"{t:.3f}", name, f"{m:.3f}"] for t, name, m in rows))
