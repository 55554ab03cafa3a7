"""Large temporary arrays kept in the process's heap: glibc hands each allocation over 128 KiB back to the kernel
when it is freed and faults fresh pages in for the next, which a step of 100,000 messages does a dozen times (a
quarter of its time here)."""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
HEAP_BYTES = 256 << 20  # allocations up to this come from the heap; freed heap up to twice it is kept

_done = False


def keep_large_arrays_in_heap() -> bool:
    """Set glibc's thresholds once for the process (False where the C library is not glibc)."""
    global _done
    if _done:
        return True
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        _done = bool(libc.mallopt(M_MMAP_THRESHOLD, HEAP_BYTES)) and bool(libc.mallopt(M_TRIM_THRESHOLD,
                                                                                          2 * HEAP_BYTES))
    except (OSError, AttributeError):
        _done = False
    return _done
