"""The garbage collector around a process's start: paused while it imports, its start-up objects frozen after.

Imports and the construction of the app allocate hundreds of thousands of objects that live as long as the
process, and the cyclic collector walks them again and again while they are made: about a tenth of a
service's import time (`services.gateway.app`: 1.05 s of processor time with the collector, 0.95 s
without). `collector_paused` holds it off for that stretch only, and gives it back before the process
waits for the stack or connects: from there on an exception's traceback is a cycle only the collector
frees, and a start can retry for minutes.

Once started, `freeze_startup_objects` moves what the start built (imports, the FastAPI app, pydantic
models, the pools) out of the collector's view. Left in its generations, every full collection walks all
of them again: in the profile of the gateway's hottest read (issue 14) collection was a sixteenth of the
process's time. Objects made after the freeze are collected as before.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside the block (the collector's state before it is given back after it)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def freeze_startup_objects() -> None:
    gc.collect()
    gc.freeze()
