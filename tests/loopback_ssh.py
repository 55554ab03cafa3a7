"""A private sshd on 127.0.0.1 with a key made for it, so tests can reach "another server" over SSH (the setup of
a second machine, on this one) without touching the system's ssh configuration."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from typing import Dict, Iterator

from helpers import free_port

SSHD = "/usr/sbin/sshd"


def available() -> str:
    """'' when a loopback sshd can run here, else why not."""
    if os.geteuid() != 0:
        return "needs root"
    for tool in (SSHD, shutil.which("ssh") or "ssh", shutil.which("ssh-keygen") or "ssh-keygen",
                 shutil.which("sudo") or "sudo"):
        if not os.path.exists(tool):
            return f"{os.path.basename(tool)} is not installed (make setup installs openssh-server and sudo)"
    return ""


@contextlib.contextmanager
def loopback_sshd(timeout_s: float = 10.0) -> Iterator[Dict[str, str]]:
    """Run sshd on 127.0.0.1:PORT accepting a fresh key for root, tunnels allowed; yields the environment that
    points dmlbed's ssh at it (DMLBED_SSH_OPTIONS). Stops sshd and its sessions and removes every file after."""
    folder = tempfile.mkdtemp(prefix="dmlbed-sshd-")
    os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation directory
    port = free_port()
    host_key, user_key = os.path.join(folder, "host_key"), os.path.join(folder, "id")
    for key in (host_key, user_key):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
    shutil.copy(user_key + ".pub", os.path.join(folder, "authorized_keys"))
    known = os.path.join(folder, "known_hosts")
    with open(host_key + ".pub") as f:
        with open(known, "w") as k:
            k.write(f"[127.0.0.1]:{port} {f.read()}")
    sshd = subprocess.Popen([SSHD, "-D", "-e", "-f", "/dev/null", "-p", str(port), "-o", "ListenAddress=127.0.0.1",
                             "-o", f"HostKey={host_key}", "-o", f"AuthorizedKeysFile={folder}/authorized_keys",
                             "-o", "PermitRootLogin=prohibit-password", "-o", "PasswordAuthentication=no",
                             "-o", "PermitTunnel=yes", "-o", "StrictModes=no", "-o", "PidFile=none",
                             "-o", "UsePAM=no", "-o", "MaxStartups=100:30:200", "-o", "MaxSessions=100"],
                            stdout=subprocess.DEVNULL, stderr=open(os.path.join(folder, "sshd.log"), "w"),
                            start_new_session=True)
    options = (f"-p {port} -i {user_key} -o IdentitiesOnly=yes -o UserKnownHostsFile={known} "
               f"-o StrictHostKeyChecking=yes -o LogLevel=ERROR")
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            probe = subprocess.run(["ssh", *shlex.split(options), "-o", "BatchMode=yes", "root@127.0.0.1", "true"],
                                   capture_output=True, text=True)
            if probe.returncode == 0:
                break
            if sshd.poll() is not None or time.monotonic() > deadline:
                with open(os.path.join(folder, "sshd.log")) as f:
                    raise RuntimeError(f"loopback sshd did not accept the key: {probe.stderr.strip()} "
                                       f"{f.read().strip()[-300:]}")
            time.sleep(0.2)
        yield {"DMLBED_SSH_OPTIONS": options}
    finally:
        # Sessions are sshd's children in sessions of their own: stop any still open (they belong to this sshd).
        sessions = _session_children(sshd.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(sshd.pid, 15)
        for pid in sessions:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
        with contextlib.suppress(subprocess.TimeoutExpired):
            sshd.wait(timeout=5)
        shutil.rmtree(folder, ignore_errors=True)


def _session_children(parent: int):
    """PIDs of sshd session processes forked by parent (their parent PID is sshd's)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == parent:
                        pids.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return pids
