"""The one source of run options: each RunConfig field carries its help, type, choices and range; argparse
arguments, YAML keys and type and range checks are all derived from it. The options one algorithm reads are
declared by its descriptor (workloads/algorithms) and collected here from the registry."""

from __future__ import annotations

import difflib
import math
import os
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from emulation.net.probes import choose_datapath, netem_available
from emulation.orchestration.forkclient import rank_start
from emulation.orchestration.resources import check_memory
from emulation.simulation.flows import GRANULARITIES
from emulation.simulation.routes import ECMP_MODES
from emulation.spec.calibration import load as load_calibration
from emulation.spec.impairment import Impairment, parse_impairment
from emulation.spec.controllers import ControllerChoice, parse_controller
from emulation.spec.placement import TUNNELS, parse_servers
from emulation.spec.terngrad_model import SCALINGS
from emulation.spec.tcp import (AFXDP_MAX_MTU, CONGESTION_CONTROLS, MAX_MTU, MIN_MTU, RTO_DRAINS, RTO_MIN_FLOOR_MS,
                                TSQ_MAX_BYTES, TSQ_MIN_BYTES, TSQ_TIME_S, TcpSettings, goodput, rto_min_for_rate)
from emulation.spec.topology import MAX_HOSTS, Topology, TopologyError, parse, parse_bandwidth
from workloads.algorithms import ALGORITHMS, get as get_algorithm, names_with
from workloads.algorithms.base import option_kind
from workloads.compression import COMPRESSORS
from workloads.data import check_data
from workloads.models import input_shape, parameter_count_of
from workloads.overlap import DDP_BUCKET_MB
from workloads.schedule import SCHEDULE_HELP, parse_schedule

GRE_MAX_MTU = 1450  # Mininet's RemoteGRELink sets it on both ends
MAX_EMULATED_HOSTS = 256  # one machine: namespaces, veths and torch processes all share it
RUN, COMPARE, THEORY, NET, SIMULATE, BENCH, CALIBRATE, LAUNCH = ("run", "compare", "theory", "net", "simulate", "bench",
                                                                 "calibrate", "launch")


class OptionError(ValueError):
    """A bad option value: the message names the option and what is valid."""


@dataclass(frozen=True)
class Option:
    """How a RunConfig field is given and checked.

    kind: int, float, str or bool; low/high: inclusive range (low_open: low itself excluded);
    parse: extra format check of a str value (raises ValueError); commands: which CLI commands take it;
    yaml: a compare-config key; algorithm_option: declared by algorithms' descriptors, and only those
    algorithms may change it from its default.
    """

    help: str
    kind: type = str
    choices: Optional[Tuple[str, ...]] = None
    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    parse: Optional[Callable[[str], object]] = None
    commands: Tuple[str, ...] = (RUN, COMPARE)
    flag: Optional[str] = None
    yaml_key: Optional[str] = None
    yaml: bool = True
    required: bool = False
    algorithm_option: bool = False


def auto_or_int(flag: str, low: int, high: int) -> Callable[[str], Optional[int]]:
    """A parser of 'auto' (None: sized to the rate) or an integer in [low, high] (ValueError naming flag)."""
    def parse(value: str) -> Optional[int]:
        if str(value) == "auto":
            return None
        try:
            number = int(value)
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            raise ValueError(f"{flag} {value} is not valid: give auto or an integer in [{low}, {high}]")
        return number
    return parse


def option(default, help: str, **kwargs) -> Any:
    """A dataclass field described by an Option."""
    return field(default=default, metadata={"option": Option(help=help, **kwargs)})


