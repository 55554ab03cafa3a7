"""Starting ranks from the rank fork server (workloads/forkserver.py): the server is started once per set of ranks,
imports torch once, and forks each rank into its host's network namespace; each rank is a Popen-like handle."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional

SERVER_MODULE = "workloads.forkserver"
READY_TIMEOUT_S = 120.0  # importing torch on a busy machine
RANK_START_ENV = "DMLBED_RANK_START"  # "fork" (default) or "exec": a fresh interpreter per rank, as before
RANK_STARTS = ("fork", "exec")


class ForkServerError(RuntimeError):
    """The fork server did not start or could not fork a rank; the message says why."""


def rank_start() -> str:
    """How ranks start on this run: from the fork server, or each as its own interpreter (DMLBED_RANK_START)."""
    value = os.environ.get(RANK_START_ENV, "fork")
    if value not in RANK_STARTS:
        raise ValueError(f"{RANK_START_ENV}={value!r} is not valid: valid are {', '.join(RANK_STARTS)}")
    return value


@contextlib.contextmanager
def ranks_started_by(method: Optional[str]):
    """Within the block, ranks start by `method` (fork or exec; None: as DMLBED_RANK_START says)."""
    if method is None:
        yield
        return
    before = os.environ.get(RANK_START_ENV)
    os.environ[RANK_START_ENV] = method
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(RANK_START_ENV, None)
        else:
            os.environ[RANK_START_ENV] = before


class ForkedRank:
    """A rank forked by the server, with the part of subprocess.Popen's interface the runners use."""

    def __init__(self, pid: int, server: "ForkServer"):
        self.pid = pid
        self.server = server
        self.returncode: Optional[int] = None

    def poll(self) -> Optional[int]:
        """The exit code once the server has reported it, else None."""
        if self.returncode is None:
            self.returncode = self.server.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        """Block until the rank ends; subprocess.TimeoutExpired after timeout seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"rank pid {self.pid}", timeout)
            self.server.wait_for_news(0.1 if deadline is None else min(0.1, max(0.0, deadline - time.monotonic())))
        return self.returncode

    def send_signal(self, sig: int) -> None:
        """Signal the rank (not its children)."""
        if self.poll() is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        """SIGTERM."""
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL."""
        self.send_signal(signal.SIGKILL)


class ForkServer:
    """One fork server process: start(), fork() each rank, then close(); it leaves after its last rank."""

    def __init__(self, cwd: str, stderr_path: str):
        self.cwd = cwd
        self.stderr_path = stderr_path
        self.proc: Optional[subprocess.Popen] = None
        self.exits: Dict[int, int] = {}
        self.replies: List[dict] = []
        self.news = threading.Condition()
        self.reader: Optional[threading.Thread] = None
        self.gone = False
        self.ready = False
        self.adopted = False  # recorded by the hosts that stop it

    def start(self) -> "ForkServer":
        """Start the server and wait until it has imported everything (ForkServerError naming its last line)."""
        return self.launch().wait_ready()

    def launch(self) -> "ForkServer":
        """Start the server without waiting for its imports (they can overlap other work, e.g. a network's
        bring-up)."""
        with open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", SERVER_MODULE], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, cwd=self.cwd, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True, name="fork-server-replies")
        self.reader.start()
        return self

    def wait_ready(self) -> "ForkServer":
        """Wait until the launched server has imported everything (once; ForkServerError naming its last line)."""
        if self.ready:
            return self
        reply = self._next_reply(READY_TIMEOUT_S)
        if not reply.get("ready"):
            raise ForkServerError(f"the rank fork server did not start: {reply.get('error', 'no reply')}; "
                                  f"{self._last_error_line()}")
        self.ready = True
        return self

    def fork(self, module: str, args: List[str], stderr: str, netns: Optional[int]) -> ForkedRank:
        """Fork `python -m module args` (stderr to its file) in the namespace of pid netns (None: this one)."""
        request = {"module": module, "args": list(args), "stderr": stderr, "netns": netns, "cwd": self.cwd}
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise ForkServerError(f"the rank fork server has gone: {self._last_error_line()}") from None
        reply = self._next_reply(30.0)
        if "pid" not in reply:
            raise ForkServerError(f"the rank fork server could not start a rank: {reply.get('error', 'no reply')}")
        return ForkedRank(int(reply["pid"]), self)

    def close(self) -> None:
        """No more ranks: the server leaves once every rank it forked has ended."""
        if self.proc is not None and self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass

    def exit_code(self, pid: int) -> Optional[int]:
        """A rank's reported exit code; if the server has gone without reporting it, what is left to know."""
        with self.news:
            if pid in self.exits:
                return self.exits[pid]
            if not self.gone:
                return None
        return None if _alive(pid) else -signal.SIGKILL  # orphaned when the server was killed: reaped by init

    def wait_for_news(self, timeout: float) -> None:
        """Sleep until the server reports something or timeout passes."""
        with self.news:
            self.news.wait(timeout)

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            with self.news:
                if "exit" in message:
                    self.exits[int(message["exit"])] = int(message["code"])
                else:
                    self.replies.append(message)
                self.news.notify_all()
        with self.news:
            self.gone = True
            self.news.notify_all()

    def _next_reply(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        with self.news:
            while not self.replies:
                left = deadline - time.monotonic()
                if self.gone or left <= 0:
                    return {"error": "it exited" if self.gone else f"no reply within {timeout:.0f}s"}
                self.news.wait(left)
            return self.replies.pop(0)

    def _last_error_line(self) -> str:
        try:
            with open(self.stderr_path) as f:
                lines = [line.strip() for line in f if line.strip()]
        except OSError:
            return "no stderr"
        return lines[-1] if lines else "nothing on its stderr"


def _alive(pid: int) -> bool:
    """Whether pid still exists (and is not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False
