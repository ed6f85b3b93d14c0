"""A background loop stops on the first cancel, even when the cancel races the event it waits for."""

from __future__ import annotations

import asyncio

import pytest

from shared.aio import wait_event


async def test_wait_event_says_whether_the_event_was_set() -> None:
    event = asyncio.Event()
    assert await wait_event(event, 0.01) is False
    event.set()
    assert await wait_event(event, 0.01) is True


async def test_a_cancel_that_races_the_wake_up_still_stops_the_loop() -> None:
    # The shape of the outbox relay and the runhost claim loop. With asyncio.wait_for on Python 3.11 the
    # cancel below is swallowed (the inner wait has already finished) and the loop runs on for ever.
    event = asyncio.Event()
    rounds = 0

    async def loop() -> None:
        nonlocal rounds
        while True:
            await wait_event(event, 1.0)
            event.clear()
            rounds += 1

    task = asyncio.create_task(loop())
    await asyncio.sleep(0.01)
    event.set()
    await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=3.0)
    assert task in done, "the loop outlived its cancel"
    with pytest.raises(asyncio.CancelledError):
        task.result()
