"""Compute time per rank and per iteration: one value for every rank, a distribution drawn per rank and iteration
(seeded, the same draws in emulation and simulation) or a measured trace replayed, times a persistent factor for slow
hosts; and what BSP waits
for, the expected slowest of the ranks' draws (H_n x mean for exponential times, Dutta et al., AISTATS'18)."""

from __future__ import annotations

import bisect
import csv
import math
import os
import random
from collections import Counter
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Dict, List, Sequence, Tuple

FIXED, EXP, LOGNORMAL, NORMAL, TRACE = "fixed", "exp", "lognormal", "normal", "trace"
COMPUTE_HELP = ("SECONDS (every rank, every iteration) | exp:MEAN | lognormal:MEAN,SIGMA | normal:MEAN,SD (truncated "
                "at 0): drawn per rank and iteration from --seed | trace:FILE.csv[,COLUMN]: measured seconds replayed in "
                "order, each rank from a row --seed picks")
SLOW_HELP = "HOST:FACTORx[@ITERATION], comma-separated (h3:2x: h3 computes twice as long; h3:2x@10 from iteration 10)"
NORMAL_TRIES = 1000  # a truncated normal redraws negative values; past this many it gives 0
INTEGRATION_STEPS = 20000


@dataclass(frozen=True)
class SlowRank:
    """A rank whose compute takes `factor` times its draw from iteration `start` on."""

    rank: int
    factor: float
    start: int = 0


