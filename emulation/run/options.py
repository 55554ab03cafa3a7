"""The option table: every option of every `dmlbed` command, each with its help, type, choices, range and group, in
one place; argparse flags, compare-config keys, JSON Schemas and the CLI reference are derived from it. A RunConfig
holds the options of a run-shaped job (the table's run options and each algorithm's own, declared by its
descriptor in workloads/algorithms); a command takes named groups of them plus options of its own."""

from __future__ import annotations

import difflib
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from emulation.core.aqm import AQM_HELP, parse_aqm
from emulation.core.compute import COMPUTE_HELP, SLOW_HELP, parse_compute, parse_slow
from emulation.core.background import BACKGROUND_HELP, check_format as check_background_format
from emulation.core.events import EVENT_HELP, check_format as check_event_format
from emulation.core.link_rates import LINK_RATE_HELP, check_format as check_link_rate_format
from controllers.flow_rules import FAILOVER_MODES, ROUTINGS
from emulation.core.controller_choice import parse_controller
from emulation.core.placement import TUNNELS, parse_servers
from emulation.core.tcp import (AFXDP_MAX_MTU, CONGESTION_CONTROLS, MAX_MTU, MIN_MTU, RTO_DRAINS, RTO_MIN_FLOOR_MS,
                                TSQ_MAX_BYTES, TSQ_MIN_BYTES, TSQ_TIME_S, TcpSettings, rto_min_for_rate)
from emulation.core.terngrad_model import SCALINGS
from emulation.core.topology import HOSTS_HELP, MAX_HOSTS, TOPOLOGY_HELP, check_hosts_format
from emulation.core.units import BYTES, EXAMPLES, MEBIBYTES, MICROSECONDS, MILLISECONDS, SECONDS, Quantity
from emulation.simulation.flows import FLOW_METHODS, GRANULARITIES
from emulation.simulation.routes import ECMP_MODES
from workloads.algorithms import ALGORITHMS
from workloads.option_fields import option_kind
from workloads.codecs import COMPRESSORS
from workloads.overlap import DDP_BUCKET_MB
from emulation.run.forkclient import RANK_STARTS
from emulation.simulation.group_placement import FORMAT as PLACEMENT_FORMAT, check_placement_format
from workloads.parallel_layout import FORMAT as LAYOUT_FORMAT, check_layout_format
from workloads.pipeline_schedule import SCHEDULES
from workloads.schedule import SCHEDULE_HELP, parse_schedule

MODES = ("emulate", "simulate", "theory")  # the back ends of a compare row (emulation/backends)

# The groups of run options; a command takes some of them (emulation/commands), a compare config every one.
TOPOLOGY = "topology"                # the network's shape
LINKS = "links"                      # rates, delay, frame size and routing of the links (every command with links)
NETWORK = "emulated network"         # the emulated hosts' TCP, queues, loss, switch datapath, several machines
CONTROLLER = "controller"            # which OpenFlow controller runs the switches
RANKS = "ranks"                      # processes on the hosts: time limits, loopback instead of emulation
DILATION = "time dilation"           # time dilation and the ranks' sockets
SYNCHRONIZATION = "synchronization"  # the algorithm, its plan-shaping options, the model and the device
PLAN_INPUTS = "plan inputs"          # dedicated servers and a calibration (plans and their models)
BATCH = "batch"
ITERATIONS = "iterations"
SEED = "seed"                        # the seed of weights, data and drawn compute times
TRAINING = "training"                # data, optimizer, evaluation and the algorithms' training-only options
FLOW_MODEL = "flow model"            # the flow-level simulation's settings
APP_B = "TernGrad App. B"            # TernGrad's own performance model (theory)
MATRIX = "matrix"                    # what only a compare config's rows set
OUTPUT = "output"                    # where results go
REPLACE = "replace"                  # replacing earlier results
WAIT = "wait"                        # waiting for the machine's one emulated network
BACKGROUND = "background traffic"    # flows injected beside the job
EVENTS = "network events"            # links that change during the run
PARALLEL = "parallel job"            # a transformer under tensor, pipeline and data parallelism
GROUPS = (TOPOLOGY, LINKS, BACKGROUND, NETWORK, CONTROLLER, RANKS, DILATION, SYNCHRONIZATION, PARALLEL, PLAN_INPUTS,
          BATCH, ITERATIONS, SEED, TRAINING, FLOW_MODEL, APP_B, MATRIX, OUTPUT, REPLACE, WAIT)
