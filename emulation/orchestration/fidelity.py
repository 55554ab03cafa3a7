"""How faithful a run's emulation was: CPU load while it ran, links' achieved rate while they had data to send,
the kernel's TCP and queue counters, step skew, and the measured/theory GST decomposed into its causes."""

from __future__ import annotations

import statistics
import threading
import time
from typing import Dict, List, Optional, Sequence, Tuple

from emulation.spec.topology import Topology

WARMUP = 2
FAITHFUL_EMULATION_SHARE = 0.10   # link time lost to the emulator, as a share of theory
DEGRADED_EMULATION_SHARE = 0.35
FAITHFUL_LEVEL = 0.85             # achieved / shaped while a link has data to send
DEGRADED_LEVEL = 0.70
CPU_SATURATED = 0.95              # busy share of all cores in a sample
CPU_SATURATED_SAMPLES = 0.5       # share of saturated samples that makes CPU the cause


class CpuSampler:
    """Samples the machine's CPU busy share from /proc/stat in a background thread."""

    def __init__(self, period: float = 0.5):
        self.period, self.samples = period, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def _read() -> Tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return sum(fields[:8]), idle

    def _loop(self) -> None:
        total0, idle0 = self._read()
        while not self._stop.wait(self.period):
            total, idle = self._read()
            if total > total0:
                self.samples.append(1.0 - (idle - idle0) / (total - total0))
            total0, idle0 = total, idle

    def __enter__(self) -> "CpuSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)

    def report(self) -> Dict[str, object]:
        """Mean busy share and the share of samples in which the CPU was saturated."""
        s = self.samples
        return {"samples": len(s), "busy_mean": round(statistics.mean(s), 4) if s else None,
                "saturated_share": round(sum(v >= CPU_SATURATED for v in s) / len(s), 4) if s else None}


def union_length(intervals: List[Tuple[float, float]]) -> float:
    """Total length covered by intervals."""
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def interface_of(topo: Topology, rank: int, level: int) -> str:
    """The name of a host's interface on a link level."""
    return topo.hosts[rank].interface(level).name


def iteration_links(topo: Topology, rows: Dict[int, List[dict]], traces: List[dict], i: int,
                    bw: Sequence[float]) -> List[dict]:
    """Per (rank, level) that sent in iteration i: payload and wire bytes, busy time, rate. A transfer occupies
    its sender's link from its first byte sent to its last byte received (the sender's own end only says when
    the data entered its socket buffer)."""
    arrived = {(t["rank"], t["peer"], t["stream"], t["step"], t.get("phase")): t["end"] for t in traces
               if t["iteration"] == i and t["dir"] == "recv" and t["end"] is not None}
    sends: Dict[Tuple[int, int], List[Tuple[float, float, int]]] = {}
    for t in traces:
        if t["iteration"] == i and t["dir"] == "send" and t["start"] is not None:
            end = arrived.get((t["peer"], t["rank"], t["stream"], t["step"], t.get("phase")), t["end"])
            sends.setdefault((t["rank"], t["level"]), []).append((t["start"], max(end, t["end"]), t["wire_bytes"]))
    out = []
    for (rank, level), ts in sends.items():
        rate = bw[level] * 1e6 / 8
        row = rows[rank][i] if i < len(rows.get(rank, [])) else {}
        wire = row.get("tx_bytes", {}).get(interface_of(topo, rank, level), 0)
        payload = sum(n for _, _, n in ts)
        intervals = [(a, b) for a, b, _ in ts]
        out.append({"rank": rank, "level": level, "payload": payload, "wire": max(wire, payload),
                    "busy_s": union_length(intervals), "intervals": intervals, "rate": rate})
    return out


def step_skew(traces: List[dict], i: int) -> List[float]:
    """For each (stream, step) of iteration i: the spread of the ranks' first transfer start."""
    starts: Dict[Tuple[int, int], Dict[int, float]] = {}
    for t in traces:
        if t["iteration"] == i and t["start"] is not None:
            per = starts.setdefault((t["stream"], t["step"]), {})
            per[t["rank"]] = min(per.get(t["rank"], t["start"]), t["start"])
    return [max(v.values()) - min(v.values()) for v in starts.values() if len(v) > 1]


def clipped_union(intervals: List[Tuple[float, float]], lo: float, hi: float) -> float:
    """Length of the union of intervals inside [lo, hi]."""
    return union_length([(max(a, lo), min(b, hi)) for a, b in intervals if min(b, hi) > max(a, lo)])


