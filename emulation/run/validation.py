"""Validation in sections, each run once before anything starts and each returning what it resolved: option values,
the network (topology, rates, impairment, frame size, controller, machines), the synchronization (algorithm, its
options, servers), training (model, data, optimizer), the workers' memory and a calibration. A command runs the
sections it uses; a run-shaped job runs them all (validate). Every error is a ValueError naming the option."""

from __future__ import annotations

import math
import os
from dataclasses import fields, replace
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple

from emulation.core.aqm import parse_aqm
from emulation.core.calibration import load as load_calibration
from emulation.core.compute import FIXED, ComputeModel, compute_model, shown
from emulation.core.controller_choice import ControllerChoice, parse_controller
from emulation.core.impairment import Impairment, parse_impairment
from emulation.core.background import parse_background
from emulation.core.events import cut_off, parse_events
from emulation.core.link_rates import parse_link_rates
from emulation.core.placement import parse_servers
from emulation.core.tcp import AFXDP_MAX_MTU, MAX_MTU, MIN_MTU
from emulation.core.topology import Topology, job_view, parse, parse_bandwidth, parse_hosts
from emulation.net.kernel_probes import choose_datapath, netem_available, red_available
from emulation.run.forkclient import rank_start
from emulation.run.options import (Label, Option, OptionError, RunConfig, convert, described, flag_label, in_groups)
from emulation.run.resolution import (Checked, NetworkSettings, Synchronization, algorithm_options, codec_options,
                                      shaped_rates, tcp_settings)
from emulation.run.resources import BENCH_BUFFER_COPIES, afxdp_port_budget, check_memory
from workloads.algorithms import get as get_algorithm, names_with
from workloads.algorithms.base import Algorithm
from workloads.codecs import COMPRESSORS
from workloads.data import check_data
from workloads.models import input_shape, parameter_count_of

GRE_MAX_MTU = 1450  # Mininet's RemoteGRELink sets it on both ends
MAX_EMULATED_HOSTS = 256  # one machine: namespaces, veths and torch processes all share it


def check_value(value: Any, opt: Option, label: str) -> Any:
    """One value converted and checked against its option's choices, range and format (OptionError naming it)."""
    value = convert(value, opt, label, strict=False)
    if value is None:
        if opt.required:
            raise OptionError(f"{label} is required")
        return None
    if opt.choices is not None and value not in opt.choices:
        raise OptionError(f"{label} {value} is unknown: valid are {', '.join(opt.choices)}")
    if opt.kind in (int, float):
        if not math.isfinite(value):
            raise OptionError(f"{label} {value} is not a finite number")
        low_ok = opt.low is None or (value > opt.low if opt.low_open else value >= opt.low)
        if not low_ok or (opt.high is not None and value > opt.high):
            lo = "(" if opt.low_open else "["
            raise OptionError(f"{label} {value:g} is out of range: give a value in {lo}{opt.low:g}, {opt.high:g}]")
    if opt.parse is not None:
        try:
            for item in (value if opt.kind is list else [value]):
                opt.parse(item)
        except ValueError as exc:
            raise OptionError(str(exc)) from None
    return value


def check_values(cfg: RunConfig, label: Label = flag_label, groups: Optional[Iterable[str]] = None) -> None:
    """Every field's type, finiteness, choices and range (OptionError naming the first bad one); with groups, just
    the fields of those groups (what one command takes)."""
    for name, opt, _ in (described() if groups is None else in_groups(groups)):
        setattr(cfg, name, check_value(getattr(cfg, name), opt, label(name)))


def check_command_options(values: Mapping[str, Any], own: Sequence[Option]) -> Dict[str, Any]:
    """A command's own option values, converted and checked as RunConfig fields are."""
    out = {}
    for opt in own:
        value = values.get(opt.name)
        if opt.positional or opt.kind is list or value is None:
            out[opt.name] = value
            continue
        out[opt.name] = check_value(value, opt, opt.flag or "--" + opt.name.replace("_", "-"))
    return out