@dataclass
class CommonConfig:
    """The options every algorithm shares (RunConfig adds each algorithm's own)."""

    topology: str = option(None, "bcube:n,k | fattree:k | star:N | tree:F0,F1,...", flag="--topo",
                           yaml_key="topo", required=True, commands=(RUN, COMPARE, THEORY, SIMULATE, BENCH, CALIBRATE, LAUNCH))
    algo: str = option(None, "synchronization algorithm", choices=tuple(ALGORITHMS), required=True,
                       commands=(RUN, COMPARE, THEORY, SIMULATE))
    model: str = option("lenet5", "lenet5 | alexnet | vgg19 | vgg19-22k | resnet50 | googlenet | inception_v3 | "
                        "mlp:SIZE (e.g. mlp:12.5MB) | package.module:factory (your nn.Module with an input_shape)",
                        commands=(RUN, COMPARE, THEORY, SIMULATE))
    bw: str = option("100", "Mbit/s for every link, or one value per link level (e.g. 1000,100,200); "
                     "with a unit as tc writes it: 1Gbit, 500Mbit",
                     commands=(RUN, COMPARE, THEORY, SIMULATE, NET, BENCH, CALIBRATE, LAUNCH))
    servers: int = option(0, "dedicated servers (ranks 0..M-1): ps (0 = peer-to-peer), ibatch and pflow (default 1)",
                          kind=int, low=0, high=MAX_HOSTS, commands=(RUN, COMPARE, THEORY, SIMULATE, BENCH))
    batch: int = option(32, "sub-minibatch per worker", kind=int, low=1, high=4096, commands=(RUN, COMPARE, THEORY))
    iters: int = option(10, "iterations", kind=int, low=1, high=100000, commands=(RUN, COMPARE, SIMULATE))
    data: str = option("synthetic", "synthetic | digits | mnist:PATH")
    lr: float = option(0.01, "learning rate", kind=float, low=0, high=10, low_open=True)
    momentum: float = option(0.0, "SGD momentum of the workers' optimizer", kind=float, low=0, high=0.999)
    weight_decay: float = option(0.0, "SGD weight decay (L2) of the workers' optimizer", kind=float, low=0, high=1)
    lr_schedule: str = option("constant", "learning-rate schedule: " + SCHEDULE_HELP, parse=parse_schedule)
    eval_every: int = option(0, "measure held-out accuracy every N iterations, a curve in summary.json "
                             "(accuracy_curve); 0: once at the end. Needs a real data set (digits, mnist:PATH)",
                             kind=int, low=0, high=100000)
    seed: int = option(0, "seed of weights and data", kind=int, low=0, high=2 ** 31 - 1)
    timeout: float = option(120.0, "seconds any blocking step may take", kind=float, low=1, high=3600,
                     commands=(RUN, COMPARE, BENCH, CALIBRATE, LAUNCH))
    codec: str = option("none", "gradient compressor around a plan all-reduce", choices=tuple(COMPRESSORS),
                        commands=(RUN, COMPARE, THEORY, SIMULATE))
    compute_time: float = option(0.0, "emulate a device: forward/backward takes this many seconds (0 = real time)",
                                 kind=float, low=0, high=3600, commands=(RUN, COMPARE, THEORY, SIMULATE))
    overlap: bool = option(False, "synchronize during backward as PyTorch DDP does: buckets of --bucket-mb, each "
                           "synchronized by the algorithm's DDP communication hook as soon as it is ready", kind=bool,
                           commands=(RUN, COMPARE, THEORY, SIMULATE))
    bucket_mb: float = option(DDP_BUCKET_MB, "--overlap: DDP's bucket size, MiB (bucket_cap_mb)", kind=float,
                              low=0, high=4096, low_open=True, commands=(RUN, COMPARE, THEORY, SIMULATE))
    delay: str = option("0", "one-way delay of every link, ms (or 5ms, 200us), or one value per link level (netem "
                        "under the shaping; theory and simulate add it as latency)",
                        commands=(RUN, COMPARE, THEORY, SIMULATE, NET, BENCH, CALIBRATE, LAUNCH))
    loss: str = option("0", "packet loss of every link, percent (or 1%), or one value per link level (netem)",
                       commands=(RUN, COMPARE, NET, BENCH, CALIBRATE, LAUNCH))
    dilation: float = option(1.0, "time dilation F: links shaped at bw/F, compute stretched by F, every time "
                             "reported divided by F (for rates a 2-core machine cannot emulate in real time)",
                             kind=float, low=1, high=100, commands=(RUN, COMPARE, BENCH, CALIBRATE))
    tcp_cc: str = option(TcpSettings.congestion_control, "TCP congestion control of every emulated host",
                         choices=CONGESTION_CONTROLS, commands=(RUN, COMPARE, NET, BENCH, CALIBRATE, LAUNCH))
    rto_min: str = option("auto", "minimum TCP retransmission timeout on host routes, ms (0 = the kernel's 200 ms; "
                          f"auto: {RTO_DRAINS:g} drains of a full switch port buffer at the slowest link's rate, "
                          f"at least {RTO_MIN_FLOOR_MS} ms: {rto_min_for_rate(25, TcpSettings.switch_queue_packets)} "
                          f"ms at 25 Mbit/s, {rto_min_for_rate(100, TcpSettings.switch_queue_packets)} at 100)",
                          parse=auto_or_int("--rto-min", 0, 1000), commands=(RUN, COMPARE, NET, BENCH, CALIBRATE, LAUNCH))
    quickack: bool = option(TcpSettings.quickack, "hosts ACK every segment at once (no delayed ACKs) on their routes",
                            kind=bool, commands=(RUN, COMPARE, NET, BENCH, CALIBRATE, LAUNCH))
    tsq: str = option("auto", "TCP Small Queues bytes per socket in a host's NIC queue (auto: "
                      f"{TSQ_TIME_S * 1000:g} ms of the host's NIC rate, {TSQ_MIN_BYTES}-{TSQ_MAX_BYTES} bytes)",
                      parse=auto_or_int("--tsq", TSQ_MIN_BYTES, 64 << 20),
                      commands=(RUN, COMPARE, NET, BENCH, CALIBRATE, LAUNCH))
    socket_buffer: int = option(TcpSettings.socket_buffer_bytes, "SO_SNDBUF/SO_RCVBUF of every connection, bytes",
                                kind=int, low=16384, high=64 << 20, commands=(RUN, COMPARE, BENCH, CALIBRATE))
    host_queue: int = option(TcpSettings.host_queue_packets, "packets in a host's egress (NIC) queue", kind=int,
                             low=10, high=100000, commands=(RUN, COMPARE, NET, BENCH, CALIBRATE, LAUNCH))
    queue: int = option(TcpSettings.switch_queue_packets, "packets of switch port buffer (switch-side queues)",
                        kind=int, low=10, high=100000, commands=(RUN, COMPARE, NET, BENCH, CALIBRATE, LAUNCH))
    mtu: int = option(TcpSettings.mtu, "MTU of every emulated link, bytes (the userspace switch pays per packet: "
                      f"larger frames keep it faithful; at most {AFXDP_MAX_MTU} on its AF_XDP ports)", kind=int,
                      low=MIN_MTU, high=MAX_MTU, commands=(RUN, COMPARE, NET, BENCH, CALIBRATE, SIMULATE, THEORY, LAUNCH))
    datapath: str = option("auto", "Open vSwitch datapath (auto: kernel where the module exists)",
                           choices=("auto", "kernel", "user"), commands=(RUN, COMPARE, NET, BENCH, CALIBRATE, LAUNCH))
    controller: str = option("dmlbed", "the OpenFlow controller: dmlbed (its proactive Ryu app) or remote:IP:PORT "
                             "(one you started, as mn --controller remote)", parse=lambda t: parse_controller(t, None),
                             commands=(RUN, NET, LAUNCH), yaml=False)
    controller_app: str = option(None, "your Ryu app (FILE.py), run by dmlbed in place of its own",
                                 parse=lambda t: parse_controller(None, t), commands=(RUN, NET, LAUNCH), yaml=False)
    shape_ingress: bool = option(False, "userspace datapath: also shape switch->host traffic (a bridging namespace "
                                        "per host link; incast into one host needs it)",
                                 kind=bool, commands=(RUN, COMPARE, NET, BENCH, CALIBRATE, LAUNCH))
    cluster: str = option(None, "emulate across machines: SERVER[,SERVER...] reached over SSH, this machine "
                          "first (Mininet Cluster Edition; see README, Several machines)", parse=parse_servers,
                          commands=(RUN, COMPARE, NET, BENCH, CALIBRATE, LAUNCH))
    tunnel: str = option("ssh", "--cluster: links between machines as SSH Ethernet tunnels (any kernel) or GRE "
                         "(faster; needs ip_gre)", choices=TUNNELS, commands=(RUN, COMPARE, NET, BENCH, CALIBRATE, LAUNCH))
    calibration: str = option(None, "a `dmlbed calibrate` calibration.json of this topology and rate: theory, bench "
                              "and simulate add its fitted latency-bandwidth model beside the paper's formula",
                              commands=(RUN, COMPARE, THEORY, SIMULATE, BENCH))
    tg_gpus: int = option(1, "theory --codec terngrad (TernGrad App. B): GPUs per machine i (the hosts are the j "
                          "machines)", kind=int, low=1, high=64, commands=(THEORY,))
    tg_step_s: float = option(0.0, "theory --codec terngrad: T(1,1,K,|g|), one GPU's profiled time for a mini-batch "
                              "of --batch, seconds (default: --compute-time)", kind=float, low=0, high=3600,
                              commands=(THEORY,))
    tg_gpu_gbps: float = option(100.0, "theory --codec terngrad: GPU-to-GPU bandwidth inside a machine C_gwd, Gbit/s",
                                kind=float, low=0, high=10000, low_open=True, commands=(THEORY,))
    tg_cpu_gbps: float = option(100.0, "theory --codec terngrad: CPU-GPU bandwidth C_cwd, Gbit/s", kind=float, low=0,
                                high=10000, low_open=True, commands=(THEORY,))
    tg_latency_us: float = option(0.0, "theory --codec terngrad: network latency C_ncost, microseconds", kind=float,
                                  low=0, high=1e6, commands=(THEORY,))
    tg_scaling: str = option("weak", "theory --codec terngrad: weak (--batch per GPU, eq. 17-18) or strong (--batch "
                             "in all, eq. 15-16) scaling", choices=SCALINGS, commands=(THEORY,))
    tg_ternarize_last: bool = option(False, "theory --codec terngrad: ternarize the last layer too (the paper "
                                     "keeps it fp32)", kind=bool, commands=(THEORY,))
    mode: str = option("emulate", "emulate (real workers on Mininet), simulate (flow-level, any size) or theory (the "
                       "closed forms; TernGrad's App. B where tg_step_s is given)",
                       choices=("emulate", "simulate", "theory"), commands=(COMPARE,))
    latency_us: float = option(0.0, "simulate: latency of every message, microseconds", kind=float, low=0,
                               high=1e6, commands=(SIMULATE, COMPARE))
    goodput: float = option(None, "simulate: share of a link's shaped rate that carries payload (default: full "
                            "frames of --mtu, TCP/IP and Ethernet headers taken off: 3448 of 3514 bytes at 3500)",
                            kind=float, low=0, high=1, low_open=True, commands=(SIMULATE, COMPARE))
    ecmp: str = option("spread", "simulate: ECMP as an even split of every flow over its equal-cost paths (spread) "
                       "or one hashed path per flow, as a switch picks (hash)", choices=ECMP_MODES,
                       commands=(SIMULATE, COMPARE))
    ecmp_ports: str = option(None, "simulate: an emulated run's folder whose connections' TCP ports (so their "
                             "ECMP paths) the simulation reuses, so both see the same collisions; in compare, "
                             "'emulated' takes the emulated row of the same label", commands=(SIMULATE, COMPARE))
    granularity: str = option("chunk", "simulate: data moves in the engine's chunks, each going on once its own "
                              "earlier steps are done (chunk), or in whole step messages, as the closed forms "
                              "assume (message)", choices=GRANULARITIES, commands=(SIMULATE, COMPARE))
    out: str = option(None, "output folder (summary.json, iterations.csv, workers.csv; default: a new "
                            "results/COMMAND/DATE-TIME, with results/COMMAND/latest pointing at it)",
                      commands=(RUN, SIMULATE, LAUNCH), yaml=False)
    local: bool = option(False, "run the workers on 127.0.0.1 without emulation (no root)", kind=bool,
                         commands=(RUN, COMPARE, BENCH, CALIBRATE, LAUNCH), yaml=False)
    force: bool = option(False, "replace the results of an earlier run in --out", kind=bool, commands=(RUN, SIMULATE, BENCH, CALIBRATE, LAUNCH),
                         yaml=False)
    wait: bool = option(False, "wait for another run's emulated network instead of refusing", kind=bool,
                        commands=(RUN, NET, BENCH, CALIBRATE, LAUNCH), yaml=False)


