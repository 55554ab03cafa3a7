"""The kernel's own counters of this process's network namespace: TCP retransmissions and timeouts
(/proc/net/snmp, /proc/net/netstat) and qdisc drops (tc -s qdisc). In an emulated host they describe that
host alone; on loopback every rank shares the machine's namespace, so runs there do not collect them."""

from __future__ import annotations

import json
import subprocess
from typing import Dict, Iterable

TCP_KEYS = {("Tcp", "RetransSegs"): "retrans_segs", ("Tcp", "OutSegs"): "out_segs",
            ("TcpExt", "TCPTimeouts"): "rto_timeouts", ("TcpExt", "TCPLossProbes"): "loss_probes",
            ("TcpExt", "TCPFastRetrans"): "fast_retrans", ("TcpExt", "TCPSpuriousRTOs"): "spurious_rtos",
            ("TcpExt", "TCPSackRecovery"): "sack_recoveries",
            # the receiver reporting a duplicate (D-SACK): a retransmission that was not needed
            ("TcpExt", "TCPDSACKRecv"): "dsack_received", ("TcpExt", "TCPLossProbeRecovery"): "loss_probe_recoveries"}


def _proc_table(path: str) -> Dict[tuple, int]:
    """(group, name) -> value from a /proc/net/snmp-style file (header line, value line per group)."""
    out = {}
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for header, values in zip(lines[::2], lines[1::2]):
        group, _, names = header.partition(":")
        _, _, vals = values.partition(":")
        for name, value in zip(names.split(), vals.split()):
            try:
                out[(group, name)] = int(value)
            except ValueError:
                pass
    return out


def tcp_counters(proc: str = "/proc") -> Dict[str, int]:
    """The TCP counters that tell a stall from a slow link, of this namespace (or of the namespace of the process
    whose /proc/PID folder is given)."""
    table = {**_proc_table(f"{proc}/net/snmp"), **_proc_table(f"{proc}/net/netstat")}
    return {name: table.get(key, 0) for key, name in TCP_KEYS.items()}


def interface_bytes(names, proc: str = "/proc") -> Dict[str, Dict[str, int]]:
    """tx/rx byte counters (and tx frames) of interfaces of this namespace (or of a process's, by its /proc/PID
    folder), from net/dev, which is per namespace; names: which ones (None: all)."""
    out = {}
    try:
        with open(f"{proc}/net/dev") as f:
            lines = f.readlines()[2:]
    except OSError:
        return out
    for line in lines:
        name, _, rest = line.partition(":")
        name = name.strip()
        if names is None or name in names:
            fields = rest.split()
            out[name] = {"rx": int(fields[0]), "tx": int(fields[8]), "tx_frames": int(fields[9])}
    return out


def qdisc_counters(devices: Iterable[str]) -> Dict[str, Dict[str, int]]:
    """Per device: packets dropped and sent by its qdiscs (the HTB leaf is where a shaped link drops)."""
    out = {}
    for dev in devices:
        try:
            r = subprocess.run(["tc", "-s", "-j", "qdisc", "show", "dev", dev], capture_output=True, text=True,
                               timeout=5)
            qdiscs = json.loads(r.stdout or "[]")
        except (OSError, ValueError, subprocess.TimeoutExpired):
            continue
        leaves = [q for q in qdiscs if q.get("kind") != "htb"] or qdiscs
        out[dev] = {"drops": sum(q.get("drops", 0) for q in leaves),
                    "overlimits": sum(q.get("overlimits", 0) for q in qdiscs if q.get("kind") == "htb"),
                    "packets": sum(q.get("packets", 0) for q in leaves)}
    return out


def delta(after: Dict, before: Dict) -> Dict:
    """after - before, key by key (nested one level for per-device counters)."""
    out = {}
    for key, value in after.items():
        if isinstance(value, dict):
            out[key] = delta(value, before.get(key, {}))
        else:
            out[key] = value - before.get(key, 0)
    return out