def decompose(iteration: dict, links: List[dict], theory_s: float) -> Optional[Dict[str, float]]:
    """Measured GST = theory + plan + headers + below rate + idle - early, on the bottleneck link of the
    iteration (the one that must transmit longest): plan = its payload time beyond theory; headers = its
    wire bytes beyond payload at the shaped rate (headers, ACKs, retransmissions); below rate = busy time beyond
    wire time (sending slower than shaped); idle = the part of the GST window (last rank's start to last
    rank's end) in which the link had nothing to send; early = its busy time before that window opened
    (ranks that start early get work done while a straggler still computes)."""
    if not links:
        return None
    b = max(links, key=lambda l: l["wire"] / l["rate"])
    lo, hi = iteration["sync_start"], iteration["sync_end"]
    busy_in = clipped_union(b["intervals"], lo, hi)
    early = clipped_union(b["intervals"], float("-inf"), lo)
    transfer = b["payload"] / b["rate"]
    headers = (b["wire"] - b["payload"]) / b["rate"]
    below = busy_in + early - b["wire"] / b["rate"]
    measured = iteration["gst_s"]
    return {"theory_s": theory_s, "measured_s": measured, "plan_s": transfer - theory_s, "headers_s": headers,
            "below_rate_s": below, "idle_s": measured - busy_in, "early_s": early,
            "bottleneck": f"rank {b['rank']} L{b['level']}"}


def median_of(dicts: List[Dict[str, float]], key: str) -> Optional[float]:
    """Median of one key over dicts."""
    values = [d[key] for d in dicts if d.get(key) is not None]
    return statistics.median(values) if values else None


def host_counters(topo: Optional[Topology], rows: Dict[int, List[dict]], finals: Dict[int, dict]) -> Dict[str, dict]:
    """Per host: TCP retransmissions and timeouts over the run, drops in its own queues."""
    out = {}
    for r, rank_rows in sorted(rows.items()):
        name = topo.hosts[r].name if topo is not None else f"rank{r}"
        tcp: Dict[str, int] = {}
        for row in rank_rows:
            for k, v in (row.get("tcp") or {}).items():
                tcp[k] = tcp.get(k, 0) + v
        qdisc = (finals.get(r, {}).get("net") or {}).get("qdisc", {})
        out[name] = {"retrans_segs": tcp.get("retrans_segs", 0), "rto_timeouts": tcp.get("rto_timeouts", 0),
                     "loss_probes": tcp.get("loss_probes", 0), "out_segs": tcp.get("out_segs", 0),
                     "qdisc_drops": sum(q.get("drops", 0) for q in qdisc.values())}
    return out


def report(topo: Optional[Topology], bw: Sequence[float], theory_s: float, iterations: List[dict],
           rows: Dict[int, List[dict]], traces: List[dict], finals: Dict[int, dict], cpu: Dict[str, object],
           emulated: bool, switch_port_drops: Optional[Dict[str, int]] = None) -> Dict[str, object]:
    """The fidelity section of summary.json, with a verdict and its dominant cause."""
    kept = [it for it in iterations[WARMUP:]] or iterations
    gsts = [it["gst_s"] for it in kept]
    out: Dict[str, object] = {
        "gst_ratio": statistics.median(gsts) / theory_s if gsts and theory_s else None,
        "gst_cv": (statistics.pstdev(gsts) / statistics.mean(gsts)) if len(gsts) > 1 and statistics.mean(gsts) else None,
        "cpu": cpu,
        "compute_over_budget": sum(it.get("compute_over_budget", 0) for it in iterations)}
    if not emulated or topo is None:
        out.update(verdict="not measured", cause="loopback run: no emulated network")
        return out
    parts, level_bytes, level_busy = [], {}, {}
    skews = []
    for it in kept:
        links = iteration_links(topo, rows, traces, it["iteration"], bw)
        for l in links:
            level_bytes[l["level"]] = level_bytes.get(l["level"], 0) + l["wire"]
            level_busy[l["level"]] = level_busy.get(l["level"], 0) + l["busy_s"]
        d = decompose(it, links, theory_s)
        if d:
            parts.append(d)
        skews += step_skew(traces, it["iteration"])
    levels = {}
    for level in sorted(level_bytes):
        achieved = level_bytes[level] * 8 / level_busy[level] / 1e6 if level_busy[level] else None
        levels[f"L{level}"] = {"shaped_mbps": bw[level], "achieved_mbps": round(achieved, 3) if achieved else None,
                               "fidelity": round(achieved / bw[level], 4) if achieved else None}
    out["levels"] = levels
    out["step_skew_s"] = {"median": statistics.median(skews) if skews else None, "max": max(skews) if skews else None}
    if parts:
        out["decomposition_median_s"] = {k: median_of(parts, k) for k in
                                         ("theory_s", "measured_s", "plan_s", "headers_s", "below_rate_s", "idle_s",
                                          "early_s")}
        out["decomposition_median_s"]["bottleneck"] = statistics.mode(p["bottleneck"] for p in parts)
    hosts = host_counters(topo, rows, finals)
    out["hosts"] = hosts
    out["tcp_totals"] = {k: sum(h[k] for h in hosts.values()) for k in
                         ("retrans_segs", "rto_timeouts", "loss_probes", "qdisc_drops")}
    out["switch_port_drops"] = switch_port_drops or {}
    out.update(verdict_and_cause(out, len(kept), theory_s))
    return out