def algorithm_fields() -> List[Tuple[str, type, Any]]:
    """(name, type, field) of every option an algorithm's descriptor declares, as Options; an option two
    algorithms share must be declared the same by both."""
    seen: Dict[str, Tuple[Any, Option]] = {}
    for algorithm in ALGORITHMS.values():
        for f in fields(algorithm.options):
            meta = f.metadata
            opt = Option(help=meta["help"], kind=option_kind(f), choices=meta["choices"], low=meta["low"],
                         high=meta["high"], parse=meta["parse"], algorithm_option=True,
                         commands=(RUN, COMPARE, THEORY, SIMULATE) if meta["shapes_plan"] else (RUN, COMPARE))
            if seen.setdefault(f.name, (f.default, opt)) != (f.default, opt):
                raise TypeError(f"option {f.name} is declared differently by {algorithm.name} and another algorithm")
    return [(name, opt.kind, field(default=default, metadata={"option": opt}))
            for name, (default, opt) in seen.items()]


RunConfig = make_dataclass("RunConfig", algorithm_fields(), bases=(CommonConfig,))
RunConfig.__doc__ = "Everything one run needs, each algorithm's own options included; checked by validate()."


def described() -> List[Tuple[str, Option, Any]]:
    """(field name, Option, default) of every described RunConfig field, in order."""
    out = []
    for f in fields(RunConfig):
        if "option" in f.metadata:
            out.append((f.name, f.metadata["option"], None if f.default is MISSING else f.default))
    return out


