"""The garbage collector around a process's start: paused while it imports, what it built frozen after.

Imports and the construction of the app allocate hundreds of thousands of objects that live as long as the
process, and the cyclic collector walks them again and again while they are made: about a tenth of a
service's import time (`services.gateway.app`: 1.05 s of processor time with the collector, 0.95 s
without). `collector_paused` holds it off for that stretch only, and gives it back before the process
waits for the stack or connects: from there on an exception's traceback is a cycle only the collector
frees, and a start can retry for minutes.

What the paused block built is frozen as it ends (moved out of the collector's view, unwalked): given back
with them in its youngest generation, the collector's first pass walked all of them (the gateway's 161,000
objects, 50-80 ms) and the start's full collection walked them again, in every process of a start, for the
thousand or so objects of garbage an import leaves (kept now, frozen with the rest).

Once started, `freeze_startup_objects` moves what the start built after that (the pools, the connections)
out of the collector's view too. Left in its generations, every full collection walks all of them again:
in the profile of the gateway's hottest read (issue 14) collection was a sixteenth of the process's time.
Objects made after the freeze are collected as before.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block (the collector's state before it is given back after it); what
    the block built is frozen when it ends without an exception."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
        gc.freeze()
    finally:
        if enabled:
            gc.enable()


def freeze_startup_objects() -> None:
    gc.collect()
    gc.freeze()
