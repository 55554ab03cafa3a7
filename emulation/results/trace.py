"""A run's timeline: trace.json in Chrome's trace event format (Perfetto, chrome://tracing) and a PNG of it,
built from what the workers recorded (per-iteration rows and per-transfer traces)."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Dict, List, Optional

import numpy as np

from emulation.results.files import write_atomic
from workloads.runfolder import RankRecords, RunFolder

TRACK_ITERATION, TRACK_COMPUTE, TRACK_SYNC = 0, 1, 2
LINKS_PID = 100000  # the process that holds the link counters (ranks are pids 0..N-1)


def _us(t: float, origin: float) -> float:
    return round((t - origin) * 1e6, 1)


def transfer_track(stream: int, direction: str) -> int:
    """Thread id of one stream's sends or receives on a rank's track."""
    return 10 + 2 * stream + (direction == "recv")


@dataclass
class Sides:
    """Transfers' sides as columns (one entry per send or receive): what the timeline draws of each."""

    rank: np.ndarray
    peer: np.ndarray
    send: np.ndarray  # bool: the send side (else the receive side)
    stream: np.ndarray
    step: np.ndarray  # objects: as recorded
    level: np.ndarray  # objects: as recorded
    bytes: np.ndarray  # as recorded
    wire_bytes: list  # None where not known
    phase: list
    iteration: np.ndarray  # objects: as recorded
    start: np.ndarray  # NaN where not recorded
    end: np.ndarray

    @classmethod
    def of(cls, traces: List[dict]) -> "Sides":
        """The sides of a run's per-transfer records."""
        def column(key, dtype=object):
            return np.array([np.nan if t.get(key) is None and dtype is float else t.get(key) for t in traces],
                            dtype=dtype)
        return cls(column("rank", np.int64), column("peer", np.int64),
                   np.array([t["dir"] == "send" for t in traces], dtype=bool), column("stream", np.int64),
                   column("step"), column("level"), column("bytes"), [t.get("wire_bytes") for t in traces],
                   [t.get("phase") for t in traces], column("iteration"), column("start", float),
                   column("end", float))


def only(sides: Sides, at: np.ndarray) -> Sides:
    """These sides (by position) alone."""
    def pick(column):
        return column[at] if isinstance(column, np.ndarray) else [column[n] for n in at.tolist()]
    return Sides(**{f.name: pick(getattr(sides, f.name)) for f in fields(Sides)})


def transfer_events(sides: Sides, origin: float) -> List[dict]:
    """Per rank and stream, a track of its sends and one of its receives; on it every transfer side (peer, level,
    bytes), built a column at a time (a simulation's timeline holds up to 400,000 sides)."""
    timed = np.isfinite(sides.start) & np.isfinite(sides.end)
    if not timed.all():
        sides = only(sides, np.flatnonzero(timed))
    tid = transfer_track(sides.stream, np.where(sides.send, "send", "recv"))
    events: List[dict] = []
    tracks, first = np.unique(np.stack([sides.rank, tid]), axis=1, return_index=True) if len(tid) else \
        (np.zeros((2, 0), dtype=np.int64), np.zeros(0, dtype=np.int64))
    for (rank, track), at in zip(tracks.T.tolist(), first.tolist()):
        events.append({"ph": "M", "pid": rank, "tid": track, "name": "thread_name",
                       "args": {"name": f"stream {int(sides.stream[at])} {'send' if sides.send[at] else 'recv'}"}})
    ts = np.round((sides.start - origin) * 1e6, 1).tolist()
    dur = np.round((sides.end - sides.start) * 1e6, 1).tolist()
    arrow = np.where(sides.send, "->", "<-").tolist()
    events += [{"ph": "X", "pid": rank, "tid": track, "name": f"step {step} {a} {peer}", "ts": t, "dur": d,
                "args": {"iteration": i, "peer": peer, "level": level, "bytes": b, "wire_bytes": w, "phase": ph,
                         "stream": stream, "step": step}}
               for rank, track, step, a, peer, t, d, i, level, b, w, ph, stream in
               zip(sides.rank.tolist(), tid.tolist(), sides.step.tolist(), arrow, sides.peer.tolist(), ts, dur,
                   sides.iteration.tolist(), sides.level.tolist(), sides.bytes.tolist(), sides.wire_bytes,
                   sides.phase, sides.stream.tolist())]
    return events


