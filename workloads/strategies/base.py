"""What every synchronization strategy gets (the rank's context, the model's state, a compute clock) and the
interface each one implements. Modelled on torch's DDP communication hooks: small state objects, one
class per way of synchronizing, chosen by the algorithm's descriptor."""

from __future__ import annotations

import hashlib
import os
import time
from contextlib import contextmanager
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from emulation.core.topology import job_view, parse
from workloads import verify
from workloads.algorithms import get as get_algorithm
from workloads.channel import Channel
from workloads.rankconfig import RankConfig
from workloads.records import IterationRecord
from workloads.runfolder import RankFiles
from workloads.schedule import factor_of


class RankContext:
    """What one rank knows: its config, the topology (parsed once), its algorithm and typed options, its role,
    where its files go."""

    def __init__(self, cfg: RankConfig):
        self.cfg = cfg
        self.rank, self.ranks = cfg.rank, cfg.ranks
        self.topo = job_view(parse(cfg.topology), cfg.job_hosts) if cfg.job_hosts else parse(cfg.topology)
        self.algorithm = get_algorithm(cfg.algo)
        self.options = self.algorithm.options_of(cfg.options)
        self.servers = self.algorithm.resolve_servers(cfg.servers)
        self.contributors = self.algorithm.contributors(self.topo, self.servers)
        self.is_server = self.rank not in self.contributors
        self.files = RankFiles(cfg.out_dir)

    @property
    def role(self) -> str:
        """'server' (aggregates only) or 'worker' (trains)."""
        return "server" if self.is_server else "worker"

    @property
    def workers(self) -> int:
        """Number of ranks that train."""
        return len(self.contributors)

    def name(self, rank: int) -> str:
        """'h3 (rank 3)' for messages."""
        return f"{self.topo.hosts[rank].name} (rank {rank})"

    def channel(self, plan, layout, port_offset: int = 0) -> Channel:
        """The connections and executor of one plan for this rank (separate port offsets for concurrent plans)."""
        return Channel(self.cfg, self.topo, plan, layout, port_offset)

    def check(self, iteration: int, name: str, kind: str, side: str, array: np.ndarray,
              counts: Dict[str, int]) -> None:
        """In the first iteration, save this rank's input or output of a result check (see workloads.verify)."""
        if iteration == 0:
            self.save_check(name, kind, side, array, counts)

    def save_check(self, name: str, kind: str, side: str, array: np.ndarray, counts: Dict[str, int]) -> None:
        """Save this rank's input or output of a result check now (unless the run turned checks off)."""
        if self.cfg.verify:
            verify.save(self.files.checks, name, kind, side, self.rank, np.asarray(array), counts)


class ModelState:
    """The model's parameters, gradients and SGD optimizer as flat fp32 vectors in layer-major order."""

    def __init__(self, model: torch.nn.Module, lr: float, momentum: float = 0.0, weight_decay: float = 0.0,
                 schedule: str = "constant", iterations: int = 1):
        self.model = model
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.sizes = [p.numel() for p in self.params]
        self.shapes = [tuple(p.shape) for p in self.params]
        self.total = sum(self.sizes)
        self.optimizer = torch.optim.SGD(self.params, lr=lr, momentum=momentum, weight_decay=weight_decay)
        factor = factor_of(schedule)  # parsed once, not every iteration
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda it: factor(it, iterations))
        self.lr = lr
        self._flat = torch.zeros(self.total)
        # .grad as views of one flat buffer (DDP's gradient_as_bucket_view): backward accumulates into it in place,
        # so the flat gradient needs no copy and no second gradient-sized buffer
        self._views = []
        offset = 0
        for p in self.params:
            p.grad = self._flat[offset:offset + p.numel()].view_as(p)
            self._views.append(p.grad)
            offset += p.numel()

    def zero_grad(self) -> None:
        """Clear gradients (kept allocated)."""
        for p in self.params:
            if p.grad is not None:
                p.grad.zero_()

    def gradient(self) -> torch.Tensor:
        """The local gradient as one flat tensor (a buffer reused every iteration): .grad itself where backward
        kept accumulating into the views, else gathered into it."""
        if any(p.grad is not v for p, v in zip(self.params, self._views)):
            torch.cat([p.grad.reshape(-1) for p in self.params], out=self._flat)
        return self._flat

    def set_gradient(self, flat: torch.Tensor) -> None:
        """Write a flat gradient back into the parameters' .grad."""
        if flat.data_ptr() == self._flat.data_ptr() and all(p.grad is v for p, v in zip(self.params, self._views)):
            return  # already there
        offset = 0
        for p in self.params:
            if p.grad is None:
                p.grad = torch.empty_like(p)
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()

    def step(self) -> None:
        """One SGD step with the gradient in .grad, then the schedule's next learning rate."""
        self.optimizer.step()
        self.scheduler.step()

    def parameters_flat(self) -> np.ndarray:
        """A copy of every parameter, flat."""
        return torch.cat([p.detach().reshape(-1) for p in self.params]).numpy().copy()

    def load(self, flat: np.ndarray) -> None:
        """Overwrite the parameters from a flat vector."""
        with torch.no_grad():
            offset = 0
            for p in self.params:
                p.copy_(torch.from_numpy(flat[offset:offset + p.numel()]).view_as(p))
                offset += p.numel()

    def checksum(self) -> str:
        """SHA-256 of every parameter's bytes: equal across replicas iff the replicas are identical."""
        h = hashlib.sha256()
        for p in self.params:
            h.update(p.detach().contiguous().numpy().tobytes())
        return h.hexdigest()