def flag_of(name: str, opt: Option) -> str:
    """--name-with-dashes, or the option's own flag."""
    return opt.flag or "--" + name.replace("_", "-")


def yaml_key(name: str, opt: Option) -> str:
    """The compare-config key of a field."""
    return opt.yaml_key or name


def yaml_keys() -> List[str]:
    """Every key a compare config may set (plus 'label')."""
    return [yaml_key(n, o) for n, o, _ in described() if o.yaml] + ["label"]


def add_arguments(parser, command: str, skip: Iterable[str] = ()) -> None:
    """argparse arguments of every field the command takes (types are checked later, in one place)."""
    for name, opt, default in described():
        if command not in opt.commands or name in skip:
            continue
        text = (opt.help + (f" ({' | '.join(opt.choices)})" if opt.choices else "")).replace("%", "%%")  # argparse
        if opt.kind is bool:
            parser.add_argument(flag_of(name, opt), dest=name, action="store_true", help=text)
        else:
            parser.add_argument(flag_of(name, opt), dest=name, required=opt.required, help=text,
                                default=None if opt.required else default,
                                metavar=name.upper() if opt.choices is None else None)


def from_args(args, command: str, **overrides) -> RunConfig:
    """A RunConfig from parsed CLI arguments (strings converted and checked by check_values)."""
    values = {name: getattr(args, name) for name, opt, _ in described()
              if command in opt.commands and hasattr(args, name)}
    values.update(overrides)
    return RunConfig(**coerce(values, lambda n: flag_of(n, option_of(n))))