@dataclass(frozen=True)
class ComputeModel:
    """Seconds of device compute per rank and iteration (kind fixed: `mean` itself)."""

    kind: str = FIXED
    mean: float = 0.0
    spread: float = 0.0  # lognormal: sigma of the log; normal: standard deviation before truncation
    slow: Tuple[SlowRank, ...] = ()
    values: Tuple[float, ...] = ()  # trace: the file's times in its order (each rank replays them from its own row)
    source: str = ""  # trace: FILE[,COLUMN] as given, the file's path made absolute (ranks read it again)

    @property
    def varies(self) -> bool:
        """Whether ranks or iterations differ (a distribution, or a slow rank)."""
        return self.kind != FIXED or bool(self.slow)

    @property
    def text(self) -> str:
        """The --compute-time form it was given in."""
        if self.kind == FIXED:
            return f"{self.mean:g}"
        if self.kind == TRACE:
            return f"{TRACE}:{self.source}"
        return f"{self.kind}:{self.mean:g}" + (f",{self.spread:g}" if self.kind in (LOGNORMAL, NORMAL) else "")

    def draw(self, rng: random.Random) -> float:
        """One draw of the distribution (no slow factor)."""
        if self.kind == FIXED or self.mean == 0:
            return self.mean
        if self.kind == EXP:
            return rng.expovariate(1.0 / self.mean)
        if self.kind == LOGNORMAL:
            return rng.lognormvariate(math.log(self.mean) - self.spread ** 2 / 2, self.spread)
        for _ in range(NORMAL_TRIES):
            value = rng.gauss(self.mean, self.spread)
            if value >= 0:
                return value
        return 0.0

    @cached_property
    def ordered(self) -> Tuple[float, ...]:
        """A trace's times sorted (any iteration's time is one of them, equally likely)."""
        return tuple(sorted(self.values))

    def factor(self, rank: int, iteration: int) -> float:
        """The slow factor of a rank in an iteration (1 for the others)."""
        f = 1.0
        for s in self.slow:
            if s.rank == rank and iteration >= s.start:
                f *= s.factor
        return f

    def times(self, rank: int, iterations: int, seed: int) -> List[float]:
        """The rank's compute seconds for iterations 0..iterations-1 (the same for a seed wherever drawn)."""
        rng = random.Random(f"compute:{seed}:{rank}")
        if self.kind == TRACE:  # the file in its order, from a row the seed picks (ranks apart, each the whole file)
            first = rng.randrange(len(self.values))
            return [self.values[(first + i) % len(self.values)] * self.factor(rank, i) for i in range(iterations)]
        return [self.draw(rng) * self.factor(rank, i) for i in range(iterations)]

    def table(self, ranks: Sequence[int], iterations: int, seed: int) -> Dict[int, List[float]]:
        """times() of every rank."""
        return {r: self.times(r, iterations, seed) for r in ranks}

    def cdf(self, x: float, scale: float = 1.0) -> float:
        """P(draw x scale <= x)."""
        if x < 0:
            return 0.0
        m = self.mean * scale
        if self.kind == FIXED or m == 0:
            return 1.0 if x >= m else 0.0
        if self.kind == EXP:
            return 1.0 - math.exp(-x / m)
        if self.kind == TRACE:
            return bisect.bisect_right(self.ordered, x / scale) / len(self.ordered)
        if x == 0:
            return 0.0
        if self.kind == LOGNORMAL:
            mu = math.log(m) - self.spread ** 2 / 2
            return 0.5 * (1 + math.erf((math.log(x) - mu) / (self.spread * math.sqrt(2))))
        sd = self.spread * scale
        below_zero = _normal_cdf(0.0, m, sd)
        return (_normal_cdf(x, m, sd) - below_zero) / (1 - below_zero)

    def expected_slowest(self, ranks: Sequence[int], iteration: int = 0) -> Tuple[float, str]:
        """E[max over these ranks of their compute] in an iteration, and how it is known: H_n x mean for
        i.i.d. exponentials (closed form); otherwise the integral of 1 - prod F_r (numeric)."""
        if not ranks:
            return 0.0, "no rank computes"
        factors = [self.factor(r, iteration) for r in ranks]
        if self.kind == FIXED or self.mean == 0:
            return self.mean * max(factors), "the slowest rank's fixed time"
        if self.kind == EXP and len(set(factors)) == 1:
            n = len(ranks)
            return harmonic(n) * self.mean * factors[0], f"H_{n} x mean (i.i.d. exponential compute)"
        if self.kind == TRACE and len(set(factors)) == 1:
            # each rank's row is uniform over the file (its starting row is), independently of the others' rows
            n, m = len(ranks), len(self.ordered)
            exact = sum(v * ((k / m) ** n - ((k - 1) / m) ** n) for k, v in enumerate(self.ordered, 1))
            return exact * factors[0], f"E[max of {n} ranks' rows of the trace's {m} times] (exact)"
        groups = Counter(factors)
        upper = self._upper(max(factors))
        h = upper / INTEGRATION_STEPS
        total = 0.0
        for i in range(INTEGRATION_STEPS + 1):
            survive = 1.0 - self._all_below(i * h, groups)
            total += survive * (0.5 if i in (0, INTEGRATION_STEPS) else 1.0)
        return total * h, "E[max of the ranks' draws] (numeric integral of 1 - prod F)"

    def slowest_quantile(self, ranks: Sequence[int], q: float = 0.5, iteration: int = 0) -> float:
        """The q-quantile of the slowest rank's compute in an iteration: x with prod F_r(x) = q (bisection)."""
        factors = [self.factor(r, iteration) for r in ranks] or [1.0]
        if self.kind == FIXED or self.mean == 0:
            return self.mean * max(factors)
        groups = Counter(factors)
        low, high = 0.0, self._upper(max(factors))
        for _ in range(100):
            mid = (low + high) / 2
            if self._all_below(mid, groups) < q:
                low = mid
            else:
                high = mid
        return (low + high) / 2

    def _all_below(self, x: float, groups: Counter) -> float:
        """prod over ranks of F_r(x), the ranks grouped by their slow factor (factor -> how many ranks)."""
        return math.prod(self.cdf(x, f) ** n for f, n in groups.items())

    def _upper(self, factor: float) -> float:
        """Where the slowest rank's draw is past with negligible probability."""
        m = self.mean * factor
        if self.kind == TRACE:
            return self.ordered[-1] * factor
        if self.kind == EXP:
            return 40 * m
        if self.kind == LOGNORMAL:
            return math.exp(math.log(m) - self.spread ** 2 / 2 + 9 * self.spread)
        return m + 12 * self.spread * factor


def shown(names: Sequence[str]) -> str:
    """A list of host names, cut short past four."""
    return ", ".join(names[:4]) + (f", ..., {names[-1]}" if len(names) > 4 else "")


def harmonic(n: int) -> float:
    """H_n = 1 + 1/2 + ... + 1/n."""
    return sum(1.0 / i for i in range(1, n + 1))


def _normal_cdf(x: float, mean: float, sd: float) -> float:
    return 0.5 * (1 + math.erf((x - mean) / (sd * math.sqrt(2))))


