"""A switch port queue looked at every few milliseconds while traffic runs: a bash loop of `tc -s qdisc show` on the
node that holds the queue (a switch's port, or a shaping namespace's), its log parsed after (core/queue_samples)."""

from __future__ import annotations

import os
from typing import List

from emulation.core.queue_samples import QueueSample, parse_samples

PERIOD_S = 0.005     # the least pause between looks; spawning tc takes about as long again: a look every ~10 ms here
PAUSES = 3           # the pause after a look, at least, in looks' lengths
SPARE_S = 30.0       # the loop ends by itself this long after the traffic should have, should dmlbed not stop it


class QueueSampler:
    """Context manager: samples one queue (node, interface) into a log file until it leaves."""

    def __init__(self, enet, node: str, dev: str, log_path: str, seconds: float, period_s: float = PERIOD_S):
        self.enet, self.node, self.dev, self.log_path = enet, node, dev, log_path
        self.seconds, self.period_s = seconds, period_s
        self.proc = None

    def loop(self) -> str:
        """The bash loop: a stamp, then the queue's statistics, then a pause of at least PAUSES times the look, so the
        sampler never takes more than a quarter of a core (spawning tc costs a software-emulated VM a tenth of a
        second, and a starved sender there stopped filling the queue), until its own deadline."""
        period_us = int(self.period_s * 1e6)
        return (f"end=$((SECONDS + {int(self.seconds + SPARE_S)})); while [ $SECONDS -lt $end ]; do "
                f"t0=$EPOCHREALTIME; echo T $t0; tc -s qdisc show dev {self.dev}; t1=$EPOCHREALTIME; "
                f"d=$(( (${{t1/./}} - ${{t0/./}}) * {PAUSES} )); [ $d -lt {period_us} ] && d={period_us}; "
                f"sleep $((d / 1000000)).$(printf %06d $((d % 1000000))); done")

    def __enter__(self) -> "QueueSampler":
        os.makedirs(os.path.dirname(self.log_path) or ".", exist_ok=True)
        with open(self.log_path, "w") as log:
            self.proc = self.enet.popen(self.node, ["bash", "-c", self.loop()], stdout=log,
                                        stderr=open(os.devnull, "w"))
        return self

    def __exit__(self, *exc) -> None:
        if self.proc is not None:
            self.enet.stop_process(self.proc)
            self.proc = None

    def samples(self) -> List[QueueSample]:
        """What the loop wrote (after it stopped)."""
        try:
            with open(self.log_path) as f:
                return parse_samples(f.read())
        except OSError:
            return []

    def where(self) -> dict:
        """The queue looked at (for reports)."""
        return {"node": self.node, "interface": self.dev, "period_s": self.period_s}