def option_of(name: str) -> Option:
    """The Option of a field."""
    return next(o for n, o, _ in described() if n == name)


def coerce(values: Mapping[str, Any], label: Callable[[str], str], strict: bool = False) -> Dict[str, Any]:
    """Convert option values to their field types. CLI strings convert; with strict (YAML), only a value of
    the right type (an int for a float, a number for bw) is accepted."""
    out = {}
    for name, value in values.items():
        opt = option_of(name)
        out[name] = convert(value, opt, label(name), strict)
    return out


def convert(value, opt: Option, label: str, strict: bool):
    """One value converted to opt.kind, or OptionError naming the option and the expected type."""
    if value is None:
        return None
    kind = opt.kind
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise OptionError(f"{label} must be true or false, not {value!r}")
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and not strict:
            try:
                return int(value)
            except ValueError:
                pass
        raise OptionError(f"{label} must be an integer, not {value!r}")
    if kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str) and not strict:
            try:
                return float(value)
            except ValueError:
                pass
        raise OptionError(f"{label} must be a number, not {value!r}")
    if isinstance(value, int) and not isinstance(value, bool) and opt.choices is None:  # rto_min: 250 in YAML
        return str(value)
    if isinstance(value, float) and opt.parse is None and opt.choices is None:
        return f"{value:g}"  # bw: 2.5 in YAML
    if not isinstance(value, str):
        raise OptionError(f"{label} must be a string, not {value!r}")
    return value


