"""The typed summary of a run-shaped job (a run's summary.json, a simulated run's, the closed forms'), in sections
each back end fills: the head every one starts with (the question and the papers' answer), the models beside the
formula, the outcome, and what emulation, simulation or theory adds. It flattens to the JSON keys summary.json has
always had; its JSON Schema is generated from these classes (`dmlbed schema`, emulation/commands/schema.py). Also the
launch summary's type."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

from emulation.core.tcp import ETHERNET_HEADER, TCPIP_HEADERS
from emulation.results.iterations import median_after_warmup, phase_ratios



class _Absent:
    """The value of an optional key that a summary leaves out (None is a value: JSON null)."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()


FRAME_HEADERS = TCPIP_HEADERS + ETHERNET_HEADER  # bytes of every frame an interface counts beyond its payload


def optional(doc: str = "") -> Any:
    """A key a summary carries only when it applies (absent from the JSON otherwise)."""
    return field(default=ABSENT, metadata={"optional": True, "doc": doc})


Rates = Union[float, List[float]]  # one rate for every level, or one per level


@dataclass
class Head:
    """What was asked and the papers' answer: configuration, model size, closed-form GST."""

    topology: str
    algo: str
    model: str
    workers: int
    ranks: int
    servers: int
    parameters: int
    gradient_bytes: int
    bw_mbps: Rates
    batch: int
    codec: str
    iterations_requested: int
    gst_theory_s: float
    gst_formula: str
    tf_s: float
    switch_ratio_fat_tree: float  # the topology's switches over a 3-layer Fat-Tree's for as many hosts (5N/n)
    config: Dict[str, Any]
    provenance: Dict[str, Any]
    gst_baselines_s: Dict[str, float] = optional("other algorithms' closed forms beside this one's")
    link_rates_mbps: Dict[str, float] = optional("links at another rate than their level's (--link-rate), Mbit/s")
    gst_theory_filtered: bool = optional("the closed form sends every value, while the run's filter (DVF) drops a "
                                         "share its updates decide")


@dataclass
class Models:
    """The models beside the formula, each present when asked for: the calibrated one (--calibration), the link
    delay one (--delay), DDP's overlapped iteration (--overlap)."""

    calibration: str = optional()
    gst_theory_calibrated_s: Optional[float] = optional()
    gst_formula_calibrated: str = optional()
    calibrated_levels: Dict[str, Dict[str, float]] = optional()
    gst_theory_delay_s: Optional[float] = optional()
    gst_formula_delay: str = optional()
    overlap_theory: Dict[str, Any] = optional()


@dataclass
class Outcome:
    """How the job ended and its headline numbers (every back end)."""

    mode: str
    iterations: Optional[int]
    gst_median_s: Optional[float]
    gst_ratio: Optional[float]
    compute_median_s: Optional[float]
    iteration_median_s: Optional[float]
    jct_s: Optional[float]
    correct: Optional[bool]
    replicas_identical: Optional[bool]
    sum_verified: Optional[bool]
    error: Optional[str]
    completed: bool
    fidelity: Dict[str, Any]
    split_median_s: Dict[str, Optional[float]] = field(default_factory=dict)
    throughput_sps: Optional[float] = optional("samples per second, where the back end gives it")
    period_median_s: Optional[float] = optional("the time between consecutive iteration ends (per rank its median "
                                                "after warm-up, the slowest rank's): what a speed-up compares")
    iteration_mean_s: Optional[float] = optional("mean iteration past warm-up, when compute varies by rank or "
                                                 "iteration (BSP's mean waits for the slowest draw: not its median)")
    stragglers: Dict[str, Any] = optional("when compute varies: per rank its compute and wait at the "
                                          "synchronization, and which rank each iteration waited for")
    link_events: List[Dict[str, Any]] = optional("links changed during the run (--event): each event's link and new "
                                                 "rate (or down, up), the iteration from which it held, the GST before "
                                                 "and after it and the closed form after it; emulated, also the "
                                                 "iteration it hit, the recovery, the connections across the link and, "
                                                 "for a link down, the data-plane outage and the controller's reroute "
                                                 "(docs/how-to/link-events.md)")


