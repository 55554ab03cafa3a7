"""The network's OpenFlow controller: dmlbed's Ryu app or the user's, each as its own ryu-manager process (on
127.0.0.1 unless switches on other machines must reach it), or a controller the user started (remote)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from typing import List, Optional

from emulation.net.kernel_probes import connected_bridges, packets_to_controller
from emulation.core.controller_choice import APP, REMOTE, ControllerChoice
from emulation.core.topology import Topology

OWN_APP = "controllers.app"


class ControllerError(RuntimeError):
    """The controller did not start or did not program the switches in time."""


def free_ports(n: int) -> List[int]:
    """n distinct free TCP ports on 127.0.0.1 (held open together so none repeats)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def wait_connected(topo: Topology, timeout: float, what: str, alive=lambda: True) -> float:
    """Wait until every switch of topo holds an OpenFlow connection to its controller; returns seconds waited."""
    start = time.monotonic()
    names = [s.name for s in topo.switches]
    while True:
        missing = sorted(set(names) - set(connected_bridges(names)))
        if not missing:
            return time.monotonic() - start
        if not alive():
            raise ControllerError(f"{what} ended before every switch connected")
        if time.monotonic() - start > timeout:
            raise ControllerError(f"switches not connected to {what} within {timeout:.0f}s: {', '.join(missing)}")
        time.sleep(0.2)


class ControllerProcess:
    """A ryu-manager running dmlbed's app for one topology (its status file reports installs and PacketIns), or
    the user's own app (the switches' connections and flow counters say the same)."""

    def __init__(self, topo: Topology, workdir: str, port: Optional[int] = None, host: str = "127.0.0.1",
                 app: str = OWN_APP, failover: str = "fast"):
        self.failover = failover
        self.topo = topo
        self.host = host
        self.workdir = workdir
        self.app = app
        self.port = port or free_ports(1)[0]
        self.topology_path = os.path.join(workdir, "topology.json")
        self.status_path = os.path.join(workdir, "controller-status.json")
        self.log_path = os.path.join(workdir, "controller.log")
        self.proc: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 20.0) -> int:
        """Launch ryu-manager and wait until it accepts OpenFlow connections; returns its PID."""
        with open(self.topology_path, "w") as f:
            f.write(self.topo.to_json())
        env = dict(os.environ, DMLBED_TOPOLOGY=self.topology_path, DMLBED_STATUS=self.status_path,
                   DMLBED_FAILOVER=self.failover)
        cmd = [sys.executable, "-m", "controllers.ryu_manager", "--ofp-listen-host", self.host,
               "--ofp-tcp-listen-port", str(self.port), self.app]
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                     start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ControllerError(f"ryu-manager exited with code {self.proc.returncode}: "
                                      f"{self.log_tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return self.proc.pid
            except OSError:
                time.sleep(0.2)
        raise ControllerError(f"ryu-manager did not listen on {self.host}:{self.port} within {timeout:.0f}s: "
                              f"{self.log_tail()}")

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the controller log, joined on one line."""
        try:
            with open(self.log_path) as f:
                return " | ".join(l.strip() for l in f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def status(self) -> dict:
        """The app's latest status: switches installed and PacketIn counts."""
        try:
            with open(self.status_path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {"switches": {}, "packet_in": 0}

    @property
    def own(self) -> bool:
        """Whether it runs dmlbed's app, which reports every switch as programmed."""
        return self.app == OWN_APP

    def wait_installed(self, timeout: float = 60.0) -> float:
        """Wait until every switch has connected and confirmed its rules (the user's app: connected); returns
        seconds waited."""
        if not self.own:
            return wait_connected(self.topo, timeout, f"your controller app ({self.log_tail()})",
                                  lambda: self.proc is None or self.proc.poll() is None)
        start = time.monotonic()
        expected = {s.dpid_hex for s in self.topo.switches}
        while True:
            switches = self.status().get("switches", {})
            done = {d for d, s in switches.items() if s.get("installed")}
            if expected <= done:
                return time.monotonic() - start
            if self.proc is not None and self.proc.poll() is not None:
                raise ControllerError(f"ryu-manager died: {self.log_tail()}")
            if time.monotonic() - start > timeout:
                missing = sorted(self.topo.switch_by_dpid(int(d, 16)).name for d in expected - done)
                raise ControllerError(f"switches not programmed within {timeout:.0f}s: {', '.join(missing)}")
            time.sleep(0.2)

    def packet_ins(self) -> int:
        """Data-plane PacketIns the controller has seen so far."""
        if not self.own:
            return packets_to_controller([s.name for s in self.topo.switches])
        return int(self.status().get("packet_in", 0))

    def stop(self) -> None:
        """Terminate the controller process (SIGTERM, then SIGKILL)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        stop_process_group(self.proc.pid, self.proc)


class RemoteController:
    """A controller the user started and stops: dmlbed only points the switches at it and watches them."""

    def __init__(self, topo: Topology, host: str, port: int):
        self.topo, self.host, self.port = topo, host, port

    def start(self, timeout: float = 20.0) -> None:
        """Check that it accepts OpenFlow connections (ControllerError naming the address if not)."""
        try:
            with socket.create_connection((self.host, self.port), timeout=min(timeout, 5.0)):
                return None
        except OSError as exc:
            raise ControllerError(f"no controller listens on {self.host}:{self.port} ({exc.strerror or exc}): "
                                  f"start yours first") from None

    def wait_installed(self, timeout: float = 60.0) -> float:
        """Wait until every switch has connected to it (its rules are its own business)."""
        return wait_connected(self.topo, timeout, f"the controller at {self.host}:{self.port}")

    def status(self) -> dict:
        """Nothing beyond what the switches say."""
        return {}

    def packet_ins(self) -> int:
        """Packets the switches' flows sent to it."""
        return packets_to_controller([s.name for s in self.topo.switches])

    def stop(self) -> None:
        """It is the user's to stop."""


def make_controller(choice: ControllerChoice, topo: Topology, workdir: str, host: str):
    """The controller a network runs under (a ControllerProcess, or a RemoteController it does not start)."""
    if choice.kind == REMOTE:
        return RemoteController(topo, choice.host, choice.port)
    return ControllerProcess(topo, workdir, host=host, app=choice.app if choice.kind == APP else OWN_APP,
                             failover=choice.failover)


def stop_process_group(pid: int, proc: Optional[subprocess.Popen] = None, grace: float = 3.0) -> None:
    """SIGTERM the process group led by pid, then SIGKILL it if it lingers (reaping proc if ours)."""

    def alive() -> bool:
        if proc is not None:
            return proc.poll() is None
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not alive():
                return
            time.sleep(0.05)
