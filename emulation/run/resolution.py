"""What a checked configuration resolves to, computed once during validation and handed down: the network (its
topology, asked-for and shaped rates, impairment, TCP settings, controller, machines) and the synchronization
(the algorithm's descriptor, its typed options, servers and contributors). Nothing after validation derives
these again."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property
from typing import Any, Dict, List, Optional, Sequence, Tuple

from emulation.core.aqm import parse_aqm
from emulation.core.background import BackgroundFlow
from emulation.core.events import LinkEvent
from emulation.core.compute import ComputeModel
from emulation.core.controller_choice import ControllerChoice
from emulation.core.impairment import Impairment
from emulation.core.link_rates import scaled
from emulation.core.tcp import TcpSettings, goodput
from emulation.core.topology import Topology
from emulation.run.options import RunConfig, option_of
from emulation.simulation.background_model import level_rates, states as background_states
from workloads.algorithms import get as get_algorithm
from workloads.algorithms.base import Algorithm
from workloads.codecs import COMPRESSORS


@dataclass(frozen=True)
class NetworkSettings:
    """The network a job brings up (or models): everything hosts_for and the network lock need."""

    topo: Topology
    bw: Tuple[float, ...]              # asked-for rate per level, Mbit/s of emulated time
    shaped: Tuple[float, ...]          # what the links are shaped to: bw divided by the time dilation
    impairment: Impairment
    tcp: TcpSettings
    controller: ControllerChoice
    cluster: Tuple[str, ...] = ()      # '' (one machine) or 'localhost' then the --cluster servers
    datapath: str = "auto"
    shape_ingress: bool = False
    tunnel: str = "ssh"
    local: bool = False                # loopback processes, no emulation
    wait: bool = False                 # wait for the machine's one emulated network instead of refusing
    dilation: float = 1.0
    link_rates: Dict[Tuple[str, str], float] = field(default_factory=dict)  # (lower, upper) -> asked-for Mbit/s
    background: Tuple[BackgroundFlow, ...] = ()  # flows injected beside the job
    events: Tuple[LinkEvent, ...] = ()  # links whose rate changes during the run
    plain_links: Tuple[Tuple[str, str], ...] = ()  # switch-to-switch links on plain ports of the userspace switch
    cpu_hog: int = 0                   # busy processes on the machine while the ranks run (an emulator fault on purpose)

    @property
    def shaped_link_rates(self) -> Dict[Tuple[str, str], float]:
        """What the overridden links are shaped to (divided by the time dilation)."""
        return scaled(self.link_rates, self.dilation)

    @cached_property
    def theory_bw(self) -> Tuple[float, ...]:
        """The rate per level the closed forms take: what one job flow gets on each level's slowest link, every
        background flow sending (worked out once: head, the models and every DDP bucket read it)."""
        return level_rates(self.topo, self.bw, self.link_rates, self.background, [True] * len(self.background))

    def theory_states(self) -> List[Tuple[float, Tuple[float, ...]]]:
        """(probability, rate per level) of every on/off state of the background flows (one state without them)."""
        return [(p, level_rates(self.topo, self.bw, self.link_rates, self.background, on))
                for p, on in background_states(self.background)]

    @property
    def emulated(self) -> bool:
        """Whether an emulated network comes up (not loopback)."""
        return not self.local


@dataclass(frozen=True)
class Synchronization:
    """The algorithm a job synchronizes with, and what it resolved to on this network."""

    algorithm: Algorithm
    options: Dict[str, Any]            # the values of the options it reads, by name
    typed: Any                         # the same as its descriptor's options dataclass
    servers: int                       # dedicated servers in use
    contributors: Tuple[int, ...]      # ranks that train and contribute gradients
    compute: ComputeModel = ComputeModel()  # device compute per rank and iteration (--compute-time, --slow)
    topo: Optional[Topology] = None    # the job's view of the network when it runs on some of its hosts (--hosts)
    codec_options: Dict[str, Any] = field(default_factory=dict)  # the values of the options its codec reads


@dataclass(frozen=True)
class Checked:
    """A configuration checked once: the configuration itself, its network and (for jobs that synchronize) its
    synchronization."""

    cfg: RunConfig
    network: NetworkSettings
    sync: Optional[Synchronization] = None

    @property
    def topo(self) -> Topology:
        """The job's topology: its hosts as ranks (job_view with --hosts), every switch and link."""
        return self.sync.topo if self.sync is not None and self.sync.topo is not None else self.network.topo

    @property
    def bw(self) -> Tuple[float, ...]:
        return self.network.bw

    @property
    def shaped(self) -> Tuple[float, ...]:
        return self.network.shaped

    @property
    def impairment(self) -> Impairment:
        return self.network.impairment

    @property
    def algorithm(self) -> Algorithm:
        return self.sync.algorithm

    @property
    def servers(self) -> int:
        return self.sync.servers

    @property
    def contributors(self) -> Tuple[int, ...]:
        return self.sync.contributors

    @property
    def options(self) -> Dict[str, Any]:
        return self.sync.options

    @property
    def codec_options(self) -> Dict[str, Any]:
        return self.sync.codec_options

    @property
    def compute(self) -> ComputeModel:
        return self.sync.compute if self.sync else ComputeModel()


def shaped_rates(bw: Sequence[float], dilation: float) -> Tuple[float, ...]:
    """What the links are shaped to: the asked-for rate divided by the time dilation factor."""
    return tuple(b / dilation for b in bw)


def tcp_settings(cfg: RunConfig) -> TcpSettings:
    """The emulated hosts' TCP and queue settings a configuration asks for. Under time dilation F the kernel's
    timers are not stretched, so the minimum RTO is set F times longer: --rto-min is in emulated time (5 ms
    real at F = 6 is 0.8 ms emulated, and its spurious timeouts idled the links). Left to the rate (auto), both are
    sized by the network from the rates it shapes, which are real rates already."""
    rto_min, tsq = option_of("rto_min").parse(cfg.rto_min), option_of("tsq").parse(cfg.tsq)
    return TcpSettings(congestion_control=cfg.tcp_cc, quickack=cfg.quickack, tsq_bytes=tsq,
                       rto_min_ms=None if rto_min is None else round(rto_min * cfg.dilation),
                       host_queue_packets=cfg.host_queue, switch_queue_packets=cfg.queue,
                       socket_buffer_bytes=cfg.socket_buffer, mtu=cfg.mtu, ecn_mark_packets=parse_aqm(cfg.aqm))


def link_goodput(cfg: RunConfig) -> float:
    """Payload share of a shaped rate: --goodput when given, else full frames of --mtu."""
    return cfg.goodput if cfg.goodput is not None else goodput(cfg.mtu)


def payload_rates(cfg: RunConfig, bw: Sequence[float]) -> Dict[int, float]:
    """The flow model's payload bytes/s per link level: the asked-for rates times the links' goodput."""
    share = link_goodput(cfg)
    return {level: b * 1e6 / 8 * share for level, b in enumerate(bw)}


def algorithm_options(cfg: RunConfig) -> Dict[str, Any]:
    """The values of the options this configuration's algorithm reads (its descriptor types them)."""
    return {name: getattr(cfg, name) for name in get_algorithm(cfg.algo).option_names}


def codec_options(cfg: RunConfig) -> Dict[str, Any]:
    """The values of the options this configuration's codec reads (its descriptor types them)."""
    return {f.name: getattr(cfg, f.name) for f in fields(COMPRESSORS[cfg.codec].options)}
