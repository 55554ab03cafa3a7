"""What a run started (PIDs, bridges, interfaces), on disk, so `dmlbed clean` can undo a crashed run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from typing import Dict, List, Optional

STATE_ROOT = os.environ.get("DMLBED_STATE_DIR", "/run/dmlbed")


def process_start_time(pid: int) -> Optional[str]:
    """The kernel's start time of pid (field 22 of /proc/PID/stat), to tell a reused PID apart."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def pid_alive(pid: int, start_time: Optional[str] = None) -> bool:
    """True when pid runs and, if given, started at start_time (so it is the process we recorded)."""
    now = process_start_time(pid)
    return now is not None and (start_time is None or now == start_time)


class RunState:
    """One run's record of what it started, kept in STATE_ROOT/<owner pid>/state.json."""

    def __init__(self, root: str = STATE_ROOT, owner: Optional[int] = None):
        self.owner = owner or os.getpid()
        self.dir = os.path.join(root, str(self.owner))
        self.path = os.path.join(self.dir, "state.json")
        self.data: Dict[str, object] = {"owner": self.owner, "owner_start": process_start_time(self.owner),
                                        "created": time.time(), "pids": [], "bridges": [],
                                        "interfaces": []}

    @classmethod
    def load(cls, path: str) -> "RunState":
        """Read a state file written by another run."""
        with open(path) as f:
            data = json.load(f)
        state = cls(os.path.dirname(os.path.dirname(path)), int(data["owner"]))
        state.data = data
        return state

    def create(self) -> "RunState":
        """Make the state directory and write the empty record."""
        os.makedirs(self.dir, exist_ok=True)
        self.save()
        return self

    def save(self) -> None:
        """Write the record atomically."""
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f)
        os.replace(tmp, self.path)

    def add_pid(self, pid: int, what: str) -> None:
        """Record a process this run started."""
        self.data["pids"].append({"pid": pid, "start": process_start_time(pid), "what": what})
        self.save()

    def drop_pid(self, pid: int) -> None:
        """Forget a process that has been stopped."""
        self.data["pids"] = [p for p in self.data["pids"] if p["pid"] != pid]
        self.save()

    def add_bridges(self, names: List[str]) -> None:
        """Record OVS bridges this run creates (before creating them)."""
        self.data["bridges"] = sorted(set(self.data["bridges"]) | set(names))
        self.save()

    def add_interfaces(self, names: List[str]) -> None:
        """Record root-namespace interfaces this run creates (before creating them)."""
        self.data["interfaces"] = sorted(set(self.data["interfaces"]) | set(names))
        self.save()

    def add_folders(self, paths: List[str]) -> None:
        """Record scratch folders this run creates (its controller's work folder)."""
        self.data["folders"] = sorted(set(self.data.get("folders", [])) | set(paths))
        self.save()

    def add_ovs_settings(self, keys: List[str]) -> None:
        """Record Open vSwitch other_config keys this run sets (before setting them), to unset at the end."""
        self.data["ovs_settings"] = sorted(set(self.data.get("ovs_settings", [])) | set(keys))
        self.save()

    def restore_ovs_settings(self) -> List[str]:
        """Unset the Open vSwitch settings this run made; returns what was done."""
        done = []
        for key in self.data.get("ovs_settings", []):
            subprocess.run(["ovs-vsctl", "--if-exists", "remove", "open_vswitch", ".", "other_config", key],
                           capture_output=True)
            done.append(f"unset Open vSwitch other_config:{key}")
        if done:
            self.data["ovs_settings"] = []
            self.save()
        return done

    def add_remote(self, server: str, ssh: List[str], bridges: List[str]) -> None:
        """Record OVS bridges this run creates on another machine, and the ssh command reaching it."""
        self.data.setdefault("remote", []).append({"server": server, "ssh": ssh, "bridges": sorted(bridges)})
        self.save()

    def owner_alive(self) -> bool:
        """True while the run that wrote this record is still running."""
        return pid_alive(self.owner, self.data.get("owner_start"))

    def undo(self) -> List[str]:
        """Kill the recorded processes, delete the recorded bridges and interfaces; returns what was done."""
        done = []
        for entry in self.data["pids"]:
            pid = entry["pid"]
            if not pid_alive(pid, entry.get("start")):
                continue
            for sig in (signal.SIGTERM, signal.SIGKILL):
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
                time.sleep(0.2)
                if not pid_alive(pid, entry.get("start")):
                    break
            done.append(f"killed {entry['what']} pid {pid}")
        existing = set(list_bridges())
        for br in self.data["bridges"]:
            if br in existing:
                subprocess.run(["ovs-vsctl", "--if-exists", "del-br", br], capture_output=True)
                done.append(f"deleted bridge {br}")
        for intf in self.data["interfaces"]:
            if os.path.exists(f"/sys/class/net/{intf}"):
                subprocess.run(["ip", "link", "del", intf], capture_output=True)
                done.append(f"deleted interface {intf}")
        for remote in self.data.get("remote", []):
            if remote["bridges"]:
                done.append(undo_remote(remote))
        done += self.restore_ovs_settings()
        for folder in self.data.get("folders", []):
            if os.path.isdir(folder):
                shutil.rmtree(folder, ignore_errors=True)
                done.append(f"removed folder {folder}")
        return done

    def remove(self) -> None:
        """Delete the record (after a clean teardown)."""
        shutil.rmtree(self.dir, ignore_errors=True)


def undo_remote(remote: dict, timeout_s: float = 20.0) -> str:
    """Delete a run's bridges on another machine over ssh; returns what happened."""
    vsctl = " -- ".join(f"--if-exists del-br {b}" for b in remote["bridges"])
    try:
        r = subprocess.run(remote["ssh"] + [f"sudo -n ovs-vsctl -t 5 {vsctl}"], capture_output=True, text=True,
                           timeout=timeout_s)
        ok = r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    what = f"{len(remote['bridges'])} bridges on {remote['server']}"
    return f"deleted {what}" if ok else f"could not delete {what}: run `dmlbed clean` there"


def list_bridges() -> List[str]:
    """Names of all OVS bridges, or [] when OVS is not running."""
    if not shutil.which("ovs-vsctl"):
        return []
    out = subprocess.run(["ovs-vsctl", "-t", "3", "list-br"], capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else []


def stale_states(root: str = STATE_ROOT, include_live: bool = False) -> List[RunState]:
    """Records left by runs whose process is gone (or all of them with include_live)."""
    if not os.path.isdir(root):
        return []
    states = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name, "state.json")
        try:
            state = RunState.load(path)
        except (OSError, ValueError, KeyError):
            continue
        if include_live or not state.owner_alive():
            states.append(state)
    return states


def clean(root: str = STATE_ROOT) -> List[str]:
    """Undo every run whose owner died; returns a line per action."""
    actions = []
    for state in stale_states(root):
        actions += state.undo()
        state.remove()
        actions.append(f"removed record of run {state.owner}")
    return actions
