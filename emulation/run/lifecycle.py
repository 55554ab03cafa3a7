"""One lifecycle for every command that brings hosts up (run, launch, bench, calibrate, net), as Mininet's `Mininet`
owns the start and stop of everything it built: the machine's network lock, a fork server whose imports overlap the
bring-up, the hosts, the live samplers, the error ladder, and the command's summary, written exactly once, even
when the command fails or is interrupted."""

from __future__ import annotations

import contextlib
import json
from typing import Any, Callable, Optional

from emulation.run import signals
from emulation.run.faults import CpuHog
from emulation.run.hosts import Hosts, hosts_for, network_lock
from emulation.results.files import write_atomic
from emulation.run.ranks import fork_server_ahead
from emulation.run.resolution import NetworkSettings
from emulation.run.sampling import CpuSampler, InterfaceSampler, switch_pid
from workloads.runfolder import RankFiles

Log = Callable[[str], None]


def as_json(summary: Any) -> str:
    """A summary's JSON: a typed one by its own to_dict(), a mapping as it is."""
    data = summary.to_dict() if hasattr(summary, "to_dict") else summary
    return json.dumps(data, indent=1, default=str)


class Lifecycle:
    """What one command owns from start to end, started in order and stopped in reverse: lock -> fork server ->
    hosts -> samplers. run(body, finish) runs body with everything up; whatever happens, finish builds the summary
    (error: None, or why the command failed) and it is written to summary_path once. A failure after the start
    (a rank died, bring-up failed) is recorded as the summary's error and, with reraise, raised again after the
    summary is written; an interruption (SIGINT, SIGTERM, SIGHUP) or a bug always is."""

    def __init__(self, network: NetworkSettings, log: Log, summary_path: Optional[str] = None,
                 fork_server: Optional[RankFiles] = None, reraise: bool = False):
        self.network, self.log, self.summary_path = network, log, summary_path
        self.fork_files, self.reraise = fork_server, reraise
        self.hosts: Optional[Hosts] = None
        self.server = None                                   # the fork server ranks are forked from (or None)
        self.cpu = CpuSampler(switch=None if network.local else switch_pid())
        self.interfaces: Optional[InterfaceSampler] = None   # per-interface counters, when sampled
        self.error: Optional[str] = None
        self.writes = 0

    def sampling(self, interfaces: bool = False):
        """Sample the CPU (and, with interfaces, every host interface's counters) while the block runs, with the
        busy processes --cpu-hog asks for beside it."""
        stack = contextlib.ExitStack()
        stack.enter_context(CpuHog(self.network.cpu_hog))
        stack.enter_context(self.cpu)
        if interfaces:
            topo = self.network.topo
            self.interfaces = InterfaceSampler(self.hosts.namespace_pids(),
                                               {h.name: [i.name for i in h.interfaces] for h in topo.hosts})
            stack.enter_context(self.interfaces)
        return stack

    def run(self, body: Callable[["Lifecycle"], None], finish: Callable[["Lifecycle"], Any],
            start: Callable[[], None] = lambda: None) -> Any:
        """Run body with lock, fork server and hosts up; then the summary from finish, written once. start runs
        once the lock is held, before anything comes up (a command's folder is made there: a command refused the
        network leaves nothing behind)."""
        with network_lock(self.network):
            start()
            failure: Optional[BaseException] = None
            summary = None
            try:
                forks = fork_server_ahead(self.fork_files) if self.fork_files else contextlib.nullcontext(None)
                with forks as server, hosts_for(self.network, self.log) as hosts:
                    self.server, self.hosts = server, hosts
                    body(self)
            except RuntimeError as exc:  # RankError, NetworkError, ControllerError: the command failed after it started
                self.error, failure = str(exc) or type(exc).__name__, exc if self.reraise else None
            except KeyboardInterrupt as exc:  # SIGINT, SIGTERM or SIGHUP (see signals.py): the network is down by now
                self.error, failure = signals.error_of(exc), exc
            except Exception as exc:  # a bug: the summary still says what happened, then the traceback follows
                self.error, failure = f"{type(exc).__name__}: {exc}", exc
            finally:
                summary = finish(self)
                if self.summary_path and summary is not None:
                    write_atomic(self.summary_path, as_json(summary))
                    self.writes += 1
            if failure is not None:
                raise failure
            return summary
