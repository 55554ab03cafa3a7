"""Learning-rate schedules of the papers' recipes (pure): constant, step decay, and polynomial decay (TernGrad's)."""

from __future__ import annotations

SCHEDULE_HELP = "constant | step:EVERY:GAMMA (lr x GAMMA every EVERY iterations) | poly:POWER (lr x (1 - t/T)^POWER)"


def parse_schedule(text: str) -> tuple:
    """('constant',), ('step', every, gamma) or ('poly', power); ValueError naming the valid forms."""
    kind, _, rest = text.partition(":")
    try:
        if kind == "constant" and not rest:
            return ("constant",)
        if kind == "step":
            every, gamma = rest.split(":")
            every, gamma = int(every), float(gamma)
            if every >= 1 and 0 < gamma <= 1:
                return ("step", every, gamma)
        if kind == "poly":
            power = float(rest)
            if power > 0:
                return ("poly", power)
    except ValueError:
        pass
    raise ValueError(f"learning-rate schedule '{text}' is invalid: give {SCHEDULE_HELP} (EVERY >= 1, 0 < GAMMA <= 1, "
                     f"POWER > 0)")


def factor_of(schedule: str):
    """The schedule parsed once: (iteration, iterations) -> factor on the base learning rate (0-based iteration)."""
    parsed = parse_schedule(schedule)
    if parsed[0] == "step":
        return lambda iteration, iterations: parsed[2] ** (iteration // parsed[1])
    if parsed[0] == "poly":
        return lambda iteration, iterations: max(0.0, 1.0 - iteration / max(iterations, 1)) ** parsed[1]
    return lambda iteration, iterations: 1.0


def lr_factor(schedule: str, iteration: int, iterations: int) -> float:
    """The factor on the base learning rate for an iteration (0-based) of a run of `iterations`."""
    return factor_of(schedule)(iteration, iterations)