def chrome_trace(rows: Dict[int, List[dict]], traces, hosts: List[str], dilation: float = 1.0,
                 shaped_mbps: Optional[List[float]] = None) -> dict:
    """Trace events: per rank, iterations, compute, synchronization and every transfer (peer, level, bytes);
    per link level a counter of the rate all ranks sent at during each synchronization. traces: the ranks'
    per-transfer records, or their Sides."""
    sides = traces if isinstance(traces, Sides) else Sides.of(traces)
    begun = sides.start[(sides.start != 0) & ~np.isnan(sides.start)]
    starts = [r["start"] for rs in rows.values() for r in rs] + ([float(begun.min())] if len(begun) else [])
    origin = min(starts) if starts else 0.0
    events: List[dict] = []
    names = {TRACK_ITERATION: "iterations", TRACK_COMPUTE: "compute", TRACK_SYNC: "synchronization"}
    for rank in sorted(set(rows) | set(sides.rank.tolist())):
        host = hosts[rank] if rank < len(hosts) else f"rank {rank}"
        events.append({"ph": "M", "pid": rank, "name": "process_name", "args": {"name": f"rank {rank} ({host})"}})
        events.append({"ph": "M", "pid": rank, "name": "process_sort_index", "args": {"sort_index": rank}})
        for tid, name in names.items():
            events.append({"ph": "M", "pid": rank, "tid": tid, "name": "thread_name", "args": {"name": name}})
        for r in rows.get(rank, []):
            i = r["iteration"]
            events.append({"ph": "X", "pid": rank, "tid": TRACK_ITERATION, "name": f"iteration {i}",
                           "ts": _us(r["start"], origin), "dur": _us(r["end"], r["start"]),
                           "args": {"iteration": i, "gst_s": r.get("gst_s"), "loss": r.get("loss")}})
            if r.get("compute_s") is not None:
                begun = (r.get("marks") or {}).get("hold", [None, r["start"]])[1]  # after a held offset's wait
                events.append({"ph": "X", "pid": rank, "tid": TRACK_COMPUTE, "name": "compute",
                               "ts": _us(begun, origin), "dur": round(r["compute_s"] * 1e6, 1),
                               "args": {"iteration": i, "cpu_s": r.get("compute_cpu_s")}})
            if r.get("sync_start") is not None and r.get("sync_end") is not None:
                events.append({"ph": "X", "pid": rank, "tid": TRACK_SYNC, "name": "sync",
                               "ts": _us(r["sync_start"], origin), "dur": _us(r["sync_end"], r["sync_start"]),
                               "args": {"iteration": i}})
    events += transfer_events(sides, origin)
    events += level_counters(rows, sides, origin, shaped_mbps)
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"clock": "wall time of the emulated hosts (one clock)", "dilation": dilation,
                          "note": "times are real; with dilation F, divide by F for the emulated time"
                          if dilation != 1 else "times are as measured"}}


def level_counters(rows: Dict[int, List[dict]], sides: Sides, origin: float,
                   shaped_mbps: Optional[List[float]]) -> List[dict]:
    """Per link level: the rate (Mbit/s, all ranks' sends) during each iteration's synchronization window."""
    windows: Dict[int, List[float]] = {}
    for rs in rows.values():
        for r in rs:
            if r.get("sync_start") is not None and r.get("sync_end") is not None:
                w = windows.setdefault(r["iteration"], [r["sync_start"], r["sync_end"]])
                w[0], w[1] = min(w[0], r["sync_start"]), max(w[1], r["sync_end"])
    sent: Dict[tuple, float] = {}
    wire = [w or b for w, b in zip(sides.wire_bytes, sides.bytes.tolist())]
    for i, level, w, send in zip(sides.iteration.tolist(), sides.level.tolist(), wire, sides.send.tolist()):
        if send:
            sent[(i, level)] = sent.get((i, level), 0.0) + w
    levels = sorted({level for _, level in sent})
    if not levels:
        return []
    events = [{"ph": "M", "pid": LINKS_PID, "name": "process_name", "args": {"name": "links (all ranks' sends)"}}]
    for i, (lo, hi) in sorted(windows.items()):
        span = max(hi - lo, 1e-9)
        rates = {f"L{level}": round(sent.get((i, level), 0.0) * 8 / span / 1e6, 3) for level in levels}
        events.append({"ph": "C", "pid": LINKS_PID, "name": "Mbit/s by level", "ts": _us(lo, origin), "args": rates})
        events.append({"ph": "C", "pid": LINKS_PID, "name": "Mbit/s by level", "ts": _us(hi, origin),
                       "args": {k: 0 for k in rates}})
    if shaped_mbps:
        events[0]["args"]["name"] += " -- shaped " + ", ".join(f"L{l} {b:g}" for l, b in enumerate(shaped_mbps))
    return events


def write_trace(out_dir: str, records: RankRecords, hosts: List[str], dilation: float = 1.0,
                shaped_mbps: Optional[List[float]] = None) -> str:
    """Write the run folder's trace.json from the ranks' records and transfers; returns its path."""
    trace = chrome_trace(records.rows, records.transfers, hosts, dilation, shaped_mbps)
    path = RunFolder(out_dir).file(RunFolder.TRACE)
    write_atomic(path, json.dumps(trace))
    return path


