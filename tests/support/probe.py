"""Wait on outcomes, never on the clock: poll a check until it holds, with a deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


async def probe_until(check: Callable[[], Awaitable[T]], *, timeout: float = 30.0, interval: float = 0.05) -> T:
    """Poll `check` until it returns something truthy; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("the condition was not met before the deadline")
        await asyncio.sleep(interval)
