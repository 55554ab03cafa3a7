"""Progress a command shows on stderr, so that stdout stays clean for --json: its log lines, and a run's iterations
(a tqdm bar on a terminal, one plain line per update anywhere else, a log file or CI, so that a redirected run's
log holds each update once)."""

from __future__ import annotations

import sys
from typing import Optional, TextIO


def log(msg: str) -> None:
    """One progress line to stderr."""
    print(f"[dmlbed] {msg}", file=sys.stderr, flush=True)


class Progress:
    """Iterations done out of a total, shown under a title."""

    def __init__(self, title: str, total: int, stream: Optional[TextIO] = None):
        self.title, self.total = title, total
        self.stream = stream or sys.stderr
        self.bar = None
        self.shown = -1
        if self.stream.isatty():
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=title, unit="it", file=self.stream)

    def update(self, done: int, gst_s: Optional[float] = None) -> None:
        """Show that done iterations have finished (the last one's GST when known)."""
        if done == self.shown:
            return
        self.shown = done
        if self.bar is not None:
            self.bar.n = done
            if gst_s is not None:
                self.bar.set_postfix(gst=f"{gst_s:.3f}s", refresh=False)
            self.bar.refresh()
            return
        gst = f", GST {gst_s:.3f} s" if gst_s is not None else ""
        print(f"{self.title}: {done}/{self.total} iterations{gst}", file=self.stream, flush=True)

    def close(self) -> None:
        """End the bar (nothing to end for plain lines)."""
        if self.bar is not None:
            self.bar.close()
