"""SIGINT, SIGTERM and SIGHUP all end a run the same way: teardown, a summary naming the signal, exit 128+n."""

from __future__ import annotations

import signal
from typing import Optional

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.name = signal.Signals(signum).name

    @property
    def exit_code(self) -> int:
        """The shell's convention for death by signal n."""
        return 128 + self.signum


_received: Optional[int] = None


def _handler(signum, frame) -> None:
    # Only the first signal interrupts: a second one (impatient Ctrl-C, a terminal closing) must not abort the
    # teardown the first one started.
    global _received
    if _received is None:
        _received = signum
        raise Interrupted(signum)


def install() -> None:
    """Make every handled signal raise Interrupted once in the main thread."""
    global _received
    _received = None
    for sig in HANDLED:
        signal.signal(sig, _handler)


def received() -> Optional[int]:
    """The signal that interrupted this process, if any."""
    return _received


def error_of(exc: BaseException) -> str:
    """The summary's error for an interruption."""
    name = exc.name if isinstance(exc, Interrupted) else "SIGINT"
    return f"interrupted by {name}"
