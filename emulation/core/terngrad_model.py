"""TernGrad's performance model (Wen et al., NIPS 2017, App. B, eq. 15-18): the time and throughput of j machines
of i GPUs each, from one GPU's profiled step time and the bandwidths inside a machine and between machines, for a
gradient sent as fp32 or ternarized (2 bits per element; the last layer kept fp32, as in the paper)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Dict, Sequence

SCALINGS = ("weak", "strong")
TERNARY_BITS = 2


@dataclass(frozen=True)
class Cluster:
    """App. B's inputs: i GPUs per machine, j machines, mini-batch K, T(1,1,K,|g|) in seconds, and the bandwidths
    (bytes/s) GPU-GPU (C_gwd), CPU-GPU (C_cwd) and network (C_nwd) with the network latency C_ncost (s)."""

    gpus: int
    machines: int
    batch: int
    step_s: float
    gpu_bps: float
    cpu_bps: float
    net_bps: float
    latency_s: float = 0.0

    @property
    def workers(self) -> int:
        """N = i * j."""
        return self.gpus * self.machines

    def t_comm(self, g_bytes: float) -> float:
        """T_comm = |g|/C_gwd * log2 i + |g|/C_cwd + (C_ncost + |g|/C_nwd) * log2 j."""
        return (g_bytes / self.gpu_bps * math.log2(self.gpus) + g_bytes / self.cpu_bps +
                (self.latency_s + g_bytes / self.net_bps) * math.log2(self.machines))

    def t_strong(self, g_bytes: float, profiled_g_bytes: float) -> float:
        """Eq. 15: (T(1,1,K,|g|) - |g|/C_cwd) / N + T_comm (the profile moved the fp32 gradient to the CPU)."""
        return self.compute_s(profiled_g_bytes) / self.workers + self.t_comm(g_bytes)

    def t_weak(self, g_bytes: float, profiled_g_bytes: float) -> float:
        """Eq. 17: T(1,1,K,|g|) - |g|/C_cwd + T_comm (each worker trains K samples)."""
        return self.compute_s(profiled_g_bytes) + self.t_comm(g_bytes)

    def compute_s(self, profiled_g_bytes: float) -> float:
        """T(1,1,K,|g|) less the fp32 copy to the CPU its profile included (0 without a profile: communication
        only)."""
        return max(self.step_s - profiled_g_bytes / self.cpu_bps, 0.0)

    def throughput(self, scaling: str, g_bytes: float, profiled_g_bytes: float) -> float:
        """Eq. 16 (strong: K / T) and eq. 18 (weak: N * K / T), samples per second."""
        if scaling == "strong":
            return self.batch / self.t_strong(g_bytes, profiled_g_bytes)
        return self.workers * self.batch / self.t_weak(g_bytes, profiled_g_bytes)


def ternary_bytes(tensor_elements: Sequence[int], last_layer_fp32: bool = True) -> float:
    """Bytes of a ternarized gradient: 2 bits per element and one fp32 scaler per layer, the last layer's tensors
    (its weight and bias) in fp32 when kept, as the paper trains."""
    sizes = list(tensor_elements)
    last = 2 if len(sizes) > 1 and sizes[-1] < sizes[-2] else 1  # a trailing bias belongs to the last layer
    kept = sizes[-last:] if last_layer_fp32 else []
    ternary = sizes[:-last] if last_layer_fp32 else sizes
    return sum(ternary) * TERNARY_BITS / 8 + 4 * len(ternary) + 4 * sum(kept)


def report(cluster: Cluster, scaling: str, tensor_elements: Sequence[int], last_layer_fp32: bool = True) -> Dict:
    """fp32 against TernGrad under App. B: the gradient's bytes, T_comm, the step time and throughput of each,
    and TernGrad's speed-up."""
    fp32 = 4 * sum(tensor_elements)
    tern = ternary_bytes(tensor_elements, last_layer_fp32)
    step = cluster.t_strong if scaling == "strong" else cluster.t_weak
    rows = {name: {"gradient_bytes": g, "t_comm_s": cluster.t_comm(g), "t_s": step(g, fp32),
                   "throughput_sps": cluster.throughput(scaling, g, fp32)} for name, g in (("fp32", fp32),
                                                                                        ("terngrad", tern))}
    return {"inputs": {**asdict(cluster), "workers": cluster.workers, "scaling": scaling,
                       "last_layer_fp32": last_layer_fp32},
            **rows, "speedup": rows["terngrad"]["throughput_sps"] / rows["fp32"]["throughput_sps"],
            "equations": "App. B eq. 15-16 (strong) or 17-18 (weak)"}
