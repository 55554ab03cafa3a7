"""Several jobs on one network: each job's own options, the hosts it runs on (a list, or a placement rule) and when
it starts (pure: which options a job may set is the run layer's to check)."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from emulation.core.topology import Topology, TopologyError, parse_hosts

JOB_HELP = ("a job sharing the network (repeatable): KEY=VALUE pairs separated by spaces, e.g. 'name=a algo=ring "
            "model=mlp:2MB hosts=h0..h3 start=0.5it'; hosts is a list or contiguous, interleaved or random:SEED "
            "with ranks=K; start is 0, a delay (2s) or a fraction of the job's own iteration (0.5it); hold=yes keeps the "
            "job's offset to the job listed before it at every iteration (a scheduler's time shift kept: each waits "
            "for the other's iteration to begin), hold=apart widens it where their synchronizations would meet; any "
            "other key is a run option of the job (algo, model, batch, compute_time, ...)")
HOLD = {"no": "", "yes": "yes", "apart": "apart"}  # as given -> JobSpec.hold
RULES = ("contiguous", "interleaved")
START = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(s|it)?\s*$")
MAX_JOBS = 16


@dataclass(frozen=True)
class JobSpec:
    """One job as given: its name, its run options (compare-config keys), its hosts and its start."""

    name: str
    options: Dict[str, str] = field(default_factory=dict)
    hosts: str = "contiguous"
    ranks: Optional[int] = None
    start_s: float = 0.0          # a delay, seconds of emulated time
    start_iterations: float = 0.0  # or a fraction of the job's own iteration (measured alone)
    hold: str = ""                 # its offset to the job listed before it kept at every iteration: yes, apart

    @property
    def start(self) -> str:
        """The start as given."""
        return f"{self.start_iterations:g}it" if self.start_iterations else f"{self.start_s:g}s"


def parse_start(text: str, where: str) -> Tuple[float, float]:
    """(seconds, iterations) from '0', '2s' or '0.5it' (ValueError naming where)."""
    m = START.match(text)
    value = float(m.group(1)) if m else float("nan")
    if not m or not math.isfinite(value) or value > 3600:
        raise ValueError(f"{where}: start '{text}' is not 0, a delay (2s) or a fraction of the job's own iteration "
                         f"(0.5it), at most 3600")
    return (0.0, value) if m.group(2) == "it" else (value, 0.0)


def parse_job(text: str, index: int) -> JobSpec:
    """One job from 'KEY=VALUE ...' (ValueError naming what is wrong)."""
    where = f"--job {index + 1}"
    values: Dict[str, str] = {}
    for item in str(text).split():
        key, eq, value = item.partition("=")
        if not eq or not key or not value:
            raise ValueError(f"{where}: '{item}' is not KEY=VALUE: {JOB_HELP}")
        if key in values:
            raise ValueError(f"{where}: {key} is given twice")
        values[key] = value
    name = values.pop("name", f"job{index + 1}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", name):
        raise ValueError(f"{where}: name '{name}' must be 1-40 letters, digits, '_', '.' or '-' (it names a folder)")
    ranks = values.pop("ranks", None)
    if ranks is not None and not (ranks.isdigit() and int(ranks) >= 2):
        raise ValueError(f"{where}: ranks '{ranks}' is not an integer of at least 2")
    start_s, start_it = parse_start(values.pop("start", "0"), where)
    hosts = values.pop("hosts", "contiguous")
    hold = values.pop("hold", "no")
    if hold not in HOLD:
        raise ValueError(f"{where}: hold '{hold}' is not yes, apart or no")
    if HOLD[hold] and index == 0:
        raise ValueError(f"{where}: hold=yes keeps a job's offset to the job listed before it: the first job has "
                         f"none (give hold to a later job)")
    return JobSpec(name, values, hosts, int(ranks) if ranks else None, start_s, start_it, HOLD[hold])


def parse_jobs(items: Sequence[str]) -> Tuple[JobSpec, ...]:
    """Every job, names unique (ValueError naming what is wrong)."""
    if len(items) > MAX_JOBS:
        raise ValueError(f"--job is given {len(items)} times: at most {MAX_JOBS} jobs share a network")
    jobs = tuple(parse_job(t, i) for i, t in enumerate(items))
    names = [j.name for j in jobs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"--job: two jobs are named {twice[0]}: give each its own name")
    return jobs


@dataclass(frozen=True)
class Hold:
    """One wait of a held offset: before each iteration k, a job waits until `job` began iteration k + shift, then
    lag_s more (seconds of emulated time; negative: it may begin before)."""

    job: str
    shift: int
    lag_s: float


def holds(jobs: Sequence[JobSpec], starts: Dict[str, float], alone: Dict[str, Tuple[float, float]]
          ) -> Dict[str, List[Hold]]:
    """Each job's waits: a held job begins iteration k its start offset after the job listed before it began
    iteration k, and that job begins iteration k+1 its own iteration alone after the offset, so neither drifts
    towards the other; held apart, each lag is at least what puts its synchronization after the other's (starts:
    seconds after the first job; alone: each job's compute and communication time alone)."""
    out: Dict[str, List[Hold]] = {j.name: [] for j in jobs}
    for before, job in zip(jobs, jobs[1:]):
        if job.hold:
            (c_a, m_a), (c_b, m_b) = alone[before.name], alone[job.name]
            lag = starts[job.name] - starts[before.name]
            back = c_a + m_a - lag  # the cycle: the job before it's own iteration alone
            if job.hold == "apart":  # each synchronization after the other's
                lag = max(lag, c_a + m_a - c_b)
                back = max(c_a + m_a - lag, c_b + m_b - c_a)
            out[job.name].append(Hold(before.name, 0, lag))
            out[before.name].append(Hold(job.name, -1, back))
    return out


