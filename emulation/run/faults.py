"""Emulator faults injected on purpose, so a user (or a test) can see the fidelity verdict catch them: busy processes
that take the machine's cores from the ranks and the software switch while the ranks train."""

from __future__ import annotations

import subprocess
import sys
from typing import List

BUSY_LOOP = "while True: pass"


class CpuHog:
    """`count` busy processes for the length of the block, each stopped by its PID on the way out."""

    def __init__(self, count: int):
        self.count = count
        self.procs: List[subprocess.Popen] = []

    def __enter__(self) -> "CpuHog":
        for _ in range(self.count):
            self.procs.append(subprocess.Popen([sys.executable, "-c", BUSY_LOOP], stdin=subprocess.DEVNULL,
                                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        return self

    def __exit__(self, *exc) -> None:
        for proc in self.procs:
            proc.kill()
        for proc in self.procs:
            proc.wait()
        self.procs = []
