"""Data-plane probes of a run's failed links: for each link an event takes down, one small UDP stream across it in
each direction (its ends and ports chosen so the controller's rules send it over that link), started before the ranks
and stopped after them (workloads/probe.py); each event's outage is the gap in a stream's arrivals around it."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

from controllers.flow_rules import IP_PROTO_UDP, compute_rules
from controllers.paths import follow_packet
from emulation.core.addressing import all_host_configs
from emulation.core.events import DOWN, LinkEvent
from emulation.core.link_rates import link_name
from emulation.core.topology import Topology
from emulation.results.files import read_json

FOLDER = "probes"
PROBE_PORT = 9300       # + stream number
SOURCE_PORTS = range(41000, 41128, 2)
INTERVAL_S = 0.002      # one 44-byte datagram every 2 ms: 0.3 Mbit/s with headers
Stream = Tuple[str, str, str, int]  # (direction a>b, source host, destination host, source port)


def probe_streams(topo: Topology, link: Tuple[str, str]) -> List[Stream]:
    """A (source, destination, source port) whose datagrams cross the link, for each direction the rules use it
    in (none where no host pair's path crosses it that way)."""
    rules, configs = compute_rules(topo), all_host_configs(topo)
    out = []
    for a, b in (link, link[::-1]):
        found = None
        for src in topo.hosts:
            for dst in topo.hosts:
                if src is dst or found:
                    continue
                for sport in SOURCE_PORTS:
                    paths = follow_packet(topo, rules, configs, src.name, dst.ip, (sport, PROBE_PORT),
                                          proto=IP_PROTO_UDP).paths
                    if len(paths) == 1 and (a, b) in zip(paths[0], paths[0][1:]):
                        found = (f"{a}>{b}", src.name, dst.name, sport)
                        break
        if found:
            out.append(found)
    return out


class LinkProbes:
    """One probe stream per direction of every link a run's events take down."""

    def __init__(self, topo: Topology, events: Sequence[LinkEvent], out: str):
        self.topo = topo
        self.links = sorted({e.link for e in events if e.state == DOWN})
        self.folder = os.path.join(out, FOLDER)
        self.streams: Dict[Tuple[str, str], List[Stream]] = {}
        self.procs: List[subprocess.Popen] = []

    def path(self, n: int) -> str:
        """Stream n's receiver log."""
        return os.path.join(self.folder, f"probe-{n}.json")

    def all_streams(self) -> List[Tuple[Tuple[str, str], Stream]]:
        """(link, stream) in stream order."""
        return [(link, s) for link in self.links for s in self.streams.get(link, [])]

    def start(self, hosts, address_of) -> None:
        """Start each stream's receiver, then its sender."""
        if not self.links:
            return
        os.makedirs(self.folder, exist_ok=True)
        for link in self.links:
            self.streams[link] = probe_streams(self.topo, link)
        for n, (_, (_, src, dst, sport)) in enumerate(self.all_streams()):
            if os.path.exists(self.path(n)):
                os.remove(self.path(n))
            self.procs.append(hosts.popen(dst, [sys.executable, "-m", "workloads.probe", "recv", "--port",
                                                str(PROBE_PORT + n), "--interval", repr(INTERVAL_S), "--log",
                                                self.path(n)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for n, (_, (_, src, dst, sport)) in enumerate(self.all_streams()):
            self.procs.append(hosts.popen(src, [sys.executable, "-m", "workloads.probe", "send", "--dst",
                                                address_of(dst), "--port", str(PROBE_PORT + n), "--sport", str(sport),
                                                "--interval", repr(INTERVAL_S)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    def stop(self, hosts) -> None:
        """Stop the senders, then the receivers (they write their logs on SIGTERM)."""
        for proc in self.procs:
            hosts.stop_process(proc)
        self.procs = []

    def outage(self, link: Tuple[str, str], at: float, until: Optional[float] = None) -> Dict[str, object]:
        """The data-plane outage of a link going down at wall time `at`: per direction the gap in the probe's
        stream that spans it, in send time (from the last datagram delivered before to the first after, less one
        interval: the span whose datagrams the network lost), its arrival gap beside it (which adds the receiver's
        scheduling) and the datagrams lost; until: the link's next event (a gap must begin before it)."""
        rows = []
        for n, (which, stream) in enumerate(self.all_streams()):
            if which != link:
                continue
            direction, src, dst, sport = stream
            row = {"direction": direction, "from": src, "to": dst, "source_port": sport}
            log = read_json(self.path(n))
            if log is None:
                rows.append(dict(row, error="the probe's receiver wrote no log"))
                continue
            gaps = [g for g in log["gaps"] if g["to"] >= at and (until is None or g["from"] < until)
                    and g["from"] <= at + 1.0]
            gap = max(gaps, key=sent_span, default=None)
            row.update(received=log["received"], outage_s=beyond_interval(sent_span(gap)) if gap else 0.0,
                       arrival_gap_s=beyond_interval(arrival_span(gap)) if gap else 0.0,
                       lost=gap["lost"] if gap else 0, resolution_s=INTERVAL_S * 5)
            if log["last"] is None or log["last"] < at:
                row["note"] = "no datagram arrived after the link went down"
                row["outage_s"] = None
            rows.append(row)
        measured = [r["outage_s"] for r in rows if r.get("outage_s") is not None]
        return {"link": link_name(link), "streams": rows,
                "outage_s": max(measured) if len(measured) == len(rows) and rows else None,
                "arrival_gap_s": max((r.get("arrival_gap_s") or 0.0 for r in rows), default=None)}


def arrival_span(gap: dict) -> float:
    """A gap's span in arrival time."""
    return gap["to"] - gap["from"]


def sent_span(gap: dict) -> float:
    """A gap's span in send time (in arrival time for a log written before datagrams carried their send time)."""
    return gap["sent_to"] - gap["sent_from"] if gap.get("sent_from") is not None else arrival_span(gap)


def beyond_interval(span: float) -> float:
    """A gap's span less the one interval any two datagrams are apart, in seconds (4 decimals)."""
    return round(max(0.0, span - INTERVAL_S), 4)
