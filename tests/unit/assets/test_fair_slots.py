"""Parser slots go round-robin to the scopes that wait; a scope's queue is bounded; a cancelled waiter
gives its turn away."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from services.assets.queueing import FairSlots, ScopeQueueFull


@dataclass
class Jobs:
    """Jobs that each hold a slot of their scope until `gate` opens; `ran` names them as they get one."""

    slots: FairSlots
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    ran: list[str] = field(default_factory=list)

    async def job(self, scope: str, name: str = "") -> None:
        async with self.slots.slot(scope):
            self.ran.append(name or scope)
            await self.gate.wait()


async def test_slots_go_round_robin_between_waiting_scopes() -> None:
    slots = FairSlots(1, per_scope=10)
    jobs = Jobs(slots)
    first = asyncio.create_task(jobs.job("a", "a0"))
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(jobs.job("a", f"a{i}")) for i in range(1, 4)]
    await asyncio.sleep(0)
    tasks.append(asyncio.create_task(jobs.job("b", "b0")))
    await asyncio.sleep(0)
    assert slots.waiting("a") == 3 and slots.waiting("b") == 1
    jobs.gate.set()
    await asyncio.gather(first, *tasks)
    assert jobs.ran == ["a0", "a1", "b0", "a2", "a3"]


async def test_a_scope_queue_is_bounded_and_others_still_queue() -> None:
    slots = FairSlots(1, per_scope=2)
    jobs = Jobs(slots)
    tasks = [asyncio.create_task(jobs.job("a")) for _ in range(3)]
    await asyncio.sleep(0)
    with pytest.raises(ScopeQueueFull):
        await jobs.job("a")
    tasks.append(asyncio.create_task(jobs.job("b")))
    await asyncio.sleep(0)
    assert slots.waiting() == 3
    jobs.gate.set()
    await asyncio.gather(*tasks)
    assert slots.waiting() == 0


async def test_a_cancelled_waiter_leaves_the_queue_and_the_slot_moves_on() -> None:
    slots = FairSlots(1, per_scope=5)
    jobs = Jobs(slots)
    holder = asyncio.create_task(jobs.job("a"))
    await asyncio.sleep(0)
    doomed = asyncio.create_task(jobs.job("b"))
    later = asyncio.create_task(jobs.job("c"))
    await asyncio.sleep(0)
    doomed.cancel()
    await asyncio.gather(doomed, return_exceptions=True)
    jobs.gate.set()
    await asyncio.gather(holder, later)
    assert jobs.ran == ["a", "c"] and slots.waiting() == 0
    async with slots.slot("d"):
        pass


async def test_a_lent_slot_is_only_a_free_one_and_goes_back_to_whoever_waits() -> None:
    """The helpers of a split PDF borrow slots nobody waits for; a file that comes later gets one back."""
    slots = FairSlots(2, per_scope=5)
    jobs = Jobs(slots)
    big = asyncio.create_task(jobs.job("big"))
    await asyncio.sleep(0)
    assert slots.try_take() and not slots.try_take()  # the second slot is lent; no third exists
    assert not slots.contended()
    other = asyncio.create_task(jobs.job("other"))
    await asyncio.sleep(0)
    # The other scope's file waits for the lent slot, and nothing more is lent while it waits.
    assert slots.contended() and slots.waiting("other") == 1 and jobs.ran == ["big"]
    slots.give_back()
    await asyncio.sleep(0)
    assert jobs.ran == ["big", "other"] and not slots.contended() and not slots.try_take()
    jobs.gate.set()
    await asyncio.gather(big, other)
    assert slots.try_take() and slots.try_take() and not slots.try_take()
