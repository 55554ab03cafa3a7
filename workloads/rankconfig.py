"""The contract between the runner and its ranks: what one rank is told, a frozen dataclass written and read as
JSON (rank-N.config.json, named by RunFolder). A rank reads it once at start and never by string key."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Dict, List, Optional, Tuple

from emulation.core.addressing import PLAN_PORT
from emulation.core.compute import SlowRank, parse_compute
from workloads.engine import CHUNK_BYTES
from workloads.overlap import DDP_BUCKET_MB
from workloads.transport import SOCKET_BUFFER

RANK_CONFIG_ENV = "DMLBED_RANK_CONFIG"  # the RankConfig file `dmlbed launch` gives a user's script
GLOO_PORT = 29500  # torch.distributed's rendezvous on rank 0's address


@dataclass(frozen=True)
class BenchJob:
    """What a `dmlbed bench` or `dmlbed calibrate` rank sweeps instead of training."""

    sizes: Tuple[int, ...] = ()              # buffer sizes in bytes, each a multiple of 4 (fp32)
    warmup: int = 2                          # untimed repetitions per size
    reps: int = 5                            # timed repetitions per size
    probe: Optional[Tuple[str, int]] = None  # a calibration probe (kind, level) in place of the algorithm's plan
    collective: Optional[Tuple[str, str, int]] = None  # (op, algorithm, root) of an op other than all-reduce


@dataclass(frozen=True)
class RankConfig:
    """Everything one rank needs to know; times are real (already multiplied by the time dilation)."""

    rank: int = 0                            # this process, 0..ranks-1 (dedicated servers first)
    ranks: int = 1                           # processes in the run, one per emulated host
    host: str = "h0"                         # the emulated host it runs on
    topology: str = "star:1"                 # the topology spec (parsed once per rank)
    job_hosts: Tuple[str, ...] = ()          # the job's hosts in rank order when it runs on some (--hosts); () all
    start_gate: str = ""                     # jobs sharing a network: a file giving the time to begin iteration 1
    holds: Tuple[Tuple[str, int, float], ...] = ()  # held offsets: (a job's starts file, iteration shift, lag s) waited for
    algo: str = "ring"                       # the synchronization algorithm's registry name
    servers: int = 0                         # dedicated servers in use (resolved from --servers)
    options: Dict[str, object] = field(default_factory=dict)  # the algorithm's own options (its descriptor types them)
    shared: Dict[str, object] = field(default_factory=dict)   # what the runner computed once for every rank (Algorithm.shared)
    bw: Tuple[float, ...] = (100.0,)         # link rate per level, Mbit/s of emulated time (plans that choose by rate)
    model: str = "lenet5"                    # model name (workloads.models)
    data: str = "synthetic"                  # synthetic | digits | mnist:PATH
    batch: int = 32                          # sub-minibatch per worker
    iters: int = 10                          # iterations to run
    lr: float = 0.01                         # SGD learning rate
    momentum: float = 0.0                    # SGD momentum
    weight_decay: float = 0.0                # SGD weight decay
    lr_schedule: str = "constant"            # workloads.schedule: constant | step:EVERY:GAMMA | poly:POWER
    eval_every: int = 0                      # held-out accuracy every N iterations (0: at the end only)
    seed: int = 0                            # seed of weights and data
    codec: str = "none"                      # gradient compressor around a plan all-reduce (workloads/codecs/)
    codec_options: Dict[str, object] = field(default_factory=dict)  # the codec's own options, by name
    compute_time: float = 0.0                # device seconds per iteration (0: the CPU's own time), or drawn: the mean
    compute_draws: str = ""                  # a distribution drawn per rank and iteration (emulation/core/compute.py)
    compute_slow: Tuple[Tuple[float, int], ...] = ()  # this rank's slow factors (factor, from iteration)
    dilation: float = 1.0                    # time dilation F: compute stretched by F when there is no device time
    overlap: bool = False                    # synchronize DDP's buckets during backward (workloads/strategies/ddp_overlap.py)
    bucket_mb: float = DDP_BUCKET_MB         # DDP's bucket_cap_mb with overlap
    python_path: Tuple[str, ...] = ()        # folders searched first for a package.module:factory model
    timeout: float = 120.0                   # seconds a transfer may move no byte
    out_dir: str = "."                       # the folder of this run's rank files (RankFiles)
    port: int = PLAN_PORT                    # first plan port on emulated hosts (a channel adds its offset)
    loopback_ports: Tuple[Tuple[int, ...], ...] = ()  # loopback runs: per channel offset, each rank's port on 127.0.0.1
    master: str = "127.0.0.1"                # rank 0's address for torch.distributed
    master_port: int = GLOO_PORT             # rank 0's rendezvous port for torch.distributed
    interfaces: Tuple[str, ...] = ()         # this host's interfaces whose counters are recorded (none on loopback)
    ifname: Optional[str] = None             # the interface gloo binds to (None: its own choice)
    tcp_cc: Optional[str] = None             # congestion control of every socket (None: the namespace's default)
    socket_buffer: int = SOCKET_BUFFER       # SO_SNDBUF/SO_RCVBUF of every connection, bytes
    chunk_bytes: int = CHUNK_BYTES           # the engine's unit of transfer
    verify: bool = True                      # save the first iteration's inputs and outputs for the exact-sum check
    bench: Optional[BenchJob] = None         # set for a bench or calibration rank

    def device_times(self) -> Optional[List[float]]:
        """Device seconds of each iteration in real time, when they vary (drawn, or a slow factor); else None."""
        if not self.compute_draws and not self.compute_slow:
            return None
        model = parse_compute(self.compute_draws or self.compute_time / self.dilation)
        model = replace(model, slow=tuple(SlowRank(self.rank, f, start) for f, start in self.compute_slow))
        return [t * self.dilation for t in model.times(self.rank, self.iters, self.seed)]

    def to_json(self) -> str:
        """The JSON a rank reads."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "RankConfig":
        """The config a runner wrote (lists become tuples; an unknown key is an error)."""
        data = json.loads(text)
        bench = data.pop("bench", None)
        tuples = {f.name for f in fields(cls) if str(f.type).startswith(("Tuple", "tuple"))}
        values = {k: _tuples(v) if k in tuples else v for k, v in data.items()}
        return cls(**values, bench=None if bench is None else BenchJob(**{k: _tuples(v) for k, v in bench.items()}))

    def write(self, path: str) -> None:
        """Write the config for a rank to read."""
        with open(path, "w") as f:
            f.write(self.to_json())

    @classmethod
    def read(cls, path: str) -> "RankConfig":
        """Read the config the runner wrote."""
        with open(path) as f:
            return cls.from_json(f.read())


def starts_file(gate: str) -> str:
    """Where a job's rank 0 notes when each iteration began (from the gate on), for jobs that hold offsets to it."""
    return gate + ".starts"


def _tuples(value):
    """JSON lists back to (nested) tuples."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