def verdict_and_cause(fid: Dict[str, object], iterations: int, theory_s: float) -> Dict[str, object]:
    """faithful / degraded / not faithful, and the dominant cause of what the emulator added."""
    d = fid.get("decomposition_median_s") or {}
    cpu = fid.get("cpu") or {}
    cpu_saturated = (cpu.get("saturated_share") or 0) >= CPU_SATURATED_SAMPLES
    level_min = min((l["fidelity"] for l in fid.get("levels", {}).values() if l["fidelity"]), default=None)
    totals = fid.get("tcp_totals", {})
    emulator_s = max(0.0, d.get("below_rate_s") or 0) + max(0.0, (d.get("idle_s") or 0) - (d.get("early_s") or 0))
    share = emulator_s / theory_s if theory_s and d else None
    causes = []
    if cpu_saturated:
        causes.append((3.0, f"CPU saturation: all cores busy in {cpu['saturated_share']:.0%} of samples"))
    if level_min is not None and level_min < FAITHFUL_LEVEL:
        causes.append((2.0 + (FAITHFUL_LEVEL - level_min),
                       f"links reach only {level_min:.2f} of the shaped rate while sending"))
    if d:
        if (d.get("below_rate_s") or 0) > 0.02 * theory_s:
            causes.append((d["below_rate_s"] / theory_s, "links busy below the shaped rate (TCP or switching)"))
        idle = d.get("idle_s") or 0
        if idle > 0.02 * theory_s:
            if totals.get("rto_timeouts"):
                why = f"links idle during synchronization; {totals['rto_timeouts']} TCP retransmission timeouts"
            elif (fid.get("step_skew_s") or {}).get("median"):
                why = f"links idle during synchronization (ranks start steps up to " \
                      f"{fid['step_skew_s']['median'] * 1000:.0f} ms apart, median)"
            else:
                why = "links idle during synchronization"
            causes.append((idle / theory_s, why))
    if totals.get("qdisc_drops"):
        causes.append((0.01, f"{totals['qdisc_drops']} packets dropped in host queues"))
    if fid.get("compute_over_budget"):
        causes.append((0.01 * fid["compute_over_budget"], f"real compute exceeded --compute-time in "
                                                          f"{fid['compute_over_budget']} rank-iterations"))
    if cpu_saturated or (level_min is not None and level_min < DEGRADED_LEVEL) or \
            (share is not None and share > DEGRADED_EMULATION_SHARE):
        verdict = "not faithful"
    elif (level_min is not None and level_min < FAITHFUL_LEVEL) or (share is not None and share > FAITHFUL_EMULATION_SHARE) \
            or totals.get("qdisc_drops") or fid.get("compute_over_budget"):
        verdict = "degraded"
    else:
        verdict = "faithful"
    cause = max(causes)[1] if causes and verdict != "faithful" else None
    return {"verdict": verdict, "cause": cause, "emulator_share": round(share, 4) if share is not None else None}


def one_line(fid: Dict[str, object]) -> str:
    """The line printed after every run."""
    parts = [f"fidelity: {fid.get('verdict')}"]
    if fid.get("gst_ratio") is not None:
        parts.append(f"GST/theory {fid['gst_ratio']:.2f}")
    if fid.get("gst_cv") is not None:
        parts.append(f"CV {fid['gst_cv']:.2f}")
    levels = fid.get("levels") or {}
    if levels:
        parts.append("links " + " ".join(f"{k} {v['fidelity']:.2f}" for k, v in levels.items() if v["fidelity"]))
    cpu = fid.get("cpu") or {}
    if cpu.get("busy_mean") is not None:
        parts.append(f"CPU {cpu['busy_mean']:.0%}")
    if fid.get("cause"):
        parts.append(f"cause: {fid['cause']}")
    return ", ".join(parts)