def check_values(cfg: RunConfig, label: Callable[[str], str] = None, only: Optional[str] = None) -> None:
    """Every field's type, finiteness, choices and range (OptionError naming the first bad one); with `only`,
    just the fields that command takes."""
    label = label or (lambda n: flag_of(n, option_of(n)))
    for name, opt, _ in described():
        if only is not None and only not in opt.commands:
            continue
        value = getattr(cfg, name)
        if value is None:
            if opt.required:
                raise OptionError(f"{label(name)} is required")
            continue
        value = convert(value, opt, label(name), strict=False)
        setattr(cfg, name, value)
        if opt.choices is not None and value not in opt.choices:
            raise OptionError(f"{label(name)} {value} is unknown: valid are {', '.join(opt.choices)}")
        if opt.kind in (int, float):
            if not math.isfinite(value):
                raise OptionError(f"{label(name)} {value} is not a finite number")
            low_ok = opt.low is None or (value > opt.low if opt.low_open else value >= opt.low)
            if not low_ok or (opt.high is not None and value > opt.high):
                lo = "(" if opt.low_open else "["
                raise OptionError(f"{label(name)} {value:g} is out of range: give a value in {lo}{opt.low:g}, "
                                  f"{opt.high:g}]")
        if opt.parse is not None:
            try:
                opt.parse(value)
            except ValueError as exc:
                raise OptionError(str(exc)) from None


@dataclass(frozen=True)
class Checked:
    """What validation learned: the topology, bandwidth per level, the algorithm and its servers."""

    topo: Topology
    bw: Tuple[float, ...]
    algorithm: object
    servers: int
    contributors: Tuple[int, ...]
    impairment: Impairment = None


def cluster_servers(cfg: RunConfig) -> List[str]:
    """The machines an emulation spans: [] for this one only, else 'localhost' then the --cluster servers."""
    return parse_servers(cfg.cluster) if cfg.cluster else []


def check_topology(spec: str, emulated: bool) -> Topology:
    """Parse a topology; emulated networks (and local runs, one process per host) stay within the host cap."""
    topo = parse(spec)
    if emulated and len(topo.hosts) > MAX_EMULATED_HOSTS:
        raise OptionError(f"{topo.spec} has {len(topo.hosts)} hosts: emulation supports at most "
                          f"{MAX_EMULATED_HOSTS} on one machine (dmlbed theory takes any size)")
    return topo


def userspace_switch(cfg: RunConfig, emulated: bool) -> bool:
    """Whether the run's switch is userspace Open vSwitch (which needs its own memory), not the kernel module."""
    return emulated and not cfg.local and (cfg.datapath == "user" or
                                           (cfg.datapath == "auto" and choose_datapath("auto") == "user"))


def validate(cfg: RunConfig, label: Callable[[str], str] = None, emulated: bool = True,
             workers: bool = True) -> Checked:
    """Check a run before anything starts: values, topology (host cap), bandwidth, algorithm and its options,
    model and data, and (when real worker processes will run) memory.
    Raises OptionError / TopologyError / PlanError / ModelError (all ValueErrors)."""
    label = label or (lambda n: flag_of(n, option_of(n)))
    check_values(cfg, label)
    topo = check_topology(cfg.topology, emulated)
    controller_choice(cfg, label)
    if cfg.local and cfg.cluster:
        raise OptionError(f"{label('local')} runs without emulation and {label('cluster')} emulates across machines: "
                          f"give one of them")
    bw = parse_bandwidth(cfg.bw, topo)
    impairment = check_impairment(cfg, topo, emulated, label)
    if emulated:
        check_mtu(cfg, label)
    algorithm = get_algorithm(cfg.algo)
    check_algorithm_options(cfg, algorithm, label)
    algorithm.check(topo, cfg.servers, algorithm_options(cfg), cfg.codec)
    if cfg.overlap:
        check_overlap(cfg, algorithm, label)
    check_training(cfg, algorithm, label)
    shape = input_shape(cfg.model)
    check_data(cfg.data, shape)
    if workers:
        check_memory(len(topo.hosts), parameter_count_of(cfg.model) * 4, userspace_switch(cfg, emulated),
                     start=rank_start())
    if cfg.calibration:
        emulated_run = emulated and not cfg.local
        load_calibration(cfg.calibration, topo.spec, bw, cfg.dilation if emulated_run else None,
                         cfg.mtu if emulated_run else None)
    servers = algorithm.resolve_servers(cfg.servers)
    return Checked(topo, bw, algorithm, servers, tuple(algorithm.contributors(topo, servers)), impairment)


