"""dmlbed's Python API: the same runs, launches, simulations, theory and comparisons as the `dmlbed` command,
returning the same summaries (typed objects that read like the dicts summary.json holds), and an emulated network
to script by hand.

    import dmlbed

    print(dmlbed.theory(topo="bcube:3,2", algo="bml", model="resnet50", bw=100)["gst_theory_s"])
    with dmlbed.Network("star:4", bw=100) as net:          # needs root, as `dmlbed net` does
        print(net.ping_all(), net.iperf("h0", "h1")["measured_mbps"])   # as Mininet's pingAll and iperf
        print(net.host("h0").cmd("ping", "-c", "1", net.host("h1").IP()))
        net.link("h1").down(); net.link("h1").up(); net.link("h1").rate(50)   # a link down, up, at 50 Mbit/s
    summary = dmlbed.run(topo="star:4", algo="ring", model="lenet5", iters=5, out="results/api")
    shared = dmlbed.jobs(["name=a hosts=h0..h3", "name=b hosts=h4..h7"], mode="simulate", topo="star:8", algo="ring")

Keyword arguments are the keys of a compare config (the CLI's flags with underscores: topo, algo, model, bw,
iters, overlap, bucket_mb, compute_time, ...), plus out, local, force and wait; help(dmlbed.run) lists them with
their types and defaults, generated from the option table. Bad input raises ValueError with the same one-line
message the CLI prints.
"""

from __future__ import annotations

import inspect
import os
import subprocess
from typing import Callable, Dict, List, Optional, Sequence

from emulation.backends import BACKENDS, matrix
from emulation.backends import launcher as launching
from emulation.run.hosts import hosts_for, network_lock
from emulation.run.options import CONTROLLER, LINKS, NETWORK, TOPOLOGY, WAIT, RunConfig, from_mapping
from emulation.results.summary import LaunchSummary, Summary
from emulation.run.validation import check_network, check_values

__all__ = ["Network", "Host", "run", "launch", "simulate", "theory", "jobs", "compare", "bench", "calibrate",
           "reproduce", "config", "Summary", "LaunchSummary"]

FLAGS_ONLY = ("out", "local", "force", "wait")  # run options that are not compare-config keys
Log = Callable[[str], None]


def config(where: str, **options) -> RunConfig:
    """A RunConfig from keyword arguments (compare-config keys plus out, local, force, wait)."""
    fixed = {k: options.pop(k) for k in FLAGS_ONLY if k in options}
    return from_mapping(options, where, **fixed)


def _answer(mode: str, where: str, log: Log, options) -> Summary:
    """One configuration prepared and executed on the back end of this mode."""
    backend = BACKENDS[mode]
    return backend.execute(backend.prepare(config(where, **options)), log, False)


def run(log: Log = lambda m: None, **options) -> Summary:
    """`dmlbed run`: one training run; its summary."""
    return _answer("emulate", "dmlbed.run", log, options)


def simulate(log: Log = lambda m: None, **options) -> Summary:
    """`dmlbed simulate`: the run's plan in the flow-level model; its summary."""
    return _answer("simulate", "dmlbed.simulate", log, options)


def theory(**options) -> Summary:
    """`dmlbed theory`: the papers' closed forms (and the calibrated, delay and overlap models when asked for)."""
    return _answer("theory", "dmlbed.theory", lambda m: None, options)


def jobs(jobs: Sequence[str], mode: str = "emulate", log: Log = lambda m: None, **options) -> dict:
    """`dmlbed jobs`: several jobs sharing one network ('KEY=VALUE ...' each), emulated, simulated or in theory;
    jobs.json as a dict (each job alone and together, its slowdown and overlap)."""
    from emulation.backends import shared
    return shared.execute(shared.prepare(config("dmlbed.jobs", **options), list(jobs), mode), log)


def compare(path: str, out: Optional[str] = None, local: bool = False, force: bool = False, wait: bool = False,
            log: Log = lambda m: None) -> dict:
    """`dmlbed compare PATH`: a compare config's matrix; its rows, plots and claims."""
    return matrix.execute(matrix.prepare(path, out, local, force, wait), log=log, progress=False)


def launch(command: Sequence[str], cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None,
           time_limit: float = 0.0, log: Log = lambda m: None, **options) -> LaunchSummary:
    """`dmlbed launch -- COMMAND`: your command on every emulated host; its summary (algo=... opts scripts that call
    dmlbed.ddp.register into that algorithm's hook)."""
    cfg = config("dmlbed.launch", **dict({"algo": None}, **options))
    return launching.execute(launching.prepare(cfg, list(command), cwd, env, time_limit), log)