COMMAND_OWN = "command"              # the group of an option one command declares for itself


class OptionError(ValueError):
    """A bad option value: the message names the option and what is valid."""


@dataclass(frozen=True)
class Option:
    """How an option is given and checked.

    kind: int, float, str, bool or list (a repeatable flag); low/high: inclusive range (low_open: low itself
    excluded); parse: extra format check of a str value (raises ValueError); group: the named group it belongs to;
    flag: its flag when not --name-with-dashes; yaml_key: its compare-config key (yaml False: not one);
    algorithm_option: declared by algorithms' descriptors, and only those algorithms may change it from its default;
    codec_option: the same for codecs' descriptors (workloads/codecs/).
    A command's own option also has its name and default, and may be positional (nargs as argparse's), or one of a
    set of flags of which exactly one is given (exclusive). quantity: a time or a size, a plain number in its own unit
    or one with a unit (5ms, 16K; emulation/core/units.py).
    """

    help: str
    kind: type = str
    choices: Optional[Tuple[str, ...]] = None
    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    parse: Optional[Callable[[str], object]] = None
    group: str = TRAINING
    flag: Optional[str] = None
    yaml_key: Optional[str] = None
    yaml: bool = True
    required: bool = False
    algorithm_option: bool = False
    codec_option: bool = False
    name: Optional[str] = None
    default: Any = None
    positional: bool = False
    nargs: Optional[str] = None
    metavar: Optional[str] = None
    exclusive: Optional[str] = None
    quantity: Optional[Quantity] = None
    alias: Optional[str] = None  # the flag's old spelling (with a unit in its name), still taken, with a note
    per_command: Tuple[Tuple[Tuple[str, ...], str], ...] = ()  # ((commands, help there), ...): its wording where
    # the general one would be wrong; '{command}' in any help is the command's name


def command_option(name: str, help: str, default: Any = None, **kwargs) -> Option:
    """An option one command declares for itself (not a RunConfig field); yaml: never a compare-config key."""
    return Option(help=help, name=name, default=default, group=COMMAND_OWN, yaml=False, **kwargs)


def auto_or_int(flag: str, low: int, high: int, quantity: Quantity) -> Callable[[str], Optional[int]]:
    """A parser of 'auto' (None: sized to the rate) or a whole number of the quantity's unit in [low, high], plain or
    with a unit (ValueError naming flag)."""
    def parse(value: str) -> Optional[int]:
        if str(value) == "auto":
            return None
        try:
            number = quantity.parse(value)
        except ValueError:
            number = None
        if number is None or number != int(number) or not low <= number <= high:
            raise ValueError(f"{flag} {value} is not valid: give auto or a whole number of {quantity.named} in "
                             f"[{low}, {high}], plain or with a unit ({EXAMPLES[quantity.kind]})")
        return int(number)
    return parse


def run_option(default, help: str, **kwargs) -> Any:
    """A RunConfig field described by an Option."""
    return field(default=default, metadata={"option": Option(help=help, **kwargs)})


