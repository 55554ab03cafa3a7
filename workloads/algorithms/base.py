"""What an algorithm says about itself: where it runs, who serves, which options it reads, its theory and the
strategy its ranks run. The registry in __init__.py holds one of these per algorithm."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from emulation.spec.theory import Theory
from emulation.spec.topology import Topology
from workloads.plan import Plan, PlanError

ALL_TOPOLOGIES = ("bcube", "fattree", "star", "tree")
PLAN_STRATEGY = "workloads.strategies.allreduce:PlanAllReduce"

# How an algorithm uses dedicated servers (ranks 0..M-1 that aggregate and do not train).
NO_SERVERS = "none"            # every host trains
OPTIONAL_SERVERS = "optional"  # 0 = peer-to-peer, M >= 1 dedicated
REQUIRED_SERVERS = "required"  # at least one, default_servers when not given

TheoryFn = Callable[[Topology, float, Sequence[float], int], Theory]


def no_option_checks(topo: Topology, servers: int, options: Mapping[str, object]) -> None:
    """Algorithms without options of their own accept everything."""


@dataclass(frozen=True)
class Algorithm:
    """One synchronization algorithm, described for every layer that needs to know about it.

    plan: topology, servers -> the all-reduce Plan, for algorithms that are one plan (None otherwise);
    theory: topology, gradient bytes, bandwidth per level, servers -> the paper's GST;
    strategy: "module:Class" of the workloads.strategies class its ranks run (imported by workers only);
    options: run options this algorithm reads beyond the common ones (others must stay at their defaults);
    check_options: raises ValueError naming a bad option value (before anything starts).
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
    options: Tuple[str, ...] = ()
    codecs: Tuple[str, ...] = ("none",)
    check_options: Callable[[Topology, int, Mapping[str, object]], None] = no_option_checks
    extra: Dict[str, object] = field(default_factory=dict, compare=False, hash=False)

    def resolve_servers(self, requested: int) -> int:
        """The number of dedicated servers a run uses for a requested --servers value."""
        if self.servers == REQUIRED_SERVERS and not requested:
            return self.default_servers
        return requested

    def contributors(self, topo: Topology, servers: int) -> List[int]:
        """Ranks that train and contribute gradients (every rank past the dedicated servers)."""
        return list(range(self.resolve_servers(servers), len(topo.hosts)))

    def check(self, topo: Topology, servers: int, options: Mapping[str, object]) -> None:
        """Raise PlanError/ValueError unless this algorithm can run on topo with these settings."""
        if topo.kind not in self.topologies:
            from workloads.algorithms import valid_combinations
            raise PlanError(f"{self.name} cannot run on {topo.spec}: valid combinations are {valid_combinations()}")
        if servers and self.servers == NO_SERVERS:
            from workloads.algorithms import names_with
            raise PlanError(f"--servers applies to {', '.join(names_with(lambda a: a.servers != NO_SERVERS))} "
                            f"only, not {self.name}")
        used = self.resolve_servers(servers)
        if used and not 1 <= used < len(topo.hosts):
            raise PlanError(f"--servers {servers} is invalid: give 1..{len(topo.hosts) - 1} on {topo.spec}")
        codec = options.get("codec", "none")
        if codec not in self.codecs:
            raise ValueError(f"--codec {codec} does not apply to {self.name}: it takes {', '.join(self.codecs)}")
        self.check_options(topo, used, options)

    def build_plan(self, topo: Topology, servers: int = 0, options: Optional[Mapping[str, object]] = None) -> Plan:
        """The all-reduce plan (PlanError when this algorithm is not a single plan); options: run options, of
        which the plan gets the ones this algorithm reads (and the bandwidth, which 'auto' choices need)."""
        if self.plan is None:
            raise PlanError(f"{self.name} is not a single all-reduce plan")
        return self.plan(topo, self.resolve_servers(servers), **self.plan_options(topo, options))

    def plan_options(self, topo: Topology, options: Optional[Mapping[str, object]]) -> Dict[str, object]:
        """The keyword arguments this algorithm's plan and theory take from a run's options."""
        if not options or not self.options:
            return {}
        out = {k: options[k] for k in self.options if options.get(k) is not None}
        if out and options.get("bw") is not None:
            from emulation.spec.topology import parse_bandwidth
            bw = options["bw"]
            out["bw"] = parse_bandwidth(bw, topo) if isinstance(bw, str) else tuple(bw)
        return out

    def gst_theory(self, topo: Topology, gradient_bytes: float, bw: Sequence[float], servers: int = 0,
                   codec: str = "none", options: Optional[Mapping[str, object]] = None) -> Theory:
        """The paper's GST for this algorithm (closed form: no plan is built); with codec terngrad, TernGrad's
        performance model (sec. 5, App. B: communication time scales with the gradient size on the wire) on
        top of it: the formula times the busiest sender's wire fraction, from the plan."""
        extra = {k: v for k, v in self.plan_options(topo, options).items() if k != "bw"} if self.plan else {}
        base = self.theory(topo, gradient_bytes, bw, self.resolve_servers(servers), **extra)
        if codec == "none" or self.plan is None:
            return base
        from workloads.compression import terngrad_wire_fraction
        from workloads.plan import piece_sizes
        plan = self.build_plan(topo, servers, dict(options or {}, bw=tuple(bw)))
        elements = max(1, int(gradient_bytes // 4))
        f = terngrad_wire_fraction(plan, piece_sizes([elements], plan.pieces))
        return Theory(base.gst_s * f, f"{base.formula} x {f:.4f} (TernGrad: |g| on the wire, 2-bit ternaries, partial "
                      f"sums in 4/8/16 bits)", base.tf_s)
