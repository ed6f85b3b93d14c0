"""Waiting with a deadline in loops that must stop when cancelled.

Not `asyncio.wait_for`: on Python 3.11, when a cancel arrives just as the awaited thing completes,
`wait_for` returns the result instead of raising `CancelledError`. A background loop that waits that way
swallows the one cancel that was meant to stop it and runs on, so a service's stop waits for ever.
`asyncio.timeout` delivers the cancel to the task itself and never loses it.
"""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, seconds: float) -> bool:
    """Wait until `event` is set, at most `seconds`; True when it was set."""
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True
