"""Parser slots go round-robin to the scopes that wait; a scope's queue is bounded; a cancelled waiter
gives its turn away."""

from __future__ import annotations

import asyncio

import pytest

from services.assets.queueing import FairSlots, ScopeQueueFull


async def job(slots: FairSlots, gate: asyncio.Event, scope: str, ran: list[str], name: str = "") -> None:
    """Hold a slot of `scope` until the gate opens; `ran` notes `name` (or the scope) once it has the slot."""
    async with slots.slot(scope):
        ran.append(name or scope)
        await gate.wait()


async def test_slots_go_round_robin_between_waiting_scopes() -> None:
    slots = FairSlots(1, per_scope=10)
    order: list[str] = []
    gate = asyncio.Event()

    first = asyncio.create_task(job(slots, gate, "a", order, "a0"))
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(job(slots, gate, "a", order, f"a{i}")) for i in range(1, 4)]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(job(slots, gate, "b", order, "b0")))
    await asyncio.sleep(0)
    assert slots.waiting("a") == 3 and slots.waiting("b") == 1
    gate.set()
    await asyncio.gather(first, *tasks)
    assert order == ["a0", "a1", "b0", "a2", "a3"]


async def test_a_scope_queue_is_bounded_and_others_still_queue() -> None:
    slots = FairSlots(1, per_scope=2)
    gate = asyncio.Event()
    ran: list[str] = []

    tasks = [asyncio.create_task(job(slots, gate, "a", ran)) for _ in range(3)]
    await asyncio.sleep(0)
    with pytest.raises(ScopeQueueFull):
        await job(slots, gate, "a", ran)
    tasks.append(asyncio.create_task(job(slots, gate, "b", ran)))
    await asyncio.sleep(0)
    assert slots.waiting() == 3
    gate.set()
    await asyncio.gather(*tasks)
    assert slots.waiting() == 0


async def test_a_cancelled_waiter_leaves_the_queue_and_the_slot_moves_on() -> None:
    slots = FairSlots(1, per_scope=5)
    gate = asyncio.Event()
    ran: list[str] = []

    holder = asyncio.create_task(job(slots, gate, "a", ran))
    await asyncio.sleep(0)
    doomed = asyncio.create_task(job(slots, gate, "b", ran))
    later = asyncio.create_task(job(slots, gate, "c", ran))
    await asyncio.sleep(0)
    doomed.cancel()
    await asyncio.gather(doomed, return_exceptions=True)
    gate.set()
    await asyncio.gather(holder, later)
    assert ran == ["a", "c"] and slots.waiting() == 0
    async with slots.slot("d"):
        pass


async def test_a_lent_slot_is_only_a_free_one_and_goes_back_to_whoever_waits() -> None:
    """The helpers of a split PDF borrow slots nobody waits for; a file that comes later gets one back."""
    slots = FairSlots(2, per_scope=5)
    gate = asyncio.Event()
    ran: list[str] = []

    big = asyncio.create_task(job(slots, gate, "big", ran))
    await asyncio.sleep(0)
    assert slots.try_take() and not slots.try_take()  # the second slot is lent; no third exists
    assert not slots.contended()
    other = asyncio.create_task(job(slots, gate, "other", ran))
    await asyncio.sleep(0)
    # The other scope's file waits for the lent slot, and nothing more is lent while it waits.
    assert slots.contended() and slots.waiting("other") == 1 and ran == ["big"]
    slots.give_back()
    await asyncio.sleep(0)
    assert ran == ["big", "other"] and not slots.contended() and not slots.try_take()
    gate.set()
    await asyncio.gather(big, other)
    assert slots.try_take() and slots.try_take() and not slots.try_take()
