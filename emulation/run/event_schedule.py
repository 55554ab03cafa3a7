"""Link events applied to the emulated network while the ranks train: an iteration event when the first rank has
recorded the iteration before it, a time event that long after the first iteration began (the ranks' records are
the clock); each event's time of application kept for the report."""

from __future__ import annotations

import json
import threading
import time
from typing import Callable, Dict, Optional, Sequence, Tuple

from emulation.core.events import UP, LinkEvent
from workloads.runfolder import RankFiles

POLL_S = 0.005


def recorded(files: RankFiles, ranks: int, known: Optional[float]) -> Tuple[int, Optional[float], bool]:
    """The most iterations any rank has recorded, when the first iteration began (None before any record) and
    whether every rank's first record was there (then that time is final: pass it back as known, and the first
    records are not parsed again on every poll)."""
    most, found = 0, []
    for r in range(ranks):
        try:
            with open(files.records(r)) as f:
                lines = [line for line in f if line.endswith("\n")]
        except FileNotFoundError:
            continue
        most = max(most, len(lines))
        if lines and known is None:
            found.append(json.loads(lines[0])["start"])
    if known is not None:
        return most, known, True
    return most, min(found, default=None), len(found) == ranks


def apply_event(hosts, event: LinkEvent, dilation: float) -> None:
    """One event on the emulated network: a link shaped at its new rate (dilated), or taken down or up."""
    if event.state is None:
        hosts.set_link_rate(event.link, event.mbps / dilation)
    else:
        hosts.set_link_state(event.link, event.state == UP)


class EventSchedule:
    """Applies the run's link events (apply: one event to the network) from a thread between start and stop."""

    def __init__(self, events: Sequence[LinkEvent], files: RankFiles, ranks: int, dilation: float,
                 apply: Callable[[LinkEvent], object]):
        self.events, self.files, self.ranks, self.dilation, self.apply = tuple(events), files, ranks, dilation, apply
        self.applied: Dict[int, float] = {}  # event index -> wall time its change of the data plane began
        self.took: Dict[int, float] = {}  # event index -> seconds applying it took (BCube: the hosts' reroute too)
        self.error: Optional[BaseException] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        """Watch the ranks' records and apply each event when due."""
        if self.events:
            self._thread = threading.Thread(target=self._run, name="link events", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop watching (events not yet due are not applied)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _due(self, index: int, done: int, first: Optional[float], now: float) -> bool:
        event = self.events[index]
        if event.iteration is not None:
            return done >= event.iteration
        return first is not None and now >= first + event.at_s * self.dilation

    def _run(self) -> None:
        known = None
        try:
            while not self._stop.is_set() and len(self.applied) < len(self.events):
                done, first, final = recorded(self.files, self.ranks, known)
                known = first if final else None
                for n, event in enumerate(self.events):
                    if n not in self.applied and self._due(n, done, first, time.time()):
                        began = time.time()
                        self.apply(event)
                        self.applied[n], self.took[n] = began, time.time() - began
                self._stop.wait(POLL_S)
        except BaseException as exc:  # reported by the run once the ranks are done
            self.error = exc