@dataclass
class CommonConfig:
    """The options every algorithm shares (RunConfig adds each algorithm's own)."""

    topology: str = run_option(None, TOPOLOGY_HELP, flag="--topo",
                           yaml_key="topo", required=True, group=TOPOLOGY)
    algo: str = run_option(None, "synchronization algorithm", choices=tuple(ALGORITHMS), required=True,
                       group=SYNCHRONIZATION)
    model: str = run_option("lenet5", "lenet5 | alexnet | vgg19 | vgg19-22k | resnet50 | googlenet | inception_v3 | "
                        "mlp:SIZE (e.g. mlp:12.5MB) | package.module:factory (your nn.Module with an input_shape)",
                        group=SYNCHRONIZATION)
    bw: str = run_option("100", "Mbit/s for every link, or one value per link level (e.g. 1000,100,200); "
                     "with a unit as tc writes it: 1Gbit, 500Mbit; emulated 2 to 1000, in theory and simulate up "
                     "to 1.6 Tbit/s",
                     group=LINKS)
    link_rate: str = run_option("", LINK_RATE_HELP, parse=check_link_rate_format, group=LINKS)
    routing: str = run_option("ecmp", "how a switch with several up ports (Fat-Tree, leaf-spine) picks one: ecmp (by "
                          "each connection's TCP ports, so flows can collide) or dmodk (by the destination, "
                          "D-mod-k: each destination through one top switch, no collisions in an all-to-all)",
                          choices=ROUTINGS, group=LINKS)
    background: list = run_option((), BACKGROUND_HELP, kind=list, parse=check_background_format, group=BACKGROUND,
                                  metavar="FLOW")
    event: list = run_option((), EVENT_HELP, kind=list, parse=check_event_format, group=EVENTS, metavar="LINK=RATE@WHEN")
    share_hosts: bool = run_option(False, "background flows may start or end on hosts a job runs on (else they run "
                                          "between hosts no job uses)", kind=bool, group=BACKGROUND)
    servers: int = run_option(0, "dedicated servers (ranks 0..M-1): ps (0 = peer-to-peer), ibatch and pflow (default 1)",
                          kind=int, low=0, high=MAX_HOSTS, group=PLAN_INPUTS)
    parallel: str = run_option("", "a transformer job (--model gpt:... or a preset) under tensor, pipeline and data "
                               "parallelism at once: " + LAYOUT_FORMAT + " (ranks numbered as Megatron-LM numbers "
                               "them, tensor fastest, unless order says otherwise; rank r on the job's host r)",
                               parse=check_layout_format, group=PARALLEL)
    placement: str = run_option("", "--parallel: where one kind's groups sit, ranks numbered to match: "
                                    + PLACEMENT_FORMAT + " (a rack: the switch a host links to), e.g. tp-in-rack "
                                    "or tp-across-racks; checked against the job's hosts", parse=check_placement_format,
                                group=PARALLEL)
    micro_batches: int = run_option(1, "--parallel: micro-batches per iteration, the pipeline's m (--batch, each "
                                       "replica's sequences, is split into them)", kind=int, low=1, high=4096,
                                    group=PARALLEL)
    pipeline: str = run_option("1f1b", "--parallel: the pipeline's schedule: gpipe (every forward, then every "
                                       "backward) or 1f1b (PipeDream-Flush)", choices=SCHEDULES, flag="--schedule",
                               yaml_key="schedule", group=PARALLEL)
    batch: int = run_option(32, "sub-minibatch per worker", kind=int, low=1, high=4096, group=BATCH)
    iters: int = run_option(10, "iterations", kind=int, low=1, high=100000, group=ITERATIONS)
    data: str = run_option("synthetic", "synthetic | digits | mnist:PATH", group=TRAINING)
    lr: float = run_option(0.01, "learning rate", kind=float, low=0, high=10, low_open=True, group=TRAINING)
    momentum: float = run_option(0.0, "SGD momentum of the workers' optimizer", kind=float, low=0, high=0.999, group=TRAINING)
    weight_decay: float = run_option(0.0, "SGD weight decay (L2) of the workers' optimizer", kind=float, low=0, high=1, group=TRAINING)
    lr_schedule: str = run_option("constant", "learning-rate schedule: " + SCHEDULE_HELP, parse=parse_schedule, group=TRAINING)
    eval_every: int = run_option(0, "measure held-out accuracy every N iterations, a curve in summary.json "
                             "(accuracy_curve); 0: once at the end. Needs a real data set (digits, mnist:PATH)",
                             kind=int, low=0, high=100000, group=TRAINING)
    seed: int = run_option(0, "seed of weights, data and drawn compute times", kind=int, low=0, high=2 ** 31 - 1,
                           group=SEED)
    timeout: float = run_option(120.0, "seconds any blocking step may take", kind=float, low=1, high=3600,
                     group=RANKS, quantity=SECONDS)
    codec: str = run_option("none", "gradient compressor: " + "; ".join(f"{n} ({c.summary})" for n, c in
                                                                          COMPRESSORS.items() if n != "none"),
                        choices=tuple(COMPRESSORS), group=SYNCHRONIZATION)
    compute_time: str = run_option("0", "emulate a device: forward/backward takes this many seconds (0 = real time): "
                               + COMPUTE_HELP, parse=parse_compute, group=SYNCHRONIZATION,
                               per_command=((("simulate", "theory"), "a device's forward/backward time per iteration, "
                                             "seconds, added to the modelled iteration (0: none): " + COMPUTE_HELP),))
    slow: str = run_option("", "persistent slow hosts: " + SLOW_HELP, parse=parse_slow, group=SYNCHRONIZATION)
    hosts: str = run_option("", HOSTS_HELP, parse=check_hosts_format, group=SYNCHRONIZATION)
    overlap: bool = run_option(False, "synchronize during backward as PyTorch DDP does: buckets of --bucket, each "
                           "synchronized by the algorithm's DDP communication hook as soon as it is ready", kind=bool,
                           group=SYNCHRONIZATION)
    bucket_mb: float = run_option(DDP_BUCKET_MB, "--overlap: DDP's bucket size, MiB (bucket_cap_mb)", kind=float,
                              low=0, high=4096, low_open=True, group=SYNCHRONIZATION, quantity=MEBIBYTES, flag="--bucket",
                              alias="--bucket-mb")
    delay: str = run_option("0", "one-way delay of every link, ms (or 5ms, 200us), or one value per link level (netem "
                        "under the shaping; the kernel must have netem)",
                        group=LINKS, per_command=((("simulate", "theory"), "one-way delay of every link, ms (or 5ms, "
                                                   "200us), or one value per link level: every message takes it once "
                                                   "per link its path crosses"),))
    loss: str = run_option("0", "packet loss of every link, percent (or 1%), or one value per link level (netem)",
                       group=NETWORK)
    dilation: float = run_option(1.0, "time dilation F: links shaped at bw/F, compute stretched by F, every time "
                             "reported divided by F (for rates a 2-core machine cannot emulate in real time)",
                             kind=float, low=1, high=100, group=DILATION)
    tcp_cc: str = run_option(TcpSettings.congestion_control, "TCP congestion control of every emulated host",
                         choices=CONGESTION_CONTROLS, group=NETWORK)
    rto_min: str = run_option("auto", "minimum TCP retransmission timeout on host routes, ms (0 = the kernel's 200 ms; "
                          f"auto: {RTO_DRAINS:g} drains of a full switch port buffer at the slowest link's rate, "
                          f"at least {RTO_MIN_FLOOR_MS} ms: {rto_min_for_rate(25, TcpSettings.switch_queue_packets)} "
                          f"ms at 25 Mbit/s, {rto_min_for_rate(100, TcpSettings.switch_queue_packets)} at 100)",
                          parse=auto_or_int("--rto-min", 0, 1000, MILLISECONDS), group=NETWORK,
                          quantity=MILLISECONDS)
    quickack: bool = run_option(TcpSettings.quickack, "hosts ACK every segment at once (no delayed ACKs) on their routes",
                            kind=bool, group=NETWORK)
    tsq: str = run_option("auto", "TCP Small Queues bytes per socket in a host's NIC queue (auto: "
                      f"{TSQ_TIME_S * 1000:g} ms of the host's NIC rate, {TSQ_MIN_BYTES}-{TSQ_MAX_BYTES} bytes)",
                      parse=auto_or_int("--tsq", TSQ_MIN_BYTES, 64 << 20, BYTES), quantity=BYTES,
                      group=NETWORK)
    socket_buffer: int = run_option(TcpSettings.socket_buffer_bytes, "SO_SNDBUF/SO_RCVBUF of every connection, bytes",
                                kind=int, low=16384, high=64 << 20, group=DILATION, quantity=BYTES)
    cpu_hog: int = run_option(0, "an emulator fault on purpose: busy processes on this machine's cores while the "
                          "ranks train (0: none), to see the fidelity verdict catch a machine short of CPU",
                          kind=int, low=0, high=64, group=DILATION)
    host_queue: int = run_option(TcpSettings.host_queue_packets, "packets in a host's egress (NIC) queue", kind=int,
                             low=10, high=100000, group=NETWORK)
    queue: int = run_option(TcpSettings.switch_queue_packets, "packets of switch port buffer (switch-side queues)",
                        kind=int, low=10, high=100000, group=NETWORK)
    aqm: str = run_option("none", "switch port buffers' queue discipline: " + AQM_HELP + "; the hosts then ask for "
                      "ECN (tcp_ecn=1); needs the kernel's sch_red", parse=parse_aqm, group=NETWORK)
    mtu: int = run_option(TcpSettings.mtu, "MTU of every emulated link, bytes (the userspace switch pays per packet: "
                      f"larger frames keep it faithful; at most {AFXDP_MAX_MTU} on its AF_XDP ports)", kind=int,
                      low=MIN_MTU, high=MAX_MTU, group=LINKS, quantity=BYTES)
    datapath: str = run_option("auto", "Open vSwitch datapath (auto: kernel where the module exists)",
                           choices=("auto", "kernel", "user"), group=NETWORK)
    controller: str = run_option("dmlbed", "the OpenFlow controller: dmlbed (its proactive Ryu app) or remote:IP:PORT "
                             "(one you started, as mn --controller remote)", parse=lambda t: parse_controller(t, None),
                             group=CONTROLLER, yaml=False)
    controller_app: str = run_option(None, "your Ryu app (FILE.py), run by dmlbed in place of its own",
                                 parse=lambda t: parse_controller(None, t), group=CONTROLLER, yaml=False)
    failover: str = run_option("fast", "when a link goes down: fast (dmlbed's controller pre-installs backup paths, "
                           "OpenFlow fast-failover groups the switches take in the data plane, then reroutes) or "
                           "controller (only the controller's reroute on the port-status message)",
                           choices=FAILOVER_MODES, group=CONTROLLER)
    shape_ingress: bool = run_option(False, "userspace datapath: also shape switch->host traffic (a bridging namespace "
                                        "per host link; incast into one host needs it)",
                                 kind=bool, group=NETWORK)
    cluster: str = run_option(None, "emulate across machines: SERVER[,SERVER...] reached over SSH, this machine "
                          "first (Mininet Cluster Edition; docs/how-to/several-machines.md)", parse=parse_servers,
                          group=NETWORK)
    tunnel: str = run_option("ssh", "--cluster: links between machines as SSH Ethernet tunnels (any kernel) or GRE "
                         "(faster; needs ip_gre)", choices=TUNNELS, group=NETWORK)
    calibration: str = run_option(None, "a `dmlbed calibrate` calibration.json of this topology and rate: theory, bench "
                              "and simulate add its fitted latency-bandwidth model beside the paper's formula",
                              group=PLAN_INPUTS)
    tg_gpus: int = run_option(1, "theory --codec terngrad (TernGrad App. B): GPUs per machine i (the hosts are the j "
                          "machines)", kind=int, low=1, high=64, group=APP_B)
    tg_step_s: float = run_option(0.0, "theory --codec terngrad: T(1,1,K,|g|), one GPU's profiled time for a mini-batch "
                              "of --batch, seconds (default: --compute-time)", kind=float, low=0, high=3600,
                              group=APP_B, quantity=SECONDS, flag="--tg-step", alias="--tg-step-s")
    tg_gpu_gbps: float = run_option(100.0, "theory --codec terngrad: GPU-to-GPU bandwidth inside a machine C_gwd, Gbit/s",
                                kind=float, low=0, high=10000, low_open=True, group=APP_B)
    tg_cpu_gbps: float = run_option(100.0, "theory --codec terngrad: CPU-GPU bandwidth C_cwd, Gbit/s", kind=float, low=0,
                                high=10000, low_open=True, group=APP_B)
    tg_latency_us: float = run_option(0.0, "theory --codec terngrad: network latency C_ncost, microseconds", kind=float,
                                  low=0, high=1e6, group=APP_B, quantity=MICROSECONDS, flag="--tg-latency",
                                  alias="--tg-latency-us")
    tg_scaling: str = run_option("weak", "theory --codec terngrad: weak (--batch per GPU, eq. 17-18) or strong (--batch "
                             "in all, eq. 15-16) scaling", choices=SCALINGS, group=APP_B)
    tg_ternarize_last: bool = run_option(False, "theory --codec terngrad: ternarize the last layer too (the paper "
                                     "keeps it fp32)", kind=bool, group=APP_B)
    mode: str = run_option("emulate", "emulate (real workers on Mininet), simulate (flow-level, any size) or theory (the "
                       "closed forms; TernGrad's App. B where tg_step_s is given)",
                       choices=MODES, group=MATRIX)
    latency_us: float = run_option(0.0, "simulate: latency of every message, microseconds", kind=float, low=0,
                               high=1e6, group=FLOW_MODEL, quantity=MICROSECONDS, flag="--latency",
                               alias="--latency-us")
    goodput: float = run_option(None, "simulate: share of a link's shaped rate that carries payload (default: full "
                            "frames of --mtu, TCP/IP and Ethernet headers taken off: 3448 of 3514 bytes at 3500)",
                            kind=float, low=0, high=1, low_open=True, group=FLOW_MODEL)
    ecmp: str = run_option("spread", "simulate: ECMP as an even split of every flow over its equal-cost paths (spread) "
                       "or one hashed path per flow, as a switch picks (hash)", choices=ECMP_MODES,
                       group=FLOW_MODEL)
    ecmp_ports: str = run_option(None, "simulate: an emulated run's folder whose connections' TCP ports (so their "
                             "ECMP paths) the simulation reuses, so both see the same collisions; in compare, "
                             "'emulated' takes the emulated row of the same label", group=FLOW_MODEL)
    granularity: str = run_option("chunk", "simulate: data moves in the engine's chunks, each going on once its own "
                              "earlier steps are done (chunk), or in whole step messages, as the closed forms "
                              "assume (message)", choices=GRANULARITIES, group=FLOW_MODEL)
    flow_method: str = run_option("auto", "simulate: auto answers by steps (or by the recurrence over the plan's "
                                  "graph) where no link can ever be shared, exact and without one event per finish "
                                  "time, else by events; events answers by events whatever the plan (the model the "
                                  "others are checked against)", choices=FLOW_METHODS, group=FLOW_MODEL)
    out: str = run_option(None, "output folder (default: a new results/{command}/DATE-TIME, with "
                            "results/{command}/latest pointing at it)",
                      group=OUTPUT, yaml=False)
    rank_start: str = run_option(None, "how the ranks start: fork (from the rank fork server, which imports torch "
                                 "once) or exec (each rank its own interpreter); default: $DMLBED_RANK_START, else "
                                 "fork", choices=RANK_STARTS, group=RANKS)
    local: bool = run_option(False, "run the workers on 127.0.0.1 without emulation (no root; in a compare config, "
                             "a row whose claims do not depend on the network)", kind=bool, group=RANKS)
    force: bool = run_option(False, "replace the results of an earlier run in --out", kind=bool, group=REPLACE,
                         yaml=False)
    wait: bool = run_option(False, "wait for another run's emulated network instead of refusing", kind=bool,
                        group=WAIT, yaml=False)