@dataclass
class Traffic:
    """What crossed the links (emulated or simulated)."""

    shaped_mbps: List[float]
    bytes_by_level: Dict[str, float]
    payload_fp32_bytes: Optional[float]
    payload_sent_bytes: Optional[float]
    wire_ratio: Optional[float]
    duration_s: float
    frames_by_level: Dict[str, int] = optional("frames the hosts' interfaces sent per level (emulated): with "
                                               "bytes_by_level, the headers (66 bytes a frame: Ethernet, IPv4, TCP "
                                               "with timestamps) apart from the payload on the wire")
    wire_payload_ratio: float = optional("the payload the links carried over the fp32 volume: emulated, the hosts' "
                                         "interfaces' bytes less every frame's headers (frames_by_level); simulated, "
                                         "the flow model's wire fraction (its bytes are payload)")
    interfaces_over_engine: float = optional("emulated: the hosts' interfaces' bytes less every frame's headers over "
                                             "what the ranks' engine sent (1 when every byte sent is its payload)")
    background: List[Dict[str, Any]] = optional("flows injected beside the job (--background): each one's kind, path "
                                                "and throughput")


@dataclass
class Emulation:
    """What an emulated (or loopback) run adds: the network it ran on and what its ranks measured."""

    dilation: float
    data: str
    datapath: Optional[str] = None
    shaping: Optional[str] = None
    controller: Optional[Dict[str, Any]] = None
    tcp: Dict[str, Any] = field(default_factory=dict)
    impairment: Dict[str, Any] = field(default_factory=dict)
    packet_in: Optional[int] = None
    compute_real_median_s: Optional[float] = None
    compute_cpu_median_s: Optional[float] = None
    compute_over_budget: int = 0
    hosts_up: Optional[bool] = None  # whether the hosts (the emulated network, or loopback) came up: how far a run got
    first_step_wire_ratio: Optional[float] = None
    later_steps_wire_ratio: Optional[float] = None  # bytes of every step but the first over fp32 (a PS's pull)
    loss_first: Optional[float] = None
    loss_last: Optional[float] = None
    accuracy: Optional[float] = None
    accuracy_curve: List[List[float]] = field(default_factory=list)
    checks: Dict[str, Optional[bool]] = field(default_factory=dict)
    wire_by_phase: Dict[str, Dict[str, Optional[float]]] = field(default_factory=dict)
    rank_start: Dict[str, Any] = field(default_factory=dict)
    cluster: Dict[str, Any] = optional("servers and tunnels of an emulation across machines")
    gst_ratio_calibrated: Optional[float] = optional("measured GST over the calibrated model's")


@dataclass
class Simulation:
    """What the flow model adds: its settings, link use, and the size of the computation."""

    model_settings: Dict[str, Any]
    link_utilization: Dict[str, Dict[str, float]]
    messages: int
    events: int
    rank_done_s: Dict[str, float]
    warmup: int
    trace: str
    answered: Dict[str, Any] = optional("how the flow model answered: by steps or by the recurrence (no link ever "
                                        "shared, every flow at its path's slowest link: exact), or by events (max-min "
                                        "sharing recomputed as flows start and finish), with the messages and steps or "
                                        "events it took")
    forward_phase: Dict[str, Any] = optional("the forward pass with the pulls it waits for (iBatch)")
    overlap: Dict[str, Any] = optional("DDP's buckets synchronized as backward makes them ready (--overlap)")


@dataclass
class ClosedForm:
    """What the closed forms add: the formula by name, and the models of a theory request."""

    formula: Any
    out: Optional[str] = None
    baselines_s: Dict[str, float] = optional("other algorithms' closed forms beside this one's")
    terngrad_model: Dict[str, Any] = optional("TernGrad's App. B performance model")
    delay_ms: List[float] = optional("the link delay per level the delay model adds")
    compute: Dict[str, Any] = optional("the slowest rank's compute BSP waits for, when compute varies")


SECTIONS = (("head", Head), ("models", Models), ("outcome", Outcome), ("traffic", Traffic),
            ("emulation", Emulation), ("simulation", Simulation), ("closed_form", ClosedForm))
MODE_SECTIONS = {"emulate": ("traffic", "emulation"), "simulate": ("traffic", "simulation"),
                 "theory": ("closed_form",)}


def section_dict(section: Any) -> Dict[str, Any]:
    """A section's keys, absent optional ones left out."""
    return {f.name: getattr(section, f.name) for f in fields(section) if getattr(section, f.name) is not ABSENT}


