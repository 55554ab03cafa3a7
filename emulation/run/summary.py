"""The typed summary of a run-shaped job (a run's summary.json, a simulated run's, the closed forms'), in sections
each back end fills: the head every one starts with (the question and the papers' answer), the models beside the
formula, the outcome, and what emulation, simulation or theory adds. It flattens to the JSON keys summary.json has
always had; its JSON Schema is generated from these classes (json_schemas.py). Also the launch summary's type."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Union

from emulation.core.link_rates import described
from emulation.run.provenance import provenance
from emulation.run.resolution import Checked, link_goodput
from emulation.simulation.background_model import varies as background_varies
from emulation.simulation.calibrated import calibrated_fields, delay_fields
from workloads.models import parameter_count_of, ready_order, shapes_for, tensor_flops, tensor_shapes, tensor_sizes
from workloads.overlap import bucket_ready_fractions, ddp_buckets, model_fractions, timeline


class _Absent:
    """The value of an optional key that a summary leaves out (None is a value: JSON null)."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()


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


def head(checked: Checked) -> Head:
    """Configuration, model size and the paper's GST (no plan is built for the closed form)."""
    cfg, topo, network = checked.cfg, checked.topo, checked.network
    parameters = parameter_count_of(cfg.model)

    def closed_form(bw):
        return checked.algorithm.gst_theory(topo, parameters * 4, bw, checked.servers, cfg.codec, checked.options,
                                            tensor_sizes(cfg.model), checked.codec_options, tensor_shapes(cfg.model))
    bw = network.theory_bw
    theory = closed_form(bw)
    out = Head(topology=topo.spec, algo=cfg.algo, model=cfg.model, workers=len(checked.contributors),
               ranks=len(topo.hosts), servers=checked.servers, parameters=parameters, gradient_bytes=parameters * 4,
               bw_mbps=bw_value(checked.bw), batch=cfg.batch, codec=cfg.codec, iterations_requested=cfg.iters,
               gst_theory_s=theory.gst_s, gst_formula=theory.formula, tf_s=theory.tf_s,
               switch_ratio_fat_tree=len(topo.switches) / topo.fat_tree_switches_for_same_hosts(),
               config=asdict(cfg), provenance=provenance())
    if theory.baselines:
        out.gst_baselines_s = dict(theory.baselines)
    if network.link_rates:
        out.link_rates_mbps = described(network.link_rates)
    if network.link_rates or network.background:
        beside = " and its fair share beside the background flows" if network.background else ""
        out.gst_formula += (f" at each level's slowest link{beside} ({bw_value(bw)} Mbit/s): " +
                            (f"exact, every step of {cfg.algo} is paced by its slowest link"
                             if checked.algorithm.uniform_links else
                             f"an upper bound, {cfg.algo} does not cross every link in every step (simulate gives "
                             f"the shared-link figure)"))
    if background_varies(network.background):  # a state holding share p of the time holds p/(C + G) of the iterations
        states = network.theory_states()
        gsts = [(p, closed_form(rates).gst_s) for p, rates in states]
        weights = [p / (checked.compute.mean + g) for p, g in gsts]
        out.gst_theory_s = sum(w * g for w, (_, g) in zip(weights, gsts)) / sum(weights)
        out.gst_formula += (f"; the mean over the on/off flows' {len(states)} states, each state's GST G weighted by "
                            f"p/(C + G) (p: its share of the time, each flow on for ON/(ON+OFF); C: the compute): "
                            f"exact when a synchronization is short against the on and off times")
    return out


def models(checked: Checked) -> Models:
    """The calibrated theory (with --calibration), the delay model (with a link delay) and DDP's overlapped
    iteration (with --overlap), each where it applies."""
    cfg, sizes, bw = checked.cfg, tensor_sizes(checked.cfg.model), checked.network.theory_bw
    keys = {**calibrated_fields(cfg.calibration, checked.algorithm, checked.topo, checked.servers, sizes, bw,
                                checked.options),
            **delay_fields(checked.impairment, checked.algorithm, checked.topo, checked.servers, sizes, bw,
                           checked.options, link_goodput(cfg)),
            **overlap_theory(checked)}
    return Models(**keys)


def overlap_model(checked: Checked, bucket_gst: Callable[[List[int]], float]) -> dict:
    """With --overlap, one iteration as DDP runs it: the model's buckets, when a device of --compute-time has each
    ready (forward, then backward by each layer's FLOPs), and their synchronizations one after another, each
    taking bucket_gst(its parameter sizes); {} without --overlap."""
    cfg = checked.cfg
    if not cfg.overlap:
        return {}
    sizes, order = tensor_sizes(cfg.model), ready_order(cfg.model)
    indices = ddp_buckets(sizes, cfg.bucket_mb, order)
    buckets = [[sizes[i] for i in b] for b in indices]
    ready = bucket_ready_fractions(indices, model_fractions(sizes, tensor_flops(cfg.model), order))
    t = timeline(checked.compute.mean, ready, [bucket_gst(b) for b in buckets])
    return {"bucket_mb": cfg.bucket_mb, "buckets": len(buckets), "bucket_bytes": [4 * sum(b) for b in buckets],
            "ready_fractions": ready, "bucket_gst_s": [e - s for s, e in t["buckets"]], "gst_s": t["gst_s"],
            "exposed_s": t["exposed_s"], "iteration_s": t["iteration_s"]}


def overlap_theory(checked: Checked) -> dict:
    """overlap_model with the paper's closed form for every bucket ({} without --overlap)."""
    def closed_form(sizes: Sequence[int]) -> float:
        return checked.algorithm.gst_theory(checked.topo, 4 * sum(sizes), checked.network.theory_bw,
                                            checked.servers, checked.cfg.codec, checked.options, sizes,
                                            checked.codec_options, shapes_for(checked.cfg.model, sizes)).gst_s
    model = overlap_model(checked, closed_form)
    return {"overlap_theory": model} if model else {}


def typed_fields(kind: type) -> List[Any]:
    """The dataclass fields of a summary section (for the schema)."""
    assert is_dataclass(kind)
    return list(fields(kind))