def algorithm_fields() -> List[Tuple[str, type, Any]]:
    """(name, type, field) of every option an algorithm's or a codec's descriptor declares, as Options; an option
    two algorithms (or two codecs) share must be declared the same by both."""
    seen: Dict[str, Tuple[Any, Option]] = {}
    declared = [(a.name, a.options, "algorithm") for a in ALGORITHMS.values()] + \
        [(name, c.options, "codec") for name, c in COMPRESSORS.items()]
    for owner, options, kind in declared:
        for f in fields(options):
            meta = f.metadata
            opt = Option(help=meta["help"], kind=option_kind(f), choices=meta["choices"], low=meta["low"],
                         high=meta["high"], parse=meta["parse"], quantity=meta["quantity"],
                         algorithm_option=kind == "algorithm",
                         codec_option=kind == "codec", group=SYNCHRONIZATION if meta["shapes_plan"] else TRAINING)
            if seen.setdefault(f.name, (f.default, opt)) != (f.default, opt):
                raise TypeError(f"option {f.name} is declared differently by {owner} and another {kind}")
    return [(name, opt.kind, field(default=default, metadata={"option": opt}))
            for name, (default, opt) in seen.items()]


RunConfig = make_dataclass("RunConfig", algorithm_fields(), bases=(CommonConfig,))
RunConfig.__doc__ = "Everything one run-shaped job needs, each algorithm's own options included; checked once."
RunConfig.__module__ = __name__  # pickled by reference (a matrix row sent to another process)