@dataclass
class Summary(Mapping):
    """A run-shaped job's summary: typed sections (a back end fills those of its mode), and the strategy's extras
    (iBatch's schedule, Parameter Flow's overlay), flattened into one JSON object. Read-only access by key
    (summary["gst_median_s"]) gives what summary.json holds."""

    head: Head
    models: Models
    outcome: Outcome
    traffic: Optional[Traffic] = None
    emulation: Optional[Emulation] = None
    simulation: Optional[Simulation] = None
    closed_form: Optional[ClosedForm] = None
    extras: Dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> Dict[str, Any]:
        """The flat JSON object of summary.json."""
        out: Dict[str, Any] = {}
        for name, _ in SECTIONS:
            section = getattr(self, name)
            if section is not None:
                out.update(section_dict(section))
        for key, value in self.extras.items():
            out.setdefault(key, value)
        return out

    def __getitem__(self, key: str) -> Any:
        return self.to_dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def __len__(self) -> int:
        return len(self.to_dict())

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> "Summary":
        """A summary read back from summary.json (keys no section has go to extras)."""
        data = dict(data)
        mode = data.get("mode", "emulate")
        built = {}
        for name, kind in SECTIONS:
            if name in ("traffic", "emulation", "simulation", "closed_form") and name not in MODE_SECTIONS[mode]:
                continue
            keys = {f.name for f in fields(kind)}
            built[name] = kind(**{k: data.pop(k) for k in list(data) if k in keys})
        return cls(**built, extras=data)


@dataclass
class LaunchSummary:
    """`dmlbed launch`: a user's command on every host, how it synchronized, what was seen from outside it."""

    topology: str
    command: str
    cwd: str
    ranks: int
    algo: Optional[str]
    synchronization: str
    bw_mbps: Rates
    shaped_mbps: List[float]
    config: Dict[str, Any]
    provenance: Dict[str, Any]
    # links shaped at bw / dilation; a script that reads DMLBED_DILATION stretches its own device time by it and
    # divides the times it reports (its real CPU compute is not stretched), wall_s is real time
    dilation: float = 1.0
    completed: bool = False
    error: Optional[str] = None
    exit_codes: Dict[str, Optional[int]] = field(default_factory=dict)
    wall_s: Optional[float] = None
    bytes_by_level: Dict[str, int] = field(default_factory=dict)
    link_peak_mbps: Dict[str, float] = field(default_factory=dict)
    buckets: Dict[str, Any] = field(default_factory=dict)
    checks: Dict[str, Optional[bool]] = field(default_factory=dict)
    fidelity: Dict[str, Any] = field(default_factory=dict)
    datapath: Optional[str] = None
    shaping: Optional[str] = None
    controller: Optional[Dict[str, Any]] = None
    tcp: Dict[str, Any] = field(default_factory=dict)
    packet_in: Optional[int] = None

    def to_dict(self) -> Dict[str, Any]:
        """summary.json of a launch."""
        return asdict(self)


def bw_value(bw: Sequence[float]) -> Rates:
    """One rate when every level has it, else the rate per level."""
    return bw[0] if len(set(bw)) == 1 else list(bw)


@dataclass
class Measured:
    """What the ranks' records give a run's summary, worked out once: the headline medians, the traffic, the training
    outcome and the checks; each section takes its part (outcome, traffic, fill)."""

    iterations: int
    gst_median_s: Optional[float]
    compute_median_s: Optional[float]
    compute_real_median_s: Optional[float]
    compute_cpu_median_s: Optional[float]
    compute_over_budget: int
    iteration_median_s: Optional[float]
    period_median_s: Optional[float]
    jct_s: Optional[float]
    bytes_by_level: Dict[str, int]
    frames_by_level: Dict[str, int]
    payload_fp32_bytes: int
    payload_sent_bytes: int
    wire_ratio: Optional[float]
    first_step_wire_ratio: Optional[float]
    loss_first: Optional[float]
    loss_last: Optional[float]
    accuracy: Optional[float]
    accuracy_curve: List[List[float]]
    replicas_identical: bool
    checks: Dict[str, Optional[bool]]
    sum_verified: Optional[bool]
    correct: bool
    split_median_s: Dict[str, Optional[float]]
    wire_by_phase: Dict[str, dict]
    extras: Dict[str, Any]
    error: Optional[str]

    def outcome(self, mode: str, theory_s: float, fidelity: Dict[str, Any], requested: int) -> Outcome:
        """The outcome section: headline numbers, correctness, whether every requested iteration ran."""
        gst = self.gst_median_s
        return Outcome(mode=mode, iterations=self.iterations, gst_median_s=gst,
                       gst_ratio=gst / theory_s if gst else None, compute_median_s=self.compute_median_s,
                       iteration_median_s=self.iteration_median_s, period_median_s=self.period_median_s,
                       jct_s=self.jct_s, correct=self.correct,
                       replicas_identical=self.replicas_identical, sum_verified=self.sum_verified, error=self.error,
                       completed=self.error is None and self.iterations == requested, fidelity=fidelity,
                       split_median_s=self.split_median_s)

    def traffic(self, shaped_mbps: List[float], duration_s: float) -> Traffic:
        """The traffic section: bytes by level, the payload against fp32, frames where counted."""
        out = Traffic(shaped_mbps=shaped_mbps, bytes_by_level=self.bytes_by_level,
                      payload_fp32_bytes=self.payload_fp32_bytes, payload_sent_bytes=self.payload_sent_bytes,
                      wire_ratio=self.wire_ratio, duration_s=duration_s)
        if self.frames_by_level:
            out.frames_by_level = self.frames_by_level
            payload = sum(self.bytes_by_level.values()) - sum(self.frames_by_level.values()) * FRAME_HEADERS
            if self.payload_fp32_bytes:
                out.wire_payload_ratio = payload / self.payload_fp32_bytes
            if self.payload_sent_bytes:
                out.interfaces_over_engine = payload / self.payload_sent_bytes
        return out

    def fill(self, emulation: Emulation) -> None:
        """What the ranks measured into the emulation section."""
        for key in ("compute_real_median_s", "compute_cpu_median_s", "compute_over_budget", "first_step_wire_ratio",
                    "loss_first", "loss_last", "accuracy", "accuracy_curve", "checks", "wire_by_phase"):
            setattr(emulation, key, getattr(self, key))
        emulation.later_steps_wire_ratio = (self.wire_by_phase.get("later_steps") or {}).get("ratio")