def _keyword(key: str, opt, default) -> inspect.Parameter:
    """A keyword-only parameter of an option, typed Optional where its default is None."""
    return inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=opt.kind if default is not None else Optional[opt.kind])


def _signed(function: Callable, before: Sequence[inspect.Parameter] = ()) -> Callable:
    """The function with the option table's keys as its typed keyword parameters for help() and IDEs that read
    signatures (it still takes them as **options: one table, checked in one place)."""
    from emulation.run.options import MATRIX, described, yaml_key
    own = inspect.signature(function).parameters
    params = list(before) + [inspect.Parameter("log", inspect.Parameter.KEYWORD_ONLY, default=own[name].default,
                                               annotation=Log) for name in own if name == "log"]
    for name, opt, default in described():
        if opt.yaml and opt.group != MATRIX:  # a matrix row's mode is the function's
            params.append(_keyword(yaml_key(name, opt), opt, default))
    for name, kind, default in (("out", str, None), ("local", bool, False), ("force", bool, False),
                                ("wait", bool, False)):
        if all(p.name != name for p in params):
            params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind))
    function.__signature__ = inspect.Signature(params, return_annotation=inspect.signature(function).return_annotation)
    return function


for _function in (run, simulate, theory):
    _signed(_function)
_signed(jobs, [inspect.Parameter("jobs", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Sequence[str]),
               inspect.Parameter("mode", inspect.Parameter.POSITIONAL_OR_KEYWORD, default="emulate", annotation=str)])


def _as_command(name: str, summary: str) -> Callable:
    """An API function doing what `dmlbed NAME` does, with its flags (underscores; the run options by their
    compare-config keys) as typed keyword parameters; the command's result."""
    import argparse
    from emulation.commands.registry import COMMANDS
    from emulation.run.options import in_groups, yaml_key
    command = next(c for c in COMMANDS if c.name == name)
    fields = {opt.name: (opt.name, opt, opt.default) for opt in command.own}
    fields.update({yaml_key(n, o): (n, o, d) for n, o, d in in_groups(command.groups)})

    def function(**options):
        unknown = sorted(set(options) - set(fields))
        if unknown:
            raise ValueError(f"dmlbed.{name}: unknown key '{unknown[0]}': valid are {', '.join(sorted(fields))}")
        values = {field: options.get(key, default) for key, (field, _, default) in fields.items()}
        args = argparse.Namespace(**values, json=False)
        job = command.prepare(args)
        if command.needs_root(job) and os.geteuid() != 0:
            raise PermissionError(f"dmlbed.{name} needs root (network namespaces and Open vSwitch)")
        return command.execute(job, args)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = f"`dmlbed {name}`: {summary}."
    params = [_keyword(key, opt, default) for key, (_, opt, default) in fields.items()]
    function.__signature__ = inspect.Signature(params, return_annotation=dict)
    return function


bench = _as_command("bench", "a collective benchmark across message sizes (algbw/busbw, as nccl-tests); its report")
calibrate = _as_command("calibrate", "each link level's latency and rate fitted from probes; its report")
reproduce = _as_command("reproduce", "a paper's config run again with the paper's values beside ours (name=...), "
                                     "or every one (all=True), or the list (list=True)")


class Host:
    """One host of a Network, as Mininet's: its name, its addresses and cmd()."""

    def __init__(self, network: "Network", name: str):
        self.network, self.name = network, name

    def IP(self, level: int = 0) -> str:  # noqa: N802 (Mininet's name)
        """Its address on a link level."""
        return self.network.addresses(self.name)[f"L{level}"]

    def cmd(self, *args: str, timeout: float = 60.0) -> str:
        """Run a command in the host to completion; what it printed (stdout, then stderr), as Mininet's cmd."""
        done = self.network.run(self.name, list(args), timeout)
        return done.stdout + done.stderr

    def __repr__(self) -> str:
        return f"<Host {self.name}>"


class Link:
    """One link of a Network, as Mininet's: taken down, brought up or given another rate at once."""

    def __init__(self, network: "Network", name: str):
        self.network, self.name = network, name

    def down(self) -> "Link":
        """Take it down now (the switches take their backup paths; dmlbed's controller reroutes)."""
        self.network.change_link(self.name, "down")
        return self

    def up(self) -> "Link":
        """Bring it back up now."""
        self.network.change_link(self.name, "up")
        return self

    def rate(self, rate) -> "Link":
        """Shape it to another rate now: Mbit/s as a number, or with tc's units ('1Gbit')."""
        self.network.change_link(self.name, str(rate))
        return self

    def __repr__(self) -> str:
        return f"<Link {self.name}>"


