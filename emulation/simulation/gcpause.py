"""Python's cycle collector paused while the flow model builds millions of small acyclic lists and tuples."""

import gc
from contextlib import contextmanager


@contextmanager
def cycle_collection_paused():
    """Pause the cyclic garbage collector inside the block (reference counting still frees everything); it
    would otherwise rescan every live container each few hundred allocations (a third of a 1024-host simulation's
    time). Nested blocks leave it to the outermost."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