def check_topology(spec: str, emulated: bool, routing: str = "ecmp", label: Label = flag_label) -> Topology:
    """Parse a topology routed as asked; emulated networks (and local runs, one process per host) stay within the
    host cap."""
    topo = parse(spec)
    if emulated and len(topo.hosts) > MAX_EMULATED_HOSTS:
        raise OptionError(f"{topo.spec} has {len(topo.hosts)} hosts: emulation supports at most "
                          f"{MAX_EMULATED_HOSTS} on one machine (dmlbed theory takes any size)")
    if routing == "ecmp":
        return topo
    if topo.kind == "bcube" or topo.graph or not several_up_ports(topo):
        how = ("pins each level's traffic to its own switches" if topo.kind == "bcube" else
               "is routed by shortest paths through its graph" if topo.graph else "has no switch with several up ports")
        raise OptionError(f"{label('routing')} {routing} chooses among a switch's up ports: {topo.spec} {how} (valid "
                          f"on fattree and leafspine; {label('routing')} ecmp elsewhere)")
    return replace(topo, routing=routing)


def several_up_ports(topo: Topology) -> bool:
    """True when some switch has more than one link up (where up/down routing has a choice to make)."""
    ups: Dict[str, int] = {}
    for link in topo.links:
        if not topo.is_host(link.lower):
            ups[link.lower] = ups.get(link.lower, 0) + 1
    return any(n > 1 for n in ups.values())


def check_controller(cfg: RunConfig, label: Label = flag_label) -> ControllerChoice:
    """The controller an emulated run asked for; OptionError for one a loopback run or several machines cannot
    use."""
    try:
        choice = parse_controller(cfg.controller, cfg.controller_app)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    if choice.own:
        choice = replace(choice, failover=cfg.failover)
    if not choice.own and cfg.local:
        raise OptionError(f"{label('controller')} and {label('controller_app')} control emulated switches: "
                          f"{label('local')} has none")
    if not choice.own and cfg.cluster:
        raise OptionError(f"{label('cluster')} runs dmlbed's own controller only (switches on every server must "
                          f"reach it)")
    return choice


def require_netem(label: Label = flag_label) -> None:
    """OptionError unless this kernel can create a netem qdisc (delay and loss need it)."""
    if os.geteuid() != 0:
        return  # probing needs root; the emulated run itself is refused without it
    if not netem_available():
        raise OptionError(f"{label('delay')}/{label('loss')} need the kernel's netem qdisc (sch_netem), which this "
                          f"kernel lacks (a stock Debian kernel has it): only bandwidth shaping ({label('bw')}) is "
                          f"available here; `dmlbed simulate --delay` and `dmlbed theory --delay` model the delay")


def check_impairment(cfg: RunConfig, topo: Topology, emulated: bool, label: Label = flag_label) -> Impairment:
    """The per-level delay and loss asked for; an emulated one needs netem in this kernel, a loopback run
    has no links to delay."""
    impairment = parse_impairment(cfg.delay, cfg.loss, topo)
    if not impairment.active or not emulated:
        return impairment
    if cfg.local:
        raise OptionError(f"{label('delay')}/{label('loss')} act on emulated links: {label('local')} has none")
    require_netem(label)
    return impairment


def check_mtu(cfg: RunConfig, label: Label = flag_label) -> None:
    """OptionError when the emulated links cannot carry --mtu: the userspace switch's AF_XDP ports take frames
    up to AFXDP_MAX_MTU, Mininet's GRE tunnels 1450 bytes."""
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


def check_congestion_control(cfg: RunConfig, label: Label = flag_label) -> None:
    """OptionError when this kernel lacks the congestion control asked for (its tcp_NAME module)."""
    from emulation.net.kernel_probes import available_congestion_controls
    have = available_congestion_controls(load=cfg.tcp_cc)
    if have and cfg.tcp_cc not in have and not cfg.cluster:
        raise OptionError(f"{label('tcp_cc')} {cfg.tcp_cc} needs the kernel module tcp_{cfg.tcp_cc}, which this kernel "
                          f"({os.uname().release}) lacks: valid here are {', '.join(sorted(have))}")


def check_aqm(cfg: RunConfig, impairment: Impairment, label: Label = flag_label) -> None:
    """OptionError when --aqm cannot act: no links (--local), a marking threshold the buffer never reaches, the
    queue's leaf taken by netem, or no RED in this kernel."""
    mark = parse_aqm(cfg.aqm)
    if not mark:
        return
    if cfg.local:
        raise OptionError(f"{label('aqm')} marks in emulated switch port buffers: {label('local')} has none")
    if mark >= cfg.queue:
        raise OptionError(f"{label('aqm')} {cfg.aqm} marks at {mark} packets, which a {cfg.queue}-packet buffer "
                          f"({label('queue')}) never reaches: give K below {cfg.queue}")
    if impairment.active:
        raise OptionError(f"{label('aqm')} and {label('delay')}/{label('loss')} both need the leaf of a switch port's "
                          f"queue (RED or netem): give one of them")
    if os.geteuid() == 0 and not cfg.cluster and not red_available():
        raise OptionError(f"{label('aqm')} {cfg.aqm} needs the kernel's RED qdisc (module sch_red), which this kernel "
                          f"({os.uname().release}) lacks: valid here is {label('aqm')} none (a stock Debian kernel "
                          f"has sch_red)")