def is_rule(hosts: str) -> bool:
    """Whether a job's hosts are a placement rule rather than a list."""
    return hosts in RULES or hosts.startswith("random:")


def place(jobs: Sequence[JobSpec], topo: Topology) -> Dict[str, Tuple[str, ...]]:
    """Each job's hosts in rank order: listed hosts as given; rule-placed jobs take the hosts no list names, in
    host order (contiguous: one block after another; interleaved: every J-th host; random:SEED: shuffled, then in
    blocks). TopologyError for overlapping hosts, unknown hosts, or more ranks than free hosts."""
    out: Dict[str, Tuple[str, ...]] = {}
    owner: Dict[str, str] = {}
    for j in jobs:
        if not is_rule(j.hosts):
            out[j.name] = parse_hosts(j.hosts, topo, f"job {j.name}: hosts") or tuple(h.name for h in topo.hosts)
            for h in out[j.name]:
                if h in owner:
                    raise TopologyError(f"jobs {owner[h]} and {j.name} both name {h}: a host runs one job's rank")
                owner[h] = j.name
    ruled = [j for j in jobs if is_rule(j.hosts)]
    free = [h.name for h in topo.hosts if h.name not in owner]
    kinds = {r.hosts.split(":")[0] for r in ruled}
    for j in ruled:
        if j.ranks is None:
            raise TopologyError(f"job {j.name}: hosts={j.hosts} places ranks=K hosts: give ranks")
        if len(kinds) > 1:
            raise TopologyError(f"jobs place by {' and '.join(sorted(kinds))} at once: give every rule-placed job "
                                f"the same rule (or list hosts)")
        if j.hosts.startswith("random:") and not j.hosts[7:].isdigit():
            raise TopologyError(f"job {j.name}: hosts={j.hosts}: give random:SEED with an integer seed")
    need = sum(j.ranks for j in ruled)
    if need > len(free):
        raise TopologyError(f"jobs placed by rule need {need} hosts: {topo.spec} has {len(free)} free "
                            f"({len(topo.hosts)} hosts, {len(owner)} listed)")
    if ruled and ruled[0].hosts == "interleaved":
        pool = free[:need]
        cursor = {j.name: [] for j in ruled}
        i = 0
        while pool:
            j = ruled[i % len(ruled)]
            if len(cursor[j.name]) < j.ranks:
                cursor[j.name].append(pool.pop(0))
            i += 1
        out.update({name: tuple(hosts) for name, hosts in cursor.items()})
    elif ruled:
        if ruled[0].hosts.startswith("random:"):
            random.Random(f"placement:{ruled[0].hosts[7:]}").shuffle(free)
        at = 0
        for j in ruled:
            out[j.name] = tuple(free[at:at + j.ranks])
            at += j.ranks
    return {j.name: out[j.name] for j in jobs}


def overlap_share(a: Sequence[Tuple[float, float]], b: Sequence[Tuple[float, float]]) -> List[Optional[float]]:
    """For each of a's intervals, the share of it that b's intervals cover (None for an empty interval)."""
    out = []
    for lo, hi in a:
        if hi <= lo:
            out.append(None)
            continue
        covered = sum(max(0.0, min(hi, y) - max(lo, x)) for x, y in b)
        out.append(min(1.0, covered / (hi - lo)))
    return out


def gaps(a: Sequence[Tuple[float, float]], b: Sequence[Tuple[float, float]]) -> List[Optional[float]]:
    """For each of a's intervals, how far the nearest of b's is (0 when they meet; None when b has none): the slack
    that keeps two jobs' synchronizations apart."""
    return [min((max(0.0, x - hi, lo - y) for x, y in b), default=None) for lo, hi in a]
