"""The rank fork server: one process imports torch and the rank modules once, then forks every rank of a run from
itself, each entering its host's network namespace, so a rank costs its model and buffers, not a fresh interpreter.

Protocol (JSON lines): requests on stdin {"module", "args", "stderr", "netns", "cwd"}; replies on stdout
{"pid": N} or {"error": "..."} per request, in order, and {"exit": pid, "code": returncode} when a rank ends
(Popen's convention: -N for a signal). After stdin closes the server reports the remaining exits and leaves.
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import runpy
import select
import signal
import sys
import traceback
from typing import Dict, List

CLONE_NEWNET = 0x40000000
PRELOAD = ("torch", "torch.distributed", "torch.nn.functional", "numpy", "workloads.worker", "workloads.bench_worker")
POLL_S = 0.05


def preload(extra: List[str]) -> None:
    """Import everything a rank would, and every algorithm's strategy, so forked ranks share it."""
    for name in (*PRELOAD, *extra):
        importlib.import_module(name)
    from workloads.algorithms import ALGORITHMS
    for algo in ALGORITHMS.values():
        if algo.strategy:
            importlib.import_module(algo.strategy.partition(":")[0])
    warm_up()
    gc.collect()
    gc.freeze()  # objects made so far are never scanned again: the collector does not dirty the shared pages


def warm_up() -> None:
    """One training step of a tiny model: torch imports most of itself lazily on the first optimizer step (about
    800 modules, torch._dynamo and sympy among them), which every rank would otherwise import by itself. One intra-op
    thread, as in the ranks: no thread pool exists to be lost in the fork."""
    import torch
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(72, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    torch.nn.functional.cross_entropy(model(torch.randn(2, 1, 8, 8)), torch.tensor([0, 1])).backward()
    optimizer.step()


def enter_netns(pid: int) -> None:
    """Move this process into the network namespace of process pid (setns(2); os.setns is Python 3.12+)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into the network namespace of pid {pid}: {os.strerror(err)}")
    finally:
        os.close(fd)


def set_title(module: str, args: List[str]) -> None:
    """Show the rank's own command line in ps and /proc/PID/cmdline, as if it had been started by itself."""
    try:
        from setproctitle import setproctitle
    except ImportError:  # an install without it: ranks show the server's command line
        return
    setproctitle(" ".join([sys.executable, "-m", module, *args]))


def run_child(request: dict, channel_fds: List[int]) -> None:
    """In the forked child: become the rank (own session, host namespace, its stderr file) and never return."""
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if request.get("netns"):
            enter_netns(int(request["netns"]))
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)  # replaces the request pipe
        os.dup2(null, 1)
        os.dup2(err, 2)
        for fd in {err, null, *channel_fds} - {0, 1, 2}:
            os.close(fd)
        os.chdir(request["cwd"])
        sys.argv = [request["module"], *request["args"]]
        set_title(request["module"], request["args"])
        runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


def returncode(status: int) -> int:
    """A wait status as Popen reports it: the exit code, or -N for signal N."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


class Server:
    """Reads requests, forks ranks, reports their pids and exits."""

    def __init__(self, requests: int, replies: int):
        self.requests, self.replies = requests, replies
        self.children: Dict[int, bool] = {}
        self.buffer = b""
        self.open = True

    def reply(self, message: dict) -> None:
        """One JSON line to the client (a closed pipe means the client is gone: nothing more to say)."""
        try:
            os.write(self.replies, (json.dumps(message) + "\n").encode())
        except BrokenPipeError:
            pass

    def fork(self, request: dict) -> None:
        """Fork one rank and report its pid."""
        try:
            pid = os.fork()
        except OSError as exc:
            self.reply({"error": f"fork: {exc}"})
            return
        if pid == 0:
            run_child(request, [self.requests, self.replies])
        self.children[pid] = True
        self.reply({"pid": pid})

    def read_requests(self) -> None:
        """Handle every complete request line waiting on stdin; note when it closes."""
        data = os.read(self.requests, 65536)
        if not data:
            self.open = False
            return
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            if line.strip():
                try:
                    self.fork(json.loads(line))
                except (ValueError, KeyError, TypeError) as exc:
                    self.reply({"error": f"bad request: {exc}"})

    def reap(self) -> None:
        """Report every rank that has ended."""
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            self.children.pop(pid, None)
            self.reply({"exit": pid, "code": returncode(status)})

    def serve(self) -> int:
        """Until stdin has closed and every rank has been reported."""
        while self.open or self.children:
            if self.open:
                ready, _, _ = select.select([self.requests], [], [], POLL_S)
                if ready:
                    self.read_requests()
            else:
                select.select([], [], [], POLL_S)
            self.reap()
        return 0


def main() -> int:
    """Preload, then serve on a private copy of stdout (fd 1 itself goes to /dev/null so nothing stray reaches it)."""
    replies = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    try:
        preload(sys.argv[1:])
    except BaseException:
        traceback.print_exc()
        os.write(replies, (json.dumps({"error": "preload failed: see the fork server's stderr"}) + "\n").encode())
        return 1
    os.write(replies, b'{"ready": true}\n')
    return Server(0, replies).serve()


if __name__ == "__main__":
    sys.exit(main())
