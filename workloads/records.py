"""One record per rank and iteration, the same fields for every algorithm, written as JSON lines."""

from __future__ import annotations

import json
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Deque, Dict, List, Optional, Sequence

from workloads.netstats import delta, interface_bytes, tcp_counters


@dataclass
class IterationRecord:
    """What one rank did in one iteration (wall-clock times are seconds since the epoch; hosts share a clock).

    compute_s: forward+backward as the run counts it (the emulated device time with --compute-time);
    compute_real_s / compute_cpu_s: the real forward+backward wall and CPU time of the compute thread;
    sync_start / sync_end: this rank's gradient synchronization;
    payload: phase -> [fp32 bytes, bytes actually sent] (codecs and filters make them differ);
    split: strategy-specific per-rank quantities (seconds or fractions; reports average them over workers);
    marks: named [start, end] timestamps (reports take the global span over ranks);
    tx_bytes / rx_bytes: bytes per interface of this rank's namespace since its previous record (tx_frames: the
    frames sent, each with its headers, so that the bytes less the headers are the payload on the wire);
    tcp: the namespace's TCP counters (retransmissions, timeouts, ...) since its previous record;
    transfers: the engine's transfers of this iteration (one per step, peer and direction), for traces.
    """

    rank: int
    iteration: int
    role: str
    start: float = 0.0
    end: float = 0.0
    compute_s: float = 0.0
    compute_real_s: float = 0.0
    compute_cpu_s: float = 0.0
    compute_over_budget: bool = False
    sync_start: float = 0.0
    sync_end: float = 0.0
    loss: Optional[float] = None
    accuracy: Optional[float] = None  # held-out accuracy after this iteration (--eval-every), on one rank
    payload: Dict[str, List[int]] = field(default_factory=dict)
    split: Dict[str, float] = field(default_factory=dict)
    marks: Dict[str, List[float]] = field(default_factory=dict)
    tx_bytes: Dict[str, int] = field(default_factory=dict)
    tx_frames: Dict[str, int] = field(default_factory=dict)
    rx_bytes: Dict[str, int] = field(default_factory=dict)
    tcp: Dict[str, int] = field(default_factory=dict)
    transfers: List[dict] = field(default_factory=list, repr=False)  # written to the trace file
    pending: bool = field(default=False, repr=False)  # completed later (asynchronous strategies)

    @property
    def gst_s(self) -> float:
        """This rank's synchronization time."""
        return self.sync_end - self.sync_start

    def add_payload(self, phase: str, fp32_bytes: int, sent_bytes: int) -> None:
        """Count payload bytes of one phase."""
        acc = self.payload.setdefault(phase, [0, 0])
        acc[0] += int(fp32_bytes)
        acc[1] += int(sent_bytes)

    def to_dict(self) -> dict:
        """The JSON line (derived gst_s and iteration_s included for readers)."""
        out = asdict(self)
        out.pop("pending")
        out.pop("transfers")
        out.update(gst_s=self.gst_s, iteration_s=self.end - self.start)
        return out


class Recorder:
    """Writes records in iteration order as they complete, with the interface bytes and TCP counters since the
    last one, and each record's transfers to the rank's transfers file."""

    def __init__(self, records_path: str, transfers_path: str, interfaces: Sequence[str]):
        self.interfaces = list(interfaces)
        self.file = open(records_path, "a", buffering=1)
        self.transfers_file = open(transfers_path, "a")
        self.counters = interface_bytes(self.interfaces) if self.interfaces else {}
        self.tcp = tcp_counters() if self.interfaces else {}
        self.waiting: Deque[IterationRecord] = deque()

    def add(self, rec: IterationRecord) -> None:
        """Queue a record; write every leading record that is complete."""
        self.waiting.append(rec)
        self.flush()

    def flush(self) -> None:
        """Write the complete records at the head of the queue."""
        while self.waiting and not self.waiting[0].pending:
            rec = self.waiting.popleft()
            now = interface_bytes(self.interfaces) if self.interfaces else {}
            rec.tx_bytes = {k: now[k]["tx"] - self.counters.get(k, now[k])["tx"] for k in now}
            rec.rx_bytes = {k: now[k]["rx"] - self.counters.get(k, now[k])["rx"] for k in now}
            rec.tx_frames = {k: now[k]["tx_frames"] - self.counters.get(k, now[k])["tx_frames"] for k in now}
            self.counters = now
            if self.interfaces:  # in an emulated host: this host's own TCP
                tcp = tcp_counters()
                rec.tcp = delta(tcp, self.tcp)
                self.tcp = tcp
            for t in rec.transfers:
                self.transfers_file.write(json.dumps(dict(t, rank=rec.rank, iteration=rec.iteration)) + "\n")
            self.transfers_file.flush()
            self.file.write(json.dumps(rec.to_dict()) + "\n")

    def close(self) -> None:
        """Write what is complete and close the file."""
        self.flush()
        self.file.close()
        self.transfers_file.close()