def check_network(cfg: RunConfig, label: Label = flag_label, emulated: bool = True) -> NetworkSettings:
    """The network section: topology (host cap when emulated), rates, delay and loss, frame size, controller and
    machines, resolved to the settings hosts_for brings up."""
    topo = check_topology(cfg.topology, emulated, cfg.routing, label)
    controller = check_controller(cfg, label)
    if topo.routing != "ecmp" and not controller.own:
        raise OptionError(f"{label('routing')} {topo.routing} is in the rules dmlbed's controller installs: "
                          f"{label('controller')} {cfg.controller} / {label('controller_app')} route their own way")
    if cfg.local and cfg.cluster:
        raise OptionError(f"{label('local')} runs without emulation and {label('cluster')} emulates across machines: "
                          f"give one of them")
    bw = parse_bandwidth(cfg.bw, topo, emulated)
    link_rates = parse_link_rates(cfg.link_rate, topo, label("link_rate"))
    background = parse_background(cfg.background, topo, label("background"))
    if background and cfg.local:
        raise OptionError(f"{label('background')} needs an emulated network to share: {label('local')} runs on "
                          f"loopback, without links")
    events = parse_events(cfg.event, topo, cfg.iters, label("event"))
    alone = cut_off(topo, events)
    if alone:
        downs = " ".join(e.shown() for e in events if e.state)
        raise OptionError(f"{label('event')} {downs}: {', '.join(alone)} would be cut off from the other hosts to the "
                          f"run's end and the run could not finish: bring the link up again (LINK=up@WHEN)")
    if events and cfg.local:
        raise OptionError(f"{label('event')} changes an emulated link: {label('local')} runs on loopback, without "
                          f"links")
    impairment = check_impairment(cfg, topo, emulated, label)
    if emulated:
        check_mtu(cfg, label)
        check_congestion_control(cfg, label)
        check_aqm(cfg, impairment, label)
    cluster = tuple(parse_servers(cfg.cluster)) if cfg.cluster else ()
    network = NetworkSettings(topo, tuple(bw), shaped_rates(bw, cfg.dilation), impairment, tcp_settings(cfg),
                              controller, cluster, cfg.datapath, cfg.shape_ingress, cfg.tunnel, cfg.local, cfg.wait,
                              cfg.dilation, link_rates, background, events, cpu_hog=cfg.cpu_hog)
    if not userspace_switch(network) or cluster:
        return network
    return replace(network, plain_links=plain_links(topo, afxdp_port_budget()))


