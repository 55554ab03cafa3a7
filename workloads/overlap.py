"""Synchronization overlapped with backward, as PyTorch DDP does it (pure: no torch), for the emulated ranks'
pacing and for theory and simulation alike: which parameters share a bucket, when a device would have each
bucket's gradients ready, and how the buckets' synchronizations queue behind one another."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

FORWARD_SHARE = 1 / 3  # of a device's compute per iteration: backward costs about twice the forward pass
DDP_BUCKET_MB = 25.0   # DistributedDataParallel's bucket_cap_mb default
MB = 1 << 20


def ddp_buckets(sizes: Sequence[int], bucket_mb: float = DDP_BUCKET_MB, order: Optional[Sequence[int]] = None,
                element_bytes: int = 4) -> List[List[int]]:
    """Parameter indices per bucket as DDP groups them once it has rebuilt its buckets (from the second iteration
    on, with bucket_cap_mb given): in the order gradients became ready (order; reverse parameter order when not
    known), a bucket closes once it holds bucket_mb or more."""
    cap = int(bucket_mb * MB)
    buckets, current, size = [], [], 0
    for i in (order if order is not None else reversed(range(len(sizes)))):
        current.append(i)
        size += sizes[i] * element_bytes
        if size >= cap:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


def ready_fractions(flops: Sequence[float], order: Optional[Sequence[int]] = None) -> List[float]:
    """For each parameter tensor, the share of the backward pass done when its gradient is ready: the FLOPs of its
    layer and of every layer whose gradient was ready before (order; from the last layer to the first when not
    known)."""
    total = float(sum(flops)) or 1.0
    out, done = [0.0] * len(flops), 0.0
    for i in (order if order is not None else reversed(range(len(flops)))):
        done += flops[i]
        out[i] = done / total
    return out


def bucket_ready_fractions(buckets: Sequence[Sequence[int]], fractions: Sequence[float]) -> List[float]:
    """The share of backward done when each bucket is complete (its last gradient, the earliest layer's)."""
    return [max(fractions[i] for i in bucket) for bucket in buckets]


def timeline(compute_s: float, ready: Sequence[float], durations: Sequence[float],
             forward_share: float = FORWARD_SHARE) -> dict:
    """One iteration of a device that computes for compute_s (forward, then backward), whose bucket k is ready
    after ready[k] of the backward and takes durations[k] to synchronize, one bucket at a time in order: each
    bucket's start and end, the synchronization span, the communication sticking out past backward, and the
    iteration."""
    backward_start = forward_share * compute_s
    spans: List[Tuple[float, float]] = []
    end = 0.0
    for fraction, duration in zip(ready, durations):
        start = max(backward_start + fraction * (compute_s - backward_start), end)
        end = start + duration
        spans.append((start, end))
    last = spans[-1][1] if spans else compute_s
    return {"buckets": spans, "sync_start_s": spans[0][0] if spans else compute_s, "sync_end_s": last,
            "gst_s": last - (spans[0][0] if spans else compute_s), "exposed_s": max(0.0, last - compute_s),
            "iteration_s": max(compute_s, last)}


def bucket_layers(sizes: Sequence[int], buckets: Sequence[Sequence[int]]) -> List[List[int]]:
    """The parameter sizes of each bucket in the order DDP lays them out in its buffer."""
    return [[sizes[i] for i in bucket] for bucket in buckets]


def model_fractions(sizes: Sequence[int], flops: Optional[Sequence[float]],
                    order: Optional[Sequence[int]] = None) -> List[float]:
    """ready_fractions by FLOPs, or by parameter count where a model's FLOPs are unknown (a user's model)."""
    return ready_fractions(flops if flops is not None else sizes, order)