Label = Callable[[str], str]


def described() -> List[Tuple[str, Option, Any]]:
    """(field name, Option, default) of every RunConfig field, in order."""
    return [(f.name, f.metadata["option"], None if f.default is MISSING else f.default)
            for f in fields(RunConfig) if "option" in f.metadata]


def in_groups(groups: Iterable[str]) -> List[Tuple[str, Option, Any]]:
    """described(), only the fields of these groups."""
    wanted = set(groups)
    return [(n, o, d) for n, o, d in described() if o.group in wanted]


def flag_of(name: str, opt: Option) -> str:
    """--name-with-dashes, or the option's own flag."""
    return opt.flag or "--" + name.replace("_", "-")


def option_of(name: str) -> Option:
    """The Option of a RunConfig field."""
    return next(o for n, o, _ in described() if n == name)


def flag_label(name: str) -> str:
    """How a message names a RunConfig field given on the command line: its flag."""
    return flag_of(name, option_of(name))


def yaml_key(name: str, opt: Option) -> str:
    """The compare-config key of a field."""
    return opt.yaml_key or name


def yaml_keys() -> List[str]:
    """Every key a compare config may set (plus 'label')."""
    return [yaml_key(n, o) for n, o, _ in described() if o.yaml] + ["label"]


def from_args(args, groups: Iterable[str], **overrides) -> RunConfig:
    """A RunConfig from parsed CLI arguments of these groups (strings converted; checked by validation)."""
    values = {name: getattr(args, name) for name, _, _ in in_groups(groups) if hasattr(args, name)}
    values.update(overrides)
    return RunConfig(**coerce(values, flag_label))