def parse_compute(text) -> ComputeModel:
    """A --compute-time value: seconds, or kind:parameters (ValueError naming the valid forms)."""
    raw = str(text).strip()
    kind, sep, rest = raw.partition(":")
    if kind == TRACE:
        return parse_trace(rest)
    try:
        if not sep:
            model = ComputeModel(FIXED, float(raw))
        else:
            values = [float(v) for v in rest.split(",")]
            counts = {FIXED: 1, EXP: 1, LOGNORMAL: 2, NORMAL: 2}
            if kind not in counts or len(values) != counts[kind]:
                raise ValueError
            model = ComputeModel(kind, values[0], values[1] if len(values) > 1 else 0.0)
    except ValueError:
        model = None
    if model is None or not all(math.isfinite(v) and v >= 0 for v in (model.mean, model.spread)) \
            or (model.kind in (LOGNORMAL, NORMAL) and (model.mean == 0 or model.spread == 0)):
        raise ValueError(f"--compute-time {raw} is not valid: give {COMPUTE_HELP}, with finite parameters >= 0 "
                         f"(MEAN, SIGMA and SD > 0)")
    return model


def parse_trace(spec: str) -> ComputeModel:
    """trace:FILE[,COLUMN]: a CSV's column of seconds (COLUMN a header name or a 0-based index; without one, the first
    column every row of which is a number), replayed in order (ValueError naming what is wrong)."""
    path, _, column = spec.partition(",")
    where = f"--compute-time trace:{spec}"
    try:
        with open(path, newline="") as f:
            rows = [r for r in csv.reader(f) if any(c.strip() for c in r)]
    except OSError as exc:
        raise ValueError(f"{where}: cannot read {path} ({exc.strerror or exc}): give trace:FILE.csv[,COLUMN]") from None
    header = rows[0] if rows and not all(number(c) is not None for c in rows[0]) else None
    body = rows[1:] if header else rows
    names = [c.strip() for c in header] if header else [str(i) for i in range(max((len(r) for r in body), default=0))]
    if column:
        at = names.index(column.strip()) if column.strip() in names else \
            int(column) if column.strip().isdigit() and int(column) < len(names) else None
        if at is None:
            raise ValueError(f"{where}: the file has no column {column}: valid are {', '.join(names)} (or 0-based "
                             f"indexes)")
    else:
        at = next((i for i in range(len(names)) if body and all(i < len(r) and number(r[i]) is not None
                                                                for r in body)), 0 if len(names) == 1 else None)
        if at is None:  # (one column: its first cell that is not a number is named below)
            raise ValueError(f"{where}: the file has no column of numbers in every row: give trace:FILE.csv,COLUMN")
    values = [number(r[at]) if at < len(r) else None for r in body]
    bad = next((n for n, v in enumerate(values) if v is None or not math.isfinite(v) or v < 0), None)
    if not values or bad is not None:
        cell = "" if not values or at >= len(body[bad]) else body[bad][at].strip()
        what = "no rows" if not values else f"row {bad + 1 + bool(header)} is '{cell}'"
        raise ValueError(f"{where}: column {names[at]} has {what}: give seconds >= 0 in every row")
    source = os.path.abspath(path) + (f",{column}" if column else "")
    return ComputeModel(TRACE, sum(values) / len(values), values=tuple(values), source=source)


def number(text: str):
    """A CSV cell as a float, or None where it is not a number."""
    try:
        return float(text)
    except ValueError:
        return None


def parse_slow(text) -> Tuple[Tuple[str, float, int], ...]:
    """A --slow value as (host, factor, from iteration) (ValueError naming the valid form)."""
    out = []
    for part in [p.strip() for p in str(text).split(",") if p.strip()]:
        host, _, rest = part.partition(":")
        factor, _, start = rest.partition("@")
        try:
            value = float(factor.removesuffix("x"))
            begin = int(start) if start else 0
        except ValueError:
            value, begin = float("nan"), -1
        if not host or not factor.endswith("x") or not math.isfinite(value) or value <= 0 or begin < 0:
            raise ValueError(f"--slow {part} is not valid: give {SLOW_HELP}, factor > 0, iteration >= 0")
        out.append((host, value, begin))
    return tuple(out)


def compute_model(compute_time, slow: str, host_index: Dict[str, int]) -> ComputeModel:
    """The checked model of a run: --compute-time with --slow's hosts resolved to ranks (ValueError naming an
    unknown host and the valid ones)."""
    model = parse_compute(compute_time)
    ranks = []
    for host, factor, start in parse_slow(slow or ""):
        if host not in host_index:
            raise ValueError(f"--slow {host}: no such host (the topology's hosts are {shown(list(host_index))})")
        ranks.append(SlowRank(host_index[host], factor, start))
    return replace(model, slow=tuple(ranks))