def plain_links(topo: Topology, budget: Optional[int]) -> Tuple[Tuple[str, str], ...]:
    """Switch-to-switch links whose switch ends use plain ports so that the AF_XDP ports fit the budget: none while
    every port fits, else the highest levels' first (OVS polls plain ports in its main thread, which saturates
    sooner, and a placement's traffic crosses the lowest levels most)."""
    if budget is None or topo.ports_on_switches() <= budget:
        return ()
    inner = sorted((l for l in topo.links if not topo.is_host(l.lower)), key=lambda l: -l.level)
    return tuple((l.lower, l.upper) for l in inner[:(topo.ports_on_switches() - budget + 1) // 2])


def check_algorithm_options(cfg: RunConfig, algorithm: Algorithm, label: Label = flag_label) -> None:
    """OptionError when an option only other algorithms read is changed from its default."""
    for name, opt, default in described():
        if opt.algorithm_option and getattr(cfg, name) != default and name not in algorithm.option_names:
            users = names_with(lambda a: name in a.option_names)
            raise OptionError(f"{label(name)} applies to {', '.join(users)} only, not {algorithm.name}")


def check_codec_options(cfg: RunConfig, label: Label = flag_label) -> None:
    """OptionError when an option only other codecs read is changed from its default."""
    own = set(codec_options(cfg))
    for name, opt, default in described():
        if opt.codec_option and getattr(cfg, name) != default and name not in own:
            users = [n for n, c in COMPRESSORS.items() if name in {f.name for f in fields(c.options)}]
            raise OptionError(f"{label(name)} applies to {label('codec')} {', '.join(users)} only, not "
                              f"{label('codec')} {cfg.codec}")


def check_overlap(cfg: RunConfig, algorithm: Algorithm, label: Label = flag_label) -> None:
    """OptionError unless the algorithm can synchronize DDP's buckets and every rank trains."""
    if not algorithm.overlaps:
        raise OptionError(f"{label('overlap')} runs DDP communication hooks: {algorithm.name} has none (valid: "
                          f"{', '.join(names_with(lambda a: a.overlaps))})")
    if not algorithm.bucketable(algorithm.options_of(algorithm_options(cfg))):
        raise OptionError(f"{label('overlap')} synchronizes DDP's buckets, any run of layers: {algorithm.name} with "
                          f"these options plans for the whole model's tensors")
    if algorithm.resolve_servers(cfg.servers):
        raise OptionError(f"{label('overlap')} needs every rank to train (DDP ranks): {label('servers')} "
                          f"{cfg.servers} gives dedicated servers")


def check_synchronization(cfg: RunConfig, topo: Topology, label: Label = flag_label) -> Synchronization:
    """The synchronization section: the algorithm, the options only it reads, the hosts it runs on, servers, codec
    and overlap."""
    algorithm = get_algorithm(cfg.algo)
    check_algorithm_options(cfg, algorithm, label)
    check_codec_options(cfg, label)
    names = parse_hosts(cfg.hosts, topo, label("hosts"))
    view = None
    if names is not None:  # every host in the order given, or some of them
        if len(names) < len(topo.hosts) and not algorithm.host_subsets:
            raise OptionError(f"{label('hosts')}: {algorithm.name} plans by the topology's structure and runs on "
                              f"every host; on some of them run {', '.join(names_with(lambda a: a.host_subsets))}")
        view = topo = job_view(topo, names)
    options = algorithm_options(cfg)
    algorithm.check(topo, cfg.servers, options, cfg.codec)
    algorithm.check_model(cfg.model, len(topo.hosts), algorithm.options_of(options))
    if cfg.overlap:
        check_overlap(cfg, algorithm, label)
    servers = algorithm.resolve_servers(cfg.servers)
    contributors = tuple(algorithm.contributors(topo, servers))
    return Synchronization(algorithm, options, algorithm.options_of(options), servers, contributors,
                           check_compute(cfg, topo, contributors, label), view, codec_options(cfg))


def check_compute(cfg: RunConfig, topo: Topology, contributors: Sequence[int],
                  label: Label = flag_label) -> ComputeModel:
    """The device's compute time per rank and iteration, with --slow's hosts resolved (each one that trains)."""
    try:
        model = compute_model(cfg.compute_time, cfg.slow, {h.name: h.index for h in topo.hosts})
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    for s in model.slow:
        if s.rank not in contributors:
            raise OptionError(f"{label('slow')} {topo.hosts[s.rank].name}: that host does not compute (a dedicated "
                              f"server); the hosts that train are {shown([topo.hosts[r].name for r in contributors])}")
    return model


def check_modelled_compute(checked: Checked, label: Label = flag_label) -> None:
    """Compute that varies by rank or iteration, in the flow model and the closed forms: BSP iterations of a plan
    synchronized after backward (an emulated run takes it with every algorithm)."""
    cfg = checked.cfg
    if checked.network.events and (cfg.overlap or checked.algorithm.forward_phase is not None):
        raise OptionError(f"{label('event')}: simulate and theory follow link events over iterations of compute then "
                          f"synchronization, without {label('overlap')} and without a forward phase "
                          f"({cfg.algo if checked.algorithm.forward_phase else 'DDP buckets'}); an emulated run takes "
                          f"them")
    if checked.network.background and (cfg.overlap or checked.algorithm.forward_phase is not None):
        raise OptionError(f"{label('background')}: simulate and theory model background flows beside iterations "
                          f"of compute then synchronization, without {label('overlap')} and without a forward phase "
                          f"({cfg.algo if checked.algorithm.forward_phase else 'DDP buckets'}); an emulated run takes "
                          f"them")
    if not checked.compute.varies:
        return
    what = label("slow") if checked.compute.kind == FIXED else f"{label('compute_time')} {cfg.compute_time}"
    if cfg.overlap:
        raise OptionError(f"{what}: simulate and theory model varying compute without {label('overlap')} (an emulated "
                          f"run takes both)")
    if checked.algorithm.forward_phase is not None:
        raise OptionError(f"{what}: simulate and theory model varying compute for algorithms whose iteration is "
                          f"compute then synchronization, not {cfg.algo}'s forward phase (an emulated run takes it)")


def check_training(cfg: RunConfig, algorithm: Algorithm, label: Label = flag_label) -> None:
    """The training section: the model and its data, and no optimizer setting the algorithm's workers do not use
    or curve without held-out data."""
    defaults = {name: default for name, _, default in described()}
    changed = [n for n in ("momentum", "weight_decay", "lr_schedule") if getattr(cfg, n) != defaults[n]]
    if changed and not algorithm.worker_optimizer:
        raise OptionError(f"{label(changed[0])} applies to algorithms whose workers step an optimizer ("
                          f"{', '.join(names_with(lambda a: a.worker_optimizer))}), not {algorithm.name}: its "
                          f"servers apply plain SGD as its paper does")
    if cfg.eval_every and cfg.data == "synthetic":
        raise OptionError(f"{label('eval_every')} measures held-out accuracy: give a real data set with "
                          f"{label('data')} (digits or mnist:PATH), not synthetic")
    check_data(cfg.data, input_shape(cfg.model))


def userspace_switch(network: NetworkSettings) -> bool:
    """Whether the network's switch is userspace Open vSwitch (which needs its own memory), not the kernel module."""
    return network.emulated and (network.datapath == "user" or
                                 (network.datapath == "auto" and choose_datapath("auto") == "user"))


def afxdp_ports(network: NetworkSettings) -> int:
    """The AF_XDP ports the userspace switch opens on this network: every switch port but the two of each link on
    plain ports (0 on the kernel datapath or without a switch)."""
    return network.topo.ports_on_switches() - 2 * len(network.plain_links) if userspace_switch(network) else 0


def check_background_hosts(cfg: RunConfig, network: NetworkSettings, topo: Topology, label: Label = flag_label) -> None:
    """OptionError for a background flow on a host the job runs on, unless that is asked for (--share-hosts)."""
    mine = {h.name for h in topo.hosts}
    for flow in network.background:
        taken = [end for end in (flow.src, flow.dst) if end in mine]
        if taken and not cfg.share_hosts:
            free = [h.name for h in network.topo.hosts if h.name not in mine]
            raise OptionError(f"{label('background')} {flow.name}: {taken[0]} runs the job's rank; give "
                              f"{label('share_hosts')} to share it on purpose, or use hosts no job runs on "
                              f"({', '.join(free[:8]) if free else 'none: leave some free with ' + label('hosts')})")


def check_workers(network: NetworkSettings, bytes_per_rank: int, ranks: Optional[int] = None,
                  buffers: bool = False) -> None:
    """The memory section: room for one rank per host (or per rank of a job on some hosts) holding a model of
    bytes_per_rank (buffers: a bench's raw buffer of that size), and the switch."""
    check_memory(len(network.topo.hosts) if ranks is None else ranks, bytes_per_rank, afxdp_ports(network),
                 start=rank_start(), **({"copies": BENCH_BUFFER_COPIES, "what": "buffer"} if buffers else {}))


def check_calibration(cfg: RunConfig, network: NetworkSettings, emulated: bool) -> None:
    """A calibration file made on this topology and rate (and dilation and frame size, for an emulated run)."""
    if cfg.calibration:
        emulated_run = emulated and network.emulated
        load_calibration(cfg.calibration, network.topo.spec, network.bw, cfg.dilation if emulated_run else None,
                         cfg.mtu if emulated_run else None)


def validate(cfg: RunConfig, label: Label = flag_label, emulated: bool = True, workers: bool = True) -> Checked:
    """Every section of a run-shaped job (run, a compare row, simulate, theory), once, before anything starts:
    values, network (host cap when emulated), synchronization, training, (when real worker processes will run)
    memory, and a calibration. Raises OptionError / TopologyError / PlanError / ModelError (all ValueErrors)."""
    check_values(cfg, label)
    network = check_network(cfg, label, emulated)
    checked = Checked(cfg, network, check_synchronization(cfg, network.topo, label))
    check_background_hosts(cfg, network, checked.topo, label)
    check_training(cfg, checked.algorithm, label)
    if workers:
        check_workers(network, parameter_count_of(cfg.model) * 4, len(checked.topo.hosts))
    check_calibration(cfg, network, emulated)
    return checked
