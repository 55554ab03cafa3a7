"""Result checks of a run's first iteration: ranks save what went in and what came out, the runner compares.

Kinds: "sum" -- every output equals the sum of the inputs (within the fp32 rounding bound);
"sharded" -- the outputs together (each a disjoint shard, zeros elsewhere) add up to the sum of the inputs;
"max" -- every output equals the element-wise maximum of the inputs exactly;
"alltoall" -- each rank's input and output are N blocks (rows): output block j of rank r is rank j's input block r,
exactly; "sum-fp16" / "sum-bf16" -- every output is the same and within the bound of n - 1 additions rounded to
that format of the sum of the inputs; "vote" -- every output is the sign of the sum of the inputs (signs), exactly.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import Dict, List, Optional

import numpy as np

from workloads.plan import fp32_sum_tolerance

KINDS = ("sum", "sharded", "max", "alltoall", "sum-fp16", "sum-bf16", "vote")
HALF_UNIT = {"sum-fp16": (2.0 ** -11, 2.0 ** -25), "sum-bf16": (2.0 ** -8, 0.0)}  # (unit roundoff, subnormal half-step)
MAX_CHECK_BYTES = 64 << 20  # larger arrays are not saved (the check reports null)


def save(checks_dir: str, name: str, kind: str, side: str, rank: int, array: np.ndarray,
         counts: Dict[str, int]) -> bool:
    """Save one rank's input ('in') or output ('out') of check `name` in the run's checks folder, whose complete
    set has counts {'in': ranks giving inputs, 'out': ranks giving outputs}; False when it is too big to keep."""
    if kind not in KINDS or side not in ("in", "out"):
        raise ValueError(f"bad check {name}: kind {kind}, side {side}")
    folder = os.path.join(checks_dir, name)
    os.makedirs(folder, exist_ok=True)
    if array.nbytes > MAX_CHECK_BYTES:
        open(os.path.join(folder, "too-big"), "w").close()
        return False
    with open(os.path.join(folder, "kind.json"), "w") as f:
        json.dump({"kind": kind, "counts": counts}, f)
    np.save(os.path.join(folder, f"{side}-{rank}.npy"), np.ascontiguousarray(array, dtype=np.float32))
    return True


def _load(folder: str, side: str) -> List[np.ndarray]:
    names = sorted((n for n in os.listdir(folder) if n.startswith(f"{side}-") and n.endswith(".npy")),
                   key=lambda n: int(n[len(side) + 1:-4]))  # rank order
    return [np.load(os.path.join(folder, n)) for n in names]


def check_one(kind: str, inputs: List[np.ndarray], outputs: List[np.ndarray]) -> bool:
    """Whether outputs are what `kind` says they must be, given inputs."""
    if not inputs or not outputs or len({a.shape for a in inputs + outputs}) != 1:
        return False
    if kind == "max":
        expected = np.maximum.reduce(inputs)
        return all(np.array_equal(o, expected) for o in outputs)
    if kind == "vote":  # inputs are signs: every output is the sign of their (exact, small-integer) sum
        expected = np.sign(np.sum(inputs, axis=0))
        return all(np.array_equal(o, expected) for o in outputs)
    if kind == "alltoall":
        n = len(inputs)
        return inputs[0].shape[0] == n == len(outputs) and all(
            np.array_equal(outputs[r][j], inputs[j][r]) for r in range(n) for j in range(n))
    expected = np.sum([x.astype(np.float64) for x in inputs], axis=0)
    if kind in HALF_UNIT:  # every partial sum rounded to the format: n - 1 roundings, each rank the same result
        unit, tiny = HALF_UNIT[kind]
        magnitude = np.sum([np.abs(x.astype(np.float64)) for x in inputs], axis=0)
        tol = 1.01 * (len(inputs) - 1) * (unit * magnitude + tiny) + fp32_sum_tolerance(inputs) + 1e-30
        return all(np.array_equal(o, outputs[0]) for o in outputs) and \
            bool(np.all(np.abs(outputs[0].astype(np.float64) - expected) <= tol))
    tol = fp32_sum_tolerance(inputs) + 1e-30
    if kind == "sharded":
        # each shard is a partial sum in fp32 and the shards do not overlap: their total obeys the same bound
        return bool(np.all(np.abs(np.sum([o.astype(np.float64) for o in outputs], axis=0) - expected) <= tol))
    return all(bool(np.all(np.abs(o.astype(np.float64) - expected) <= tol)) for o in outputs)


def verify(root: str, remove: bool = True) -> Dict[str, Optional[bool]]:
    """Every saved check in a run's checks folder: name -> passed (None when too big to save); deletes the arrays
    after."""
    results: Dict[str, Optional[bool]] = {}
    if not os.path.isdir(root):
        return results
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if os.path.exists(os.path.join(folder, "too-big")):
            results[name] = None
            continue
        try:
            with open(os.path.join(folder, "kind.json")) as f:
                spec = json.load(f)
            inputs, outputs = _load(folder, "in"), _load(folder, "out")
            complete = len(inputs) == spec["counts"]["in"] and len(outputs) == spec["counts"]["out"]
            results[name] = complete and check_one(spec["kind"], inputs, outputs)
        except (OSError, ValueError):
            results[name] = False
    if remove:
        shutil.rmtree(root, ignore_errors=True)
    return results


def overall(results: Dict[str, Optional[bool]]) -> Optional[bool]:
    """True when every check passed, False when one failed, None when there was nothing to check."""
    if any(v is False for v in results.values()):
        return False
    if not results or all(v is None for v in results.values()):
        return None
    return True

