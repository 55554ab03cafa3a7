"""What an algorithm says about itself: where it runs, who serves, which options it reads, its theory and the
strategy its ranks run. The registry in __init__.py holds one of these per algorithm."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from emulation.core.formulas import Theory, host_tf
from emulation.core.topology import Topology
from workloads.option_fields import NoOptions
from workloads.plan import Plan, PlanError

ALL_TOPOLOGIES = ("bcube", "fattree", "star", "tree", "leafspine", "torus", "jellyfish", "rail", "file")
PLAN_STRATEGY = "workloads.strategies.allreduce:PlanAllReduce"

# How an algorithm uses dedicated servers (ranks 0..M-1 that aggregate and do not train).
NO_SERVERS = "none"            # every host trains
OPTIONAL_SERVERS = "optional"  # 0 = peer-to-peer, M >= 1 dedicated
REQUIRED_SERVERS = "required"  # at least one, default_servers when not given

TheoryFn = Callable[[Topology, float, Sequence[float], int], Theory]


def check_servers(servers: int, hosts: int) -> None:
    """PlanError unless 1..hosts-1 dedicated servers were asked for."""
    if not 1 <= servers < hosts:
        raise PlanError(f"--servers {servers} is invalid: give 1..{hosts - 1} on a {hosts}-host topology")


def no_option_checks(topo: Topology, servers: int, options) -> None:
    """Algorithms without checks of their own accept everything."""


def any_model(model: str, ranks: int, options) -> None:
    """Algorithms that synchronize any model's gradient accept every model."""


def nothing_shared(topo: Topology, servers: int, options) -> Dict[str, object]:
    """Algorithms whose ranks derive everything themselves share nothing."""
    return {}


def factor_sizes(compressor, sizes: Sequence[int], shapes: Optional[Sequence[Tuple[int, ...]]],
                 codec_options) -> List[List[int]]:
    """A low-rank codec's all-reduces, each as its values' sizes (an empty one left out); tensors without shapes are
    vectors."""
    from workloads.codecs.base import typed_options
    parts = compressor.phase_sizes(shapes or [(n,) for n in sizes], typed_options(compressor, codec_options))
    return [p for p in parts if p]