def check_training(cfg: RunConfig, algorithm, label: Callable[[str], str]) -> None:
    """OptionError for an optimizer setting the algorithm's workers do not use, or a curve without held-out data."""
    defaults = {name: default for name, _, default in described()}
    changed = [n for n in ("momentum", "weight_decay", "lr_schedule") if getattr(cfg, n) != defaults[n]]
    if changed and not algorithm.worker_optimizer:
        raise OptionError(f"{label(changed[0])} applies to algorithms whose workers step an optimizer ("
                          f"{', '.join(names_with(lambda a: a.worker_optimizer))}), not {algorithm.name}: its "
                          f"servers apply plain SGD as its paper does")
    if cfg.eval_every and cfg.data == "synthetic":
        raise OptionError(f"{label('eval_every')} measures held-out accuracy: give a real data set with "
                          f"{label('data')} (digits or mnist:PATH), not synthetic")


def check_overlap(cfg: RunConfig, algorithm, label: Callable[[str], str]) -> None:
    """OptionError unless the algorithm can synchronize DDP's buckets and every rank trains."""
    if not algorithm.overlaps:
        raise OptionError(f"{label('overlap')} runs DDP communication hooks: {algorithm.name} has none (valid: "
                          f"{', '.join(names_with(lambda a: a.overlaps))})")
    if algorithm.resolve_servers(cfg.servers):
        raise OptionError(f"{label('overlap')} needs every rank to train (DDP ranks): {label('servers')} "
                          f"{cfg.servers} gives dedicated servers")


def check_impairment(cfg: RunConfig, topo: Topology, emulated: bool, label: Callable[[str], str] = None) -> Impairment:
    """The per-level delay and loss asked for; an emulated one needs netem in this kernel, a loopback run
    has no links to delay."""
    label = label or (lambda n: flag_of(n, option_of(n)))
    impairment = parse_impairment(cfg.delay, cfg.loss, topo)
    if not impairment.active or not emulated:
        return impairment
    if cfg.local:
        raise OptionError(f"{label('delay')}/{label('loss')} act on emulated links: {label('local')} has none")
    require_netem(label)
    return impairment


def check_mtu(cfg: RunConfig, label: Callable[[str], str] = None) -> None:
    """OptionError when the emulated links cannot carry --mtu: the userspace switch's AF_XDP ports take frames
    up to AFXDP_MAX_MTU, Mininet's GRE tunnels 1450 bytes."""
    label = label or (lambda n: flag_of(n, option_of(n)))
    if cfg.local:
        return
    if cfg.cluster and cfg.tunnel == "gre" and cfg.mtu > GRE_MAX_MTU:
        raise OptionError(f"{label('mtu')} {cfg.mtu} does not fit {label('tunnel')} gre: Mininet's GRE tunnels carry "
                          f"frames up to {GRE_MAX_MTU} bytes (valid {MIN_MTU}-{GRE_MAX_MTU}; {label('tunnel')} ssh "
                          f"carries any)")
    if cfg.mtu > AFXDP_MAX_MTU and cfg.datapath != "kernel":  # auto/user: never refused by choose_datapath
        if choose_datapath(cfg.datapath) == "user":
            raise OptionError(f"{label('mtu')} {cfg.mtu} is more than the userspace switch's AF_XDP ports carry "
                              f"(a 4 KiB frame): valid {MIN_MTU}-{AFXDP_MAX_MTU} here, up to {MAX_MTU} with the "
                              f"kernel datapath (the openvswitch module)")


