"""Open a page in headless Chromium over the DevTools protocol (on a pipe: no port, no extra library): its console
errors, a value the page computes and a screenshot."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from typing import Any, Dict, List, Optional

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def browser() -> Optional[str]:
    """The headless browser on PATH, if any."""
    return next((p for p in map(shutil.which, BROWSERS) if p), None)


class Page:
    """One page loaded in a fresh headless browser; use as a context manager."""

    def __init__(self, url: str, width: int = 1200, height: int = 900, timeout_s: float = 60.0):
        self.timeout_s, self.url, self.next_id, self.events = timeout_s, url, 0, []
        self.profile = tempfile.mkdtemp(prefix="dmlbed-browser-")
        to_browser, self.write_fd = os.pipe()
        self.read_fd, from_browser = os.pipe()

        def on_fds_3_and_4():  # the protocol's pipe: the browser reads fd 3 and writes fd 4
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser, from_browser)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.proc = subprocess.Popen(
            [browser(), "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            close_fds=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=on_fds_3_and_4)
        os.close(to_browser)
        os.close(from_browser)
        self.buffer = b""
        self.session = None

    def __enter__(self) -> "Page":
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.call(f"{domain}.enable")
        self.call("Page.navigate", url=self.url)
        self.wait_event("Page.loadEventFired")
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.session = None
            self.call("Browser.close")
        except (OSError, RuntimeError, TimeoutError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.write_fd)
        os.close(self.read_fd)
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, **params) -> Dict[str, Any]:
        """Send one command (to the page's session once attached) and return its result."""
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params}
        if self.session:
            message["sessionId"] = self.session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.receive()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str) -> Dict[str, Any]:
        """Wait for an event of the page (earlier ones kept in self.events)."""
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            event = self.receive()
            self.events.append(event)
            if event.get("method") == method:
                return event

    def receive(self) -> Dict[str, Any]:
        """The next message from the browser."""
        deadline = time.time() + self.timeout_s
        while b"\0" not in self.buffer:
            left = deadline - time.time()
            if left <= 0 or not select.select([self.read_fd], [], [], left)[0]:
                raise TimeoutError("the browser did not answer")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def evaluate(self, expression: str) -> Any:
        """A JavaScript expression's value in the page."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def errors(self) -> List[str]:
        """Every console error, uncaught exception and failed load the page logged."""
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e.get("method") == "Runtime.exceptionThrown":
                out.append(p["exceptionDetails"].get("text", "exception"))
            elif e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value")) for a in p.get("args", [])))
            elif e.get("method") == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(p["entry"].get("text", "error"))
        return out

    def screenshot(self, path: str) -> int:
        """The whole page as a PNG file; its size in bytes."""
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"])
        with open(path, "wb") as f:
            f.write(data)
        return len(data)
