"""One emulated network per machine: a lock held from bring-up to teardown, naming its holder."""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from typing import Optional

from emulation.net.runstate import STATE_ROOT

LOCK_NAME = "dmlbed-network.lock"
LOCK_ROOT = os.path.dirname(STATE_ROOT)  # beside the run records, not among them


class NetworkBusy(RuntimeError):
    """Another dmlbed process holds the network lock."""


def describe(holder: Optional[dict]) -> str:
    """'pid 123 (dmlbed run ...) since 12:00:01' or a fallback."""
    if not holder:
        return "another dmlbed process"
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0)))
    return f"pid {holder.get('pid')} ({holder.get('command', '?')}) since {since}"


class NetworkLock:
    """A machine-wide exclusive lock (flock on /run/dmlbed-network.lock); re-entrant within one process, released
    by the kernel when the holder dies, so a crashed run never blocks the next one."""

    _held = 0
    _file = None

    def __init__(self, root: str = LOCK_ROOT, wait: bool = False, timeout_s: Optional[float] = None):
        self.path = os.path.join(root, LOCK_NAME)
        self.wait, self.timeout_s = wait, timeout_s

    def holder(self) -> Optional[dict]:
        """Who holds the lock now (from the file's content), or None."""
        try:
            with open(self.path) as f:
                return json.loads(f.read() or "null")
        except (OSError, ValueError):
            return None

    def __enter__(self) -> "NetworkLock":
        cls = NetworkLock
        if cls._held:
            cls._held += 1
            return self
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        f = open(self.path, "a+")
        deadline = None if self.timeout_s is None else time.monotonic() + self.timeout_s
        while True:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not self.wait or (deadline is not None and time.monotonic() > deadline):
                    holder = self.holder()
                    f.close()
                    raise NetworkBusy(f"an emulated network is in use by {describe(holder)}: one network at a time "
                                      f"on a machine (pass --wait to queue behind it)") from None
                time.sleep(0.5)
        f.seek(0)
        f.truncate()
        f.write(json.dumps({"pid": os.getpid(), "command": " ".join(["dmlbed"] + sys.argv[1:])[:200],
                            "since": time.time()}))
        f.flush()
        cls._file, cls._held = f, 1
        return self

    def __exit__(self, *exc) -> None:
        cls = NetworkLock
        cls._held -= 1
        if cls._held == 0 and cls._file is not None:
            cls._file.seek(0)
            cls._file.truncate()
            fcntl.flock(cls._file, fcntl.LOCK_UN)
            cls._file.close()
            cls._file = None