DEVICE_NICE = 10  # scheduling niceness of the compute thread while a device is emulated


@contextmanager
def device_priority(emulated: bool):
    """While an emulated device computes, the compute thread yields the CPU to the threads that move data: a
    device computes on its accelerator, and on 2 cores a burst of nine ranks' backward passes would otherwise
    slow the emulated links exactly while synchronization overlaps backward (BML on bcube:3,2 at 100 Mbit/s: links
    at 0.83 of their rate while sending, against 0.98 without overlap). Only the calling thread's niceness changes
    (Linux keeps it per thread); restoring it needs root, which emulated runs have."""
    if not emulated:
        yield
        return
    before = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, before + DEVICE_NICE)
    except OSError:
        yield
        return
    try:
        yield
    finally:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, before)
        except OSError:  # not root: the thread stays nicer (it only computes, and it is paced)
            pass


@contextmanager
def normal_priority(emulated: bool):
    """Undo device_priority for a while (data movement inside a compute segment)."""
    if not emulated:
        yield
        return
    before = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, before - DEVICE_NICE)
    except OSError:  # lowering niceness needs root: the exchange runs at the compute's priority
        yield
        return
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)


class ComputeClock:
    """Times an iteration's compute segments (wall and CPU time of this thread) and, given a device time S
    (--compute-time), stretches them so the iteration's compute takes S: each segment is padded in proportion
    to its share of the previous iteration's real compute, and finish() makes up the rest. A real compute
    slower than S cannot be hidden: the record says so (compute_over_budget). Under time dilation F without a
    device time, every segment is stretched to F times its real length. With a device time the compute runs at
    a lower scheduling priority than the data movement (device_priority)."""

    def __init__(self, device_s: Optional[float] = None, stretch: float = 1.0,
                 per_iteration: Optional[Sequence[float]] = None):
        self.fixed_s = device_s if device_s else None
        self.per_iteration = per_iteration  # device seconds of each iteration (drawn), in place of device_s
        self.device_s = self.fixed_s
        self.stretch = stretch  # time dilation without a device time: every segment takes stretch x real
        self.forward_share: Optional[float] = None  # set where a pacer times backward per gradient
        self.previous_real: Optional[float] = None
        self.begin()

    def begin(self, iteration: int = 0) -> None:
        """Start an iteration (its own device time when they are drawn per iteration)."""
        if self.per_iteration is not None:
            self.device_s = self.per_iteration[iteration] if iteration < len(self.per_iteration) else self.fixed_s
        self.real = self.cpu = self.elapsed = 0.0
        self.intervals: List[Tuple[float, float]] = []
        self.paced = False
        self.holes: List[Tuple[float, float, float, float]] = []  # paused spans in the open segment (see pause)

    @contextmanager
    def segment(self):
        """Time one piece of compute (and pad it when emulating a device: with a fixed forward share, up to that
        share of the device time in all; else in proportion to its share of the previous iteration's real
        compute)."""
        start, wall0, cpu0 = time.time(), time.perf_counter(), time.thread_time()
        self.holes = []
        with device_priority(self.device_s is not None):
            yield
        real = time.perf_counter() - wall0 - sum(h[2] for h in self.holes)
        self.cpu += time.thread_time() - cpu0 - sum(h[3] for h in self.holes)
        self.real += real
        slept = 0.0
        if self.device_s and self.forward_share is not None:
            slept = self._sleep(self.device_s * self.forward_share - self.elapsed - real)
        elif self.device_s and self.previous_real:
            budget = self.device_s - self.elapsed - real
            slept = self._sleep(min(real * (self.device_s / self.previous_real - 1.0), budget))
        elif not self.device_s and self.stretch > 1:
            slept = self._sleep(real * (self.stretch - 1.0))
        self.elapsed += real + slept
        edges = [start] + [t for a, b, _, _ in self.holes for t in (a, b)] + [time.time()]
        self.intervals += [(a, b) for a, b in zip(edges[::2], edges[1::2]) if b > a]
        self.holes = []

    @contextmanager
    def pause(self):
        """Inside a segment, time that is not compute (an expert-parallel layer's all-to-all): left out of the
        segment's real and CPU time and of its intervals, and run at the thread's normal priority."""
        start, wall0, cpu0 = time.time(), time.perf_counter(), time.thread_time()
        with normal_priority(self.device_s is not None):
            yield
        self.holes.append((start, time.time(), time.perf_counter() - wall0, time.thread_time() - cpu0))

    @staticmethod
    def _sleep(seconds: float) -> float:
        """Sleep; returns the seconds actually slept."""
        if seconds <= 0:
            return 0.0
        t0 = time.perf_counter()
        time.sleep(seconds)
        return time.perf_counter() - t0

    def add(self, start: float, end: float, real: float, cpu: float, elapsed: float) -> None:
        """A segment timed (and paced) elsewhere: the backward pass a BackwardPacer paced per gradient."""
        self.real += real
        self.cpu += cpu
        self.elapsed += elapsed
        self.intervals.append((start, end))
        self.paced = True

    def finish(self, rec: IterationRecord) -> None:
        """End the iteration's compute: pad to the device time (unless a pacer already did, per gradient) and fill
        the record's compute fields."""
        if self.device_s and not self.paced:
            self.elapsed += self._sleep(self.device_s - self.elapsed)
        if self.device_s:
            rec.compute_over_budget = self.real > self.device_s
        rec.compute_s = self.elapsed
        rec.compute_real_s = self.real
        rec.compute_cpu_s = self.cpu
        self.previous_real = self.real