@dataclass(frozen=True)
class Algorithm:
    """One synchronization algorithm, described for every layer that needs to know about it.

    plan: topology, servers -> the all-reduce Plan, for algorithms that are one plan (None otherwise);
    theory: topology, gradient bytes, bandwidth per level, servers -> the paper's GST;
    strategy: "module:Class" of the workloads.strategies class its ranks run (imported by workers only);
    options: the frozen dataclass of the run options it reads beyond the common ones, each field made by option()
    (the option table collects them from the registry; others must stay at their defaults);
    check_options: topology, servers, options -> raises ValueError naming a bad option value (before anything
    starts);
    ddp_allreduce: with --overlap, DDP's own all-reduce synchronizes the buckets (an algorithm without a plan);
    plan algorithms run their plan on every bucket (workloads/comm_hook.py).
    phases: topology, servers, options, layer sizes -> the plans one synchronization runs one after another, each
    with its pieces' element counts, for algorithms made of plans but not one (the flow model simulates them in
    sequence); PlanError where its options make the traffic depend on the data.
    worker_optimizer: False when its servers apply the updates themselves (plain SGD, as its paper).
    shared: topology, servers, options -> what the runner computes once and gives every rank (RankConfig.shared),
    for what its ranks must agree on but could compute differently (a solver under a time limit).
    forward_phase: topology, servers, options, per-layer sizes, per-layer forward seconds, a plan's seconds in the
    flow model -> the forward pass with what it waits for (iBatch's pulls), for the flow model's iteration.
    sized_plan: its plan and theory take the model's tensor sizes (layer_sizes=...), for plans whose pieces are whole
    tensors; bucketable: options -> whether its plan can synchronize any bucket of layers (DDP's, with --overlap).
    uniform_links: every rank moves the same bytes over its own link in every step, so one slower link paces every
    step and the closed form at each level's slowest link is exact (with --link-rate; otherwise an upper bound).
    host_subsets: its plan and theory need only the ranks, not the topology's structure, so it runs on any of the
    network's hosts (--hosts).
    check_model: model name, ranks, options -> raises ValueError when the algorithm cannot train that model (expert
    parallelism needs a mixture of experts).
    prepare_model: module, rank, ranks, options -> what a rank keeps of the built model before training (expert
    parallelism: its own experts); None keeps all of it.
    transfers: topology, servers -> how many transfers one synchronization's plan holds, for the flow model's memory
    estimate before anything is built (None: 2N(N-1), a peer-to-peer parameter server's).
    generated_plan: its plan makes each step's transfers when read (no table), so the flow model answers it step by
    step, keeping only per rank and piece when it was last touched.
    """

    name: str
    summary: str
    paper: str
    topologies: Tuple[str, ...]
    theory: TheoryFn
    plan: Optional[Callable[[Topology, int], Plan]] = None
    strategy: str = PLAN_STRATEGY
    servers: str = NO_SERVERS
    default_servers: int = 0
    options: type = NoOptions
    codecs: Tuple[str, ...] = ("none",)
    gather: Optional[str] = None  # the all-gather (workloads/collectives/allgather.py) gathering codecs run instead
    check_options: Callable[[Topology, int, Any], None] = no_option_checks
    ddp_allreduce: bool = False
    worker_optimizer: bool = True  # its workers step torch's SGD (momentum, weight decay, schedules apply)
    phases: Optional[Callable[[Topology, int, Any, Sequence[int]], Tuple[Tuple[Plan, List[int]], ...]]] = None
    shared: Callable[[Topology, int, Any], Dict[str, object]] = nothing_shared
    forward_phase: Optional[Callable[..., Dict[str, object]]] = None
    sized_plan: bool = False
    bucketable: Callable[[Any], bool] = lambda options: True
    uniform_links: bool = False
    host_subsets: bool = False
    check_model: Callable[[str, int, Any], None] = any_model
    prepare_model: Optional[Callable[[Any, int, int, Any], None]] = None
    transfers: Optional[Callable[[Topology, int], int]] = None
    generated_plan: bool = False

    @property
    def overlaps(self) -> bool:
        """Whether it can synchronize DDP's buckets during backward (--overlap)."""
        return self.plan is not None or self.ddp_allreduce

    @property
    def option_names(self) -> Tuple[str, ...]:
        """The names of the options this algorithm reads."""
        return tuple(f.name for f in fields(self.options))

    def options_of(self, values=None):
        """This algorithm's typed options from a mapping of run options (its own keys; others ignored, missing
        ones at their defaults) or from an instance already typed."""
        if isinstance(values, self.options):
            return values
        values = values or {}
        return self.options(**{k: values[k] for k in self.option_names if values.get(k) is not None})

    def resolve_servers(self, requested: int) -> int:
        """The number of dedicated servers a run uses for a requested --servers value."""
        if self.servers == REQUIRED_SERVERS and not requested:
            return self.default_servers
        return requested

    def contributors(self, topo: Topology, servers: int) -> List[int]:
        """Ranks that train and contribute gradients (every rank past the dedicated servers)."""
        return list(range(self.resolve_servers(servers), len(topo.hosts)))

    def check(self, topo: Topology, servers: int, options=None, codec: str = "none") -> None:
        """Raise PlanError/ValueError unless this algorithm can run on topo with these settings (options: typed,
        or a mapping of run options)."""
        if topo.kind == "file" and "file" not in self.topologies:
            from workloads.algorithms import names_with
            raise PlanError(f"{self.name} plans over the levels of a named family ({', '.join(self.topologies)}) and a "
                            f"topology file gives links, not that hierarchy: give the family's spec, or run "
                            f"{', '.join(names_with(lambda a: 'file' in a.topologies))} on the file")
        if topo.kind not in self.topologies:
            from workloads.algorithms import valid_combinations
            raise PlanError(f"{self.name} cannot run on {topo.spec}: valid combinations are {valid_combinations()}")
        if servers and self.servers == NO_SERVERS:
            from workloads.algorithms import names_with
            raise PlanError(f"--servers applies to {', '.join(names_with(lambda a: a.servers != NO_SERVERS))} "
                            f"only, not {self.name}")
        used = self.resolve_servers(servers)
        if used:
            check_servers(used, len(topo.hosts))
        if codec not in self.all_codecs:
            from workloads.algorithms import names_with
            from workloads.codecs import GATHERING
            gathering = (f" ({', '.join(GATHERING)} gather every rank's payload: they run on "
                         f"{', '.join(names_with(lambda a: a.gather is not None))})") if codec in GATHERING else ""
            raise ValueError(f"--codec {codec} does not apply to {self.name}: it takes {', '.join(self.all_codecs)}"
                             f"{gathering}")
        if codec in self.gathered_codecs:
            from workloads.collectives import get as get_collective
            if used:
                raise ValueError(f"--codec {codec} gathers every rank's payload from every rank: it runs without "
                                 f"dedicated servers (drop --servers)")
            try:
                get_collective("allgather").way(self.gather).check("allgather", len(topo.hosts))
            except PlanError as exc:
                raise PlanError(f"--codec {codec} gathers with {self.name}'s all-gather: {exc}") from None
        self.check_options(topo, used, self.options_of(options))

    @property
    def gathered_codecs(self) -> Tuple[str, ...]:
        """The gathering codecs it runs on its all-gather (none without one)."""
        from workloads.codecs import GATHERING
        return GATHERING if self.gather else ()

    @property
    def all_codecs(self) -> Tuple[str, ...]:
        """Every codec it takes: its summing ones, and the gathering ones where it has an all-gather."""
        return self.codecs + self.gathered_codecs

    def codec_phases(self, topo: Topology, sizes: Sequence[int], servers: int = 0, options=None,
                     bw: Optional[Sequence[float]] = None, codec: str = "none",
                     codec_options=None, shapes: Optional[Sequence[Tuple[int, ...]]] = None
                     ) -> Tuple[Tuple[Plan, List[int]], ...]:
        """simulation_phases, or for a gathering codec its all-gather of every rank's payload (its words), or for a
        low-rank codec its two all-reduces of factors (shapes: the layers' tensor shapes)."""
        from workloads.codecs import COMPRESSORS
        from workloads.codecs.base import typed_options
        compressor = COMPRESSORS[codec]
        if compressor.lowrank:
            return tuple(phase for part in factor_sizes(compressor, sizes, shapes, codec_options)
                         for phase in self.simulation_phases(topo, part, servers, options, bw))
        if not compressor.gathers:
            return self.simulation_phases(topo, sizes, servers, options, bw)
        ranks = len(topo.hosts)
        words = compressor.words(list(sizes), typed_options(compressor, codec_options))
        return ((self.gather_plan(ranks), [words] * ranks),)

    def gather_plan(self, ranks: int) -> Plan:
        """The all-gather a gathering codec's payloads travel over these ranks."""
        from workloads.collectives import get as get_collective
        return get_collective("allgather").plan(self.gather, ranks)

    def build_plan(self, topo: Topology, servers: int = 0, options=None,
                   bw: Optional[Sequence[float]] = None, gradient_bytes: Optional[float] = None,
                   layer_sizes: Optional[Sequence[int]] = None) -> Plan:
        """The all-reduce plan (PlanError when this algorithm is not a single plan) for its options (typed, or a
        mapping of run options), the bandwidth per level and the gradient's size, which 'auto' choices need, and the
        model's tensor sizes, which a plan of whole tensors needs."""
        if self.plan is None:
            raise PlanError(f"{self.name} is not a single all-reduce plan")
        keywords = self._keywords(options, bw, layer_sizes)
        if keywords and gradient_bytes is not None and not self.sized_plan:
            keywords["gradient_bytes"] = gradient_bytes
        return self.plan(topo, self.resolve_servers(servers), **keywords)

    @property
    def simulable(self) -> bool:
        """Whether the flow model can run it: one plan, or plans in sequence."""
        return self.plan is not None or self.phases is not None

    def simulation_phases(self, topo: Topology, sizes: Sequence[int], servers: int = 0, options=None,
                          bw: Optional[Sequence[float]] = None) -> Tuple[Tuple[Plan, List[int]], ...]:
        """The plans one synchronization of layers of these sizes runs, in order, each with its pieces' element
        counts (PlanError naming why the flow model cannot run it)."""
        if self.plan is not None:
            plan = self.build_plan(topo, servers, options, bw, 4 * sum(sizes), sizes)
            return ((plan, plan.piece_sizes(sizes)),)
        if self.phases is None:
            raise PlanError(f"{self.name} is not made of plans")
        return tuple(self.phases(topo, self.resolve_servers(servers), self.options_of(options), list(sizes)))

    def _keywords(self, options, bw: Optional[Sequence[float]] = None,
                  layer_sizes: Optional[Sequence[int]] = None) -> Dict[str, object]:
        """The keyword arguments its plan and theory take: its options (and the rates, when it has options; the
        model's tensor sizes, when its plan takes them)."""
        if not self.option_names:
            return {}
        typed = self.options_of(options)
        out = {name: getattr(typed, name) for name in self.option_names}
        if self.sized_plan:
            return dict(out, layer_sizes=None if layer_sizes is None else tuple(int(s) for s in layer_sizes))
        return dict(out, bw=tuple(bw)) if bw is not None else out

    def gst_theory(self, topo: Topology, gradient_bytes: float, bw: Sequence[float], servers: int = 0,
                   codec: str = "none", options=None, layer_sizes: Optional[Sequence[int]] = None,
                   codec_options=None, layer_shapes: Optional[Sequence[Tuple[int, ...]]] = None) -> Theory:
        """The paper's GST for this algorithm (closed form: no plan is built); with a codec, as TernGrad's
        performance model has it (sec. 5, App. B: communication scales with the gradient size on the wire): the
        formula times the busiest sender's wire fraction under that codec, from the plan."""
        keywords = self._keywords(options, layer_sizes=layer_sizes) if self.plan or self.phases else {}
        base = self.theory(topo, gradient_bytes, bw, self.resolve_servers(servers), **keywords)
        if codec == "none" or self.plan is None:
            return base
        from workloads.codecs import COMPRESSORS
        from workloads.codecs.base import typed_options
        compressor = COMPRESSORS[codec]
        sizes = list(layer_sizes) if layer_sizes is not None else [max(1, int(gradient_bytes // 4))]
        if compressor.lowrank:  # the formula once for each all-reduce of factors, on its own values
            parts = factor_sizes(compressor, sizes, layer_shapes, codec_options)
            each = [self.theory(topo, 4 * sum(p), bw, self.resolve_servers(servers),
                                **(self._keywords(options, layer_sizes=p) if self.plan or self.phases else {}))
                    for p in parts]
            values = sum(sum(p) for p in parts)
            return Theory(sum(t.gst_s for t in each),
                          f"{base.formula}, once for each of {len(parts)} all-reduces of {codec}'s factors "
                          f"({values} values of {sum(sizes)})", base.tf_s)
        if compressor.gathers:  # every rank's payload C crosses every other rank's link once: (N-1) C over B
            payload = 4 * compressor.words(sizes, typed_options(compressor, codec_options))
            ranks = len(topo.hosts)
            return Theory(host_tf((ranks - 1) * payload, bw),
                          f"(N-1) C / B: the all-gather of every rank's {codec} payload, C = {payload} B "
                          f"({compressor.summary})", base.tf_s)
        plan = self.build_plan(topo, servers, options, bw, gradient_bytes, layer_sizes)
        f = compressor.wire_fraction(plan, plan.piece_sizes(sizes))
        return Theory(base.gst_s * f, f"{base.formula} x {f:.4f} ({codec}: {compressor.summary})", base.tf_s)