class Network:
    """An emulated network to script, as `dmlbed net --cli` gives one by hand: enter it (root), start processes in
    its hosts, leave it and everything is torn down."""

    def __init__(self, topo: str, log: Log = lambda m: None, **options):
        cfg = config("dmlbed.Network", topo=topo, **options)
        check_values(cfg, groups=(TOPOLOGY, LINKS, NETWORK, CONTROLLER, WAIT))
        self.network = check_network(cfg)
        self.log = log
        self.emulated = None

    def __enter__(self) -> "Network":
        self._lock = network_lock(self.network)
        self._lock.__enter__()
        try:
            self.emulated = hosts_for(self.network, self.log).__enter__()
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.emulated.__exit__(*exc)
        finally:
            self._lock.__exit__(*exc)

    @property
    def hosts(self) -> List[str]:
        """The hosts' names, rank order."""
        return [h.name for h in self.network.topo.hosts]

    def host(self, name: str) -> Host:
        """One host (ValueError naming the valid ones)."""
        if name not in self.hosts:
            raise ValueError(f"Network.host: no host '{name}': valid are {', '.join(self.hosts)}")
        return Host(self, name)

    def ping_all(self, timeout: int = 2) -> float:
        """Every host pings every other on each level they share (one ping each, as Mininet's pingAll); the
        percentage that got no answer."""
        from emulation.net.checks import reachability_pairs, run_reachability
        pairs = reachability_pairs(self.network.topo)
        found = run_reachability(self.emulated, pairs, timeout)
        return 100.0 * len(found["unreachable"]) / max(1, found["pairs_tested"])

    def iperf(self, a: str, b: str, seconds: float = 5.0, level: int = 0) -> dict:
        """One iperf3 TCP flow from host a to host b on a link level for `seconds`: its goodput (measured_mbps), its
        rate on the wire against the level's shaped rate (fidelity) and its retransmissions."""
        from emulation.net.checks import Flow, run_fidelity
        src, dst = self.host(a), self.host(b)
        shaped = self.network.bw[level]
        return run_fidelity(self.emulated, [Flow(a, src.IP(level), b, dst.IP(level), level, shaped)], seconds)[0]

    def addresses(self, host: str) -> Dict[str, str]:
        """A host's address on each link level ('L0', 'L1', ...)."""
        return {f"L{i.level}": i.ip for i in self.network.topo.node(host).interfaces}

    def popen(self, host: str, args: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start a process in a host (stopped at teardown)."""
        return self.emulated.popen(host, list(args), **kwargs)

    def link(self, name: str, change: Optional[str] = None) -> "Link":
        """A link, named as `--link-rate` names links (h3, h3:1, a0_0-c0), as Mininet's: `.down()`, `.up()`,
        `.rate(50)`; with CHANGE ('down', 'up' or a rate: '50', '1Gbit') it is changed at once, as `--event
        NAME=CHANGE@...` does in a run. ValueError naming what is valid."""
        from emulation.core.link_rates import find_link
        from emulation.core.topology import TopologyError
        try:
            find_link(self.network.topo, name, "Network.link")
        except (TopologyError, ValueError) as exc:
            raise ValueError(str(exc)) from None
        handle = Link(self, name)
        if change is not None:
            self.change_link(name, change)
        return handle

    def change_link(self, name: str, change: str) -> None:
        """Change a link now: CHANGE 'down', 'up' or a rate (see link())."""
        from emulation.core.events import DOWN, UP, LinkEvent
        from emulation.core.link_rates import find_link, shaper_rate
        from emulation.core.topology import TopologyError
        from emulation.run.event_schedule import apply_event
        try:
            found = find_link(self.network.topo, name, "Network.link")
            key = (found.lower, found.upper)
            state = change if change in (DOWN, UP) else None
            mbps = None if state else shaper_rate(change, f"Network.link {name}")
        except (TopologyError, ValueError) as exc:
            raise ValueError(str(exc)) from None
        if state and (state == DOWN) == (key in self.emulated.failed):
            raise ValueError(f"Network.link {name}: the link is already {state}")
        apply_event(self.emulated, LinkEvent(name, key, mbps, iteration=1, state=state), self.network.dilation)

    def reroutes(self) -> List[dict]:
        """What dmlbed's controller did on each port-status message that changed the links down (times, messages)."""
        return self.emulated.reroutes()

    def run(self, host: str, args: Sequence[str], timeout: float = 60.0) -> subprocess.CompletedProcess:
        """Run a command in a host to completion; its exit code and output."""
        proc = self.popen(host, args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            self.emulated.stop_process(proc)
        return subprocess.CompletedProcess(list(args), proc.returncode, out, err)
