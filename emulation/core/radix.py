"""Mixed-radix numbering (pure): a rank as digits d0 (fastest) .. d_{m-1}, as BCube addresses hosts and as the
hierarchical algorithms group ranks by level."""

from __future__ import annotations

from typing import List, Sequence


def to_digits(rank: int, radices: Sequence[int]) -> List[int]:
    """Mixed-radix digits of rank, least significant first."""
    out = []
    for r in radices:
        out.append(rank % r)
        rank //= r
    return out


def from_digits(digits: Sequence[int], radices: Sequence[int]) -> int:
    """Inverse of to_digits."""
    rank, scale = 0, 1
    for d, r in zip(digits, radices):
        rank += d * scale
        scale *= r
    return rank


def group_members(rank: int, level: int, radices: Sequence[int]) -> List[int]:
    """The ranks that differ from rank at most in digit `level`, ordered by that digit (rank itself included)."""
    ds = to_digits(rank, radices)
    out = []
    for v in range(radices[level]):
        other = list(ds)
        other[level] = v
        out.append(from_digits(other, radices))
    return out
