"""An emulated device's backward pass, gradient by gradient: each parameter's gradient is held back until a device
of the run's speed would have produced it, so DDP hands its buckets over when that device would. Targets come from
each layer's share of the model's FLOPs (the same shares theory and simulation use), or, for a model whose FLOPs
are unknown, from the previous iteration's measured share; under time dilation without a device time every
gradient waits until F times its real offset."""

from __future__ import annotations

import time
from functools import partial
from typing import Dict, List, Optional, Sequence

from workloads.overlap import FORWARD_SHARE, ready_fractions


class BackwardPacer:
    """Hooks every parameter's gradient accumulation; begin() before backward, end() after it."""

    def __init__(self, params: Sequence, flops: Optional[Sequence[float]], device_s: Optional[float] = None,
                 stretch: float = 1.0, order: Optional[Sequence[int]] = None):
        self.fractions: Optional[List[float]] = ready_fractions(flops, order) if flops is not None else None
        self.measured = flops is None  # shares learned from each iteration's real offsets
        self.budget = device_s * (1 - FORWARD_SHARE) if device_s else None
        self.stretch = stretch if not device_s and stretch > 1 else None
        self.handles = [p.register_post_accumulate_grad_hook(partial(self._ready, i)) for i, p in enumerate(params)]
        self.begin()

    def begin(self, device_s: Optional[float] = None) -> None:
        """Backward starts now (device_s: this iteration's device time, when it is drawn per iteration)."""
        if device_s:
            self.budget = device_s * (1 - FORWARD_SHARE)
        self.wall0, self.t0, self.cpu0 = time.time(), time.perf_counter(), time.thread_time()
        self.slept, self.offsets, self.last_wall, self.last_perf = 0.0, {}, None, None
        self.cpu_at_last = self.cpu0

    def _target(self, i: int, real: float) -> Optional[float]:
        if self.budget is not None and self.fractions is not None:
            return self.t0 + self.budget * self.fractions[i]
        if self.stretch is not None:
            return self.t0 + self.stretch * real
        return None

    def _ready(self, i: int, param) -> None:
        now = time.perf_counter()
        real = now - self.t0 - self.slept
        self.offsets[i] = real
        target = self._target(i, real)
        if target is not None and target > now:
            time.sleep(target - now)
            self.slept += time.perf_counter() - now
        self.last_wall, self.last_perf, self.cpu_at_last = time.time(), time.perf_counter(), time.thread_time()

    def end(self) -> Dict[str, float]:
        """When the last gradient was ready (wall clock), the real compute and CPU time up to it, and its elapsed
        time with the pacing; a model without FLOPs learns its shares from this iteration."""
        if self.last_perf is None:  # no gradient (a frozen model)
            self.last_wall, self.last_perf, self.cpu_at_last = time.time(), time.perf_counter(), time.thread_time()
        elapsed = self.last_perf - self.t0
        if self.measured and self.offsets:
            total = max(self.offsets.values()) or 1.0
            self.fractions = [self.offsets.get(i, 0.0) / total for i in range(len(self.handles))]
        return {"start": self.wall0, "end": self.last_wall, "real": elapsed - self.slept,
                "cpu": self.cpu_at_last - self.cpu0, "elapsed": elapsed}

    def close(self) -> None:
        """Remove the hooks."""
        for h in self.handles:
            h.remove()