def plot_timeline(trace: dict, path: str, iterations: Optional[int] = None) -> str:
    """A PNG of the trace: per rank, compute and every send, one lane per link level."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shown = None if iterations is None else list(range(iterations))
    fig = timeline_figure(trace, plt, shown)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def timeline_figure(trace: dict, plt, iterations: Optional[List[int]] = None, max_ranks: Optional[int] = None):
    """The trace drawn per rank in lanes: compute (grey), then the sends on each link level in a lane of their own
    (a level's sends never hide another's); only the given iterations and the first max_ranks ranks when given."""
    x = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["tid"] != TRACK_ITERATION]
    if iterations is not None:
        x = [e for e in x if e["args"].get("iteration", 0) in set(iterations)]
    ranks = sorted({e["pid"] for e in x})[:max_ranks]
    x = [e for e in x if e["pid"] in set(ranks)]
    levels = sorted({e["args"]["level"] for e in x if e["tid"] >= 10})
    lanes = 1 + len(levels)
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(12, 1 + 0.22 * lanes * len(ranks) + 0.1 * len(ranks)))
    origin = min((e["ts"] for e in x), default=0.0)
    for row, rank in enumerate(ranks):
        top = row * (lanes + 0.5)
        mine = [e for e in x if e["pid"] == rank]
        ax.broken_barh([((e["ts"] - origin) / 1e6, e["dur"] / 1e6) for e in mine if e["tid"] == TRACK_COMPUTE],
                       (top, 0.8), color="0.6")
        for lane, level in enumerate(levels, 1):
            sends = [((e["ts"] - origin) / 1e6, e["dur"] / 1e6) for e in mine
                     if e["tid"] >= 10 and e["tid"] % 2 == 0 and e["args"]["level"] == level]
            ax.broken_barh(sends, (top + lane, 0.8), color=colours(level % 10), alpha=0.7)
    ax.set_yticks([r * (lanes + 0.5) + lanes / 2 for r in range(len(ranks))], [f"rank {r}" for r in ranks])
    ax.set_ylim(len(ranks) * (lanes + 0.5), -0.5)
    ax.set_xlabel("seconds since the first event drawn")
    handles = [plt.Rectangle((0, 0), 1, 1, color="0.6", label="compute (lane 1)")]
    handles += [plt.Rectangle((0, 0), 1, 1, color=colours(l % 10), alpha=0.7, label=f"sends on L{l} (lane {n})")
                for n, l in enumerate(levels, 2)]
    ax.legend(handles=handles, loc="upper right", fontsize="small")
    ax.set_title("timeline: per rank, compute and each link level's sends in lanes of their own", fontsize=10)
    return fig


def launch_trace(path: str, topo, started: float, ended: float, rates, level_of: Dict[str, int],
                 buckets: List[dict], transfers: List[dict], shaped_mbps: List[float]) -> str:
    """trace.json of a `dmlbed launch`: per rank the command's run and every DDP bucket's synchronization (when
    the script registered dmlbed's hook, with its transfers), and per link level the rate the hosts sent at,
    from their interface counters."""
    origin = started
    events: List[dict] = []
    for rank, host in enumerate(topo.hosts):
        events.append({"ph": "M", "pid": rank, "name": "process_name", "args": {"name": f"rank {rank} ({host.name})"}})
        events.append({"ph": "M", "pid": rank, "tid": TRACK_ITERATION, "name": "thread_name",
                       "args": {"name": "command"}})
        events.append({"ph": "X", "pid": rank, "tid": TRACK_ITERATION, "name": "command", "ts": 0.0,
                       "dur": _us(ended, started), "args": {}})
    for b in buckets:
        events.append({"ph": "X", "pid": b["rank"], "tid": TRACK_SYNC, "name": f"bucket {b['bucket']}",
                       "ts": _us(b["start"], origin), "dur": _us(b["end"], b["start"]),
                       "args": {"iteration": b["iteration"], "elements": b["elements"], "ready": _us(b["ready"], origin),
                                "sent_by_level": b.get("sent_by_level")}})
    for t in transfers:
        if t.get("start") is not None and t.get("end") is not None:
            events.append({"ph": "X", "pid": t["rank"], "tid": transfer_track(t["stream"], t["dir"]),
                           "name": f"step {t['step']} {'->' if t['dir'] == 'send' else '<-'} {t['peer']}",
                           "ts": _us(t["start"], origin), "dur": _us(t["end"], t["start"]),
                           "args": {"iteration": t.get("iteration"), "bucket": t.get("bucket"), "level": t["level"],
                                    "bytes": t["bytes"]}})
    name = "Mbit/s by level (interface counters) -- shaped " + ", ".join(f"L{l} {b:g}" for l, b in
                                                                      enumerate(shaped_mbps))
    events.append({"ph": "M", "pid": LINKS_PID, "name": "process_name", "args": {"name": name}})
    for lo, hi, sample in rates:
        by_level: Dict[str, float] = {}
        for intf, mbps in sample.items():
            if intf in level_of:
                key = f"L{level_of[intf]}"
                by_level[key] = by_level.get(key, 0.0) + mbps
        events.append({"ph": "C", "pid": LINKS_PID, "name": "Mbit/s sent by level", "ts": _us(lo, origin),
                       "args": {k: round(v, 3) for k, v in sorted(by_level.items())}})
    write_atomic(path, json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    return path