def require_netem(label: Callable[[str], str]) -> None:
    """OptionError unless this kernel can create a netem qdisc (delay and loss need it)."""
    if os.geteuid() != 0:
        return  # probing needs root; the emulated run itself is refused without it
    if not netem_available():
        raise OptionError(f"{label('delay')}/{label('loss')} need the kernel's netem qdisc (sch_netem), which this "
                          f"kernel lacks (a stock Debian kernel has it): only bandwidth shaping ({label('bw')}) is "
                          f"available here; `dmlbed simulate --delay` and `dmlbed theory --delay` model the delay")


def check_algorithm_options(cfg: RunConfig, algorithm, label: Callable[[str], str] = None) -> None:
    """OptionError when an option only other algorithms read is changed from its default."""
    label = label or (lambda n: flag_of(n, option_of(n)))
    for name, opt, default in described():
        if opt.algorithm_option and getattr(cfg, name) != default and name not in algorithm.option_names:
            users = names_with(lambda a: name in a.option_names)
            raise OptionError(f"{label(name)} applies to {', '.join(users)} only, not {algorithm.name}")


def tcp_settings(cfg: RunConfig) -> TcpSettings:
    """The emulated hosts' TCP and queue settings a configuration asks for. Under time dilation F the kernel's
    timers are not stretched, so the minimum RTO is set F times longer: --rto-min is in emulated time (5 ms
    real at F = 6 is 0.8 ms emulated, and its spurious timeouts idled the links). Left to the rate (auto), both are
    sized by the network from the rates it shapes, which are real rates already."""
    rto_min, tsq = option_of("rto_min").parse(cfg.rto_min), option_of("tsq").parse(cfg.tsq)
    return TcpSettings(congestion_control=cfg.tcp_cc, quickack=cfg.quickack, tsq_bytes=tsq,
                       rto_min_ms=None if rto_min is None else round(rto_min * cfg.dilation),
                       host_queue_packets=cfg.host_queue, switch_queue_packets=cfg.queue,
                       socket_buffer_bytes=cfg.socket_buffer, mtu=cfg.mtu)


def link_goodput(cfg: RunConfig) -> float:
    """Payload share of a shaped rate: --goodput when given, else full frames of --mtu."""
    return cfg.goodput if cfg.goodput is not None else goodput(cfg.mtu)


def algorithm_options(cfg: RunConfig) -> Dict[str, Any]:
    """The values of the options this configuration's algorithm reads (its descriptor types them)."""
    return {name: getattr(cfg, name) for name in get_algorithm(cfg.algo).option_names}


def did_you_mean(key: str, valid: Sequence[str]) -> str:
    """' (did you mean X?)' for a near miss, else ''."""
    close = difflib.get_close_matches(key, valid, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def from_mapping(entry: Mapping[str, Any], where: str, **fixed) -> RunConfig:
    """A RunConfig from a compare-config mapping (YAML keys, strict types); OptionError names `where`."""
    keys = yaml_keys()
    by_key = {yaml_key(n, o): n for n, o, _ in described() if o.yaml}
    values = {}
    for key, value in entry.items():
        if key == "label":
            continue
        if key not in by_key:
            raise OptionError(f"{where}: unknown key '{key}'{did_you_mean(str(key), keys)}: valid are "
                              f"{', '.join(sorted(keys))}")
        values[by_key[key]] = value
    values = coerce(values, lambda n: f"{where}: {yaml_key(n, option_of(n))}", strict=True)
    values.update(fixed)
    return RunConfig(**values)


__all__ = ["RunConfig", "Option", "OptionError", "Checked", "validate", "add_arguments", "from_args",
           "from_mapping", "algorithm_options", "yaml_keys", "check_topology", "MAX_EMULATED_HOSTS", "TopologyError"]


def controller_choice(cfg: RunConfig, label: Callable[[str], str] = None) -> ControllerChoice:
    """The controller an emulated run asked for; OptionError for one a loopback run or several machines cannot
    use."""
    label = label or (lambda n: flag_of(n, option_of(n)))
    try:
        choice = parse_controller(cfg.controller, cfg.controller_app)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    if not choice.own and cfg.local:
        raise OptionError(f"{label('controller')} and {label('controller_app')} control emulated switches: "
                          f"{label('local')} has none")
    if not choice.own and cfg.cluster:
        raise OptionError(f"{label('cluster')} runs dmlbed's own controller only (switches on every server must "
                          f"reach it)")
    return choice
