"""A latency-bandwidth (alpha-beta) model of the emulated network per hierarchy level, fitted from probe
timings, saved as JSON and read back for theory, bench and simulate (pure: no Mininet)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Sequence, Tuple

import numpy as np

VERSION = 1


class CalibrationError(ValueError):
    """A calibration file is missing, malformed or measured on another network; the message says which."""


@dataclass(frozen=True)
class LevelFit:
    """t(m) = alpha_s + m / rate_Bps for one message of m bytes across one level."""

    level: int
    alpha_s: float
    rate_Bps: float
    points: Tuple[Tuple[int, float], ...] = ()  # (message bytes, median seconds)

    def time(self, message_bytes: float) -> float:
        """Predicted seconds for one message."""
        return self.alpha_s + message_bytes / self.rate_Bps

    @property
    def rate_mbps(self) -> float:
        """The fitted bandwidth in Mbit/s."""
        return self.rate_Bps * 8 / 1e6


LARGE_BYTES = 64 << 10  # messages from this size fix the rate; the smaller ones fix alpha


def fit(level: int, points: Sequence[Tuple[int, float]]) -> LevelFit:
    """The rate from the slope over the large messages, alpha from the small ones (t - m / rate). One straight
    line through every size fits neither end: a shaper lets a small message through at line rate (its token
    bucket's burst), so small messages look faster than the rate and would drag the fitted line off."""
    sizes = sorted({m for m, _ in points})
    if len(sizes) < 2:
        raise CalibrationError(f"level {level}: a fit needs at least two message sizes")
    large = [(m, t) for m, t in points if m >= LARGE_BYTES]
    if len({m for m, _ in large}) < 2:
        large = [(m, t) for m, t in points if m >= sizes[-2]]
    m = np.array([p[0] for p in large], dtype=float)
    t = np.array([p[1] for p in large], dtype=float)
    slope = float(np.polyfit(m, t, 1)[0])
    if slope <= 0:
        raise CalibrationError(f"level {level}: times do not grow with size ({sorted(points)}): the measurement is "
                               f"noise")
    small = [t - m / (1.0 / slope) for m, t in points if m < LARGE_BYTES] or [min(t for _, t in points)]
    alpha = max(0.0, float(np.median(small)))
    return LevelFit(level, alpha, 1.0 / slope, tuple((int(a), float(b)) for a, b in sorted(points)))


@dataclass(frozen=True)
class Calibration:
    """Per hierarchy level: the loaded fit (every host sending across the level at once: what a collective's
    step sees, used by the model) and the idle one (ping-pong between two hosts: the textbook alpha)."""

    topology: str
    bw_mbps: Tuple[float, ...]
    datapath: str
    loaded: Tuple[LevelFit, ...]
    idle: Tuple[LevelFit, ...]
    meta: Dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready form."""
        d = asdict(self)
        d["version"] = VERSION
        for kind in ("loaded", "idle"):
            for f, fitted in zip(d[kind], getattr(self, kind)):
                f["rate_mbps"] = fitted.rate_mbps
        return d

    def fit_of(self, level: int) -> LevelFit:
        """The loaded fit of a hierarchy level (the highest calibrated one for a level above them)."""
        by_level = {f.level: f for f in self.loaded}
        return by_level.get(level) or by_level[max(by_level)]

    def latency_by_level(self) -> Dict[int, float]:
        """Hierarchy level -> alpha seconds."""
        return {f.level: f.alpha_s for f in self.loaded}

    def link_model(self, levels: int) -> Tuple[Dict[int, float], Dict[int, float]]:
        """(payload bytes/s, alpha seconds) per link level 0..levels-1, as the flow model takes them."""
        fits = [self.fit_of(level) for level in range(levels)]
        return {i: f.rate_Bps for i, f in enumerate(fits)}, {i: f.alpha_s for i, f in enumerate(fits)}


def from_dict(d: dict) -> Calibration:
    """Inverse of Calibration.to_dict."""
    def fits(rows: List[dict]) -> Tuple[LevelFit, ...]:
        return tuple(LevelFit(int(r["level"]), float(r["alpha_s"]), float(r["rate_Bps"]),
                              tuple((int(m), float(t)) for m, t in r.get("points", ()))) for r in rows)
    return Calibration(d["topology"], tuple(float(b) for b in d["bw_mbps"]), d.get("datapath", "?"),
                       fits(d["loaded"]), fits(d.get("idle", [])), d.get("meta", {}))


LEGACY_MTU = 1500  # calibrations written before links had an MTU option ran on the kernel's default


def load(path: str, topology: str = None, bw_mbps: Sequence[float] = None, dilation: float = None,
         mtu: int = None) -> Calibration:
    """Read a calibration; CalibrationError when it is unreadable or was measured on another topology, rate or
    (for an emulated run) time dilation or MTU."""
    try:
        with open(path) as f:
            data = json.load(f)
        failed = data.get("error") if isinstance(data, dict) else None
        cal = None if failed else from_dict(data)
    except FileNotFoundError:
        raise CalibrationError(f"--calibration {path} does not exist: run `dmlbed calibrate --topo ... --bw ... "
                               f"--out DIR` and give DIR/calibration.json") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CalibrationError(f"--calibration {path} is not a dmlbed calibration ({exc})") from None
    if failed:
        raise CalibrationError(f"--calibration {path} holds no fit: that calibration failed ({failed})")
    if topology is not None and cal.topology != topology:
        raise CalibrationError(f"--calibration {path} was measured on {cal.topology}, not {topology}: calibrate "
                               f"this topology")
    if bw_mbps is not None and [round(b, 6) for b in cal.bw_mbps] != [round(b, 6) for b in bw_mbps]:
        raise CalibrationError(f"--calibration {path} was measured at {list(cal.bw_mbps)} Mbit/s, not "
                               f"{list(bw_mbps)}: calibrate at this bandwidth")
    measured = float(cal.meta.get("dilation", 1.0))
    if dilation is not None and measured != dilation:
        raise CalibrationError(f"--calibration {path} was measured with --dilation {measured:g}, this run uses "
                               f"{dilation:g}: the CPU's share of alpha depends on it, calibrate with "
                               f"--dilation {dilation:g}")
    measured_mtu = cal.meta.get("mtu", LEGACY_MTU)  # None: a loopback calibration, no links
    if mtu is not None and measured_mtu is not None and int(measured_mtu) != mtu:
        raise CalibrationError(f"--calibration {path} was measured with --mtu {measured_mtu}, this run uses {mtu}: "
                               f"headers take another share of the rate, calibrate with --mtu {mtu}")
    return cal