class Strategy:
    """How a rank synchronizes. Workers: before_compute, forward and backward (timed by the compute clock),
    synchronize (which also applies the result, or leaves the record pending until it does); dedicated servers:
    serve."""

    def __init__(self, ctx: RankContext, state: ModelState):
        self.ctx, self.state = ctx, state

    def before_compute(self, iteration: int, rec: IterationRecord) -> None:
        """Called on workers before the forward pass."""

    def forward(self, x: torch.Tensor, clock: ComputeClock) -> torch.Tensor:
        """The forward pass (a strategy may interleave parameter arrival with it)."""
        with clock.segment():
            return self.state.model(x)

    def backward(self, loss: torch.Tensor, clock: ComputeClock, rec: IterationRecord) -> None:
        """The backward pass (a strategy may synchronize while it runs)."""
        with clock.segment():
            loss.backward()

    def synchronize(self, iteration: int, rec: IterationRecord) -> None:
        """Synchronize this worker's local gradient (state.gradient()) with the others and apply the result."""
        raise NotImplementedError

    def serve(self, iteration: int, rec: IterationRecord) -> None:
        """One iteration of a dedicated server."""
        raise NotImplementedError(f"{type(self).__name__} has no dedicated servers")

    def checksum(self) -> str:
        """A digest of what must be identical on every worker at the end (every parameter, unless a strategy keeps
        some per rank)."""
        return self.state.checksum()

    def finish(self) -> Dict[str, object]:
        """After the last iteration: complete what is pending; returns extras for the final record."""
        return {}

    def close(self) -> None:
        """Release connections."""


def wire_snapshot(executor) -> Dict[Tuple[int, int], Tuple[int, int]]:
    """The executor's cumulative (fp32, sent) payload bytes per (stream, step)."""
    return dict(executor.wire_by_step)


def wire_since(executor, before) -> Dict[Tuple[int, int], Tuple[int, int]]:
    """(fp32, sent) payload bytes per (stream, step) since a snapshot."""
    out = {}
    for key, (raw, enc) in executor.wire_by_step.items():
        r0, e0 = before.get(key, (0, 0))
        if raw - r0 or enc - e0:
            out[key] = (raw - r0, enc - e0)
    return out


def run_recorded(channel, buf: np.ndarray, phase: str, rec: IterationRecord, **kwargs) -> None:
    """Run a channel's plan on buf in place (kwargs: as Channel.run), its payload and transfers recorded in rec
    under `phase`."""
    before = wire_snapshot(channel.executor)
    channel.run(buf, **kwargs)
    for raw, sent in wire_since(channel.executor, before).values():
        rec.add_payload(phase, raw, sent)
    rec.transfers += [dict(t, phase=phase) for t in channel.executor.drain_transfers()]


def wire_total(executor, before) -> Tuple[int, int]:
    """(fp32, sent) payload bytes of every step since a snapshot."""
    delta = wire_since(executor, before).values()
    return sum(r for r, _ in delta), sum(e for _, e in delta)