def coerce(values: Mapping[str, Any], label: Label, strict: bool = False) -> Dict[str, Any]:
    """Convert option values to their field types. CLI strings convert; with strict (YAML), only a value of
    the right type (an int for a float, a number for bw) is accepted."""
    return {name: convert(value, option_of(name), label(name), strict) for name, value in values.items()}


def convert(value, opt: Option, label: str, strict: bool):
    """One value converted to opt.kind, or OptionError naming the option and the expected type."""
    if value is None:
        return None
    kind = opt.kind
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise OptionError(f"{label} must be true or false, not {value!r}")
    if kind is list:
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return list(value)
        raise OptionError(f"{label} must be a list of strings, not {value!r}")
    if opt.quantity is not None and kind in (int, float) and isinstance(value, str):
        try:
            number = opt.quantity.parse(value)
        except ValueError:
            raise OptionError(f"{label} must be {opt.quantity.valid()}, not {value!r}") from None
        if kind is int and number != int(number):
            raise OptionError(f"{label} {value} is not a whole number of {opt.quantity.named}")
        return kind(number)
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
    if isinstance(value, float) and opt.choices is None:
        return f"{value:g}"  # bw: 2.5 in YAML
    if not isinstance(value, str):
        raise OptionError(f"{label} must be a string, not {value!r}")
    return value


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