def extras(finals: Dict[int, dict], contributors) -> Dict[str, object]:
    """Strategy extras of the final records (e.g. the iBatch schedule, the PF overlay): a worker's when it has one."""
    out: Dict[str, object] = {}
    for r, final in sorted(finals.items(), key=lambda kv: (kv[0] not in contributors, kv[0])):
        for key, value in (final.get("extras") or {}).items():
            out.setdefault(key, value)
    return out


def measured(iterations: List[dict], finals: Dict[int, dict], contributors, checks: Dict[str, Optional[bool]],
             error: Optional[str], dilation: float = 1.0, period_s: Optional[float] = None) -> Measured:
    """What the ranks' records give the summary (iterations: per_iteration's rows, in emulated time; period_s: the
    job's iteration period from its ranks' own rows, period_median)."""
    from workloads.verify import overall
    checksums = {finals[r]["checksum"] for r in contributors if r in finals}
    identical = len(checksums) == 1 and all(r in finals for r in contributors)
    by_level: Dict[str, int] = {}
    frames: Dict[str, int] = {}
    for it in iterations:
        for k, v in it["tx_bytes_by_level"].items():
            by_level[k] = by_level.get(k, 0) + v
        for k, v in it.get("tx_frames_by_level", {}).items():
            frames[k] = frames.get(k, 0) + v
    accuracy = next((f["accuracy"] for f in finals.values() if f.get("accuracy") is not None), None)
    phases = phase_ratios(iterations)
    raw = sum(p["fp32_bytes"] for p in phases.values())
    sent = sum(p["sent_bytes"] for p in phases.values())
    first = phases.get("first_step")
    losses = [it["loss"] for it in iterations if it["loss"] is not None]
    verified = overall(checks)
    return Measured(**{
        "iterations": len(iterations),
        "gst_median_s": median_after_warmup([it["gst_s"] for it in iterations]),
        "compute_median_s": median_after_warmup([it["compute_s"] for it in iterations]),
        "compute_real_median_s": median_after_warmup([it["compute_real_s"] for it in iterations]),
        "compute_cpu_median_s": median_after_warmup([it["compute_cpu_s"] for it in iterations]),
        "compute_over_budget": sum(it["compute_over_budget"] for it in iterations),
        "iteration_median_s": median_after_warmup([it["iteration_s"] for it in iterations]),
        "period_median_s": period_s,
        "jct_s": (iterations[-1]["end"] - iterations[0]["start"]) / dilation if iterations else None,
        "bytes_by_level": by_level,
        "frames_by_level": frames,
        "payload_fp32_bytes": raw, "payload_sent_bytes": sent,
        "wire_ratio": sent / raw if raw else None,
        "first_step_wire_ratio": first["ratio"] if first else None,
        "loss_first": losses[0] if losses else None,
        "loss_last": losses[-1] if losses else None,
        "accuracy": accuracy,
        "accuracy_curve": [[it["iteration"] + 1, it["accuracy"]] for it in iterations if it["accuracy"] is not None],
        "replicas_identical": identical,
        "checks": checks,
        "sum_verified": verified,
        "correct": bool(identical and verified is not False and error is None),
        "split_median_s": {k: median_after_warmup([it["split"][k] for it in iterations if k in it["split"]])
                           for k in sorted({k for it in iterations for k in it["split"]})},
        "wire_by_phase": phases,
        "extras": extras(finals, contributors),
        "error": error,
    })


def typed_fields(kind: type) -> List[Any]:
    """The dataclass fields of a summary section (for the schema)."""
    assert is_dataclass(kind)
    return list(fields(kind))
