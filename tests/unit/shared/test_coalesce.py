"""shared.coalesce: concurrent lookups share a query, and none joins a query already sent."""

from __future__ import annotations

import asyncio

import pytest

from shared.coalesce import Coalescer


class Source:
    """A fetch that records each query's keys and holds it open until released."""

    def __init__(self) -> None:
        self.queries: list[list[int]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: Exception | None = None

    async def fetch(self, keys: list[int]) -> list[str]:
        self.queries.append(list(keys))
        await asyncio.sleep(0)  # a query always waits on its answer, as one to the database does
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return [f"v{k}" for k in keys]


async def test_a_lone_lookup_is_answered_by_its_own_query() -> None:
    source = Source()
    assert await Coalescer("test", source.fetch).load(7) == "v7"
    assert source.queries == [[7]]


async def test_lookups_that_wait_together_share_one_query_and_each_gets_its_own_value() -> None:
    source = Source()
    loads = Coalescer("test", source.fetch)
    assert await asyncio.gather(*(loads.load(k) for k in range(5))) == [f"v{k}" for k in range(5)]
    assert source.queries == [[0], [1, 2, 3, 4]], "the first goes at once, the others wait for it together"


async def test_a_lookup_arriving_while_a_query_runs_waits_for_the_next_query() -> None:
    source = Source()
    loads = Coalescer("test", source.fetch)
    source.gate.clear()
    first = asyncio.create_task(loads.load(1))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert source.queries == [[1]]
    later = [asyncio.create_task(loads.load(k)) for k in (2, 3)]
    await asyncio.sleep(0)
    assert source.queries == [[1]], "a query already sent took a lookup that came after it"
    source.gate.set()
    assert await first == "v1" and [await t for t in later] == ["v2", "v3"]
    assert source.queries == [[1], [2, 3]]


async def test_no_query_takes_more_than_the_batch_limit() -> None:
    source = Source()
    loads = Coalescer("test", source.fetch, max_batch=3)
    assert await asyncio.gather(*(loads.load(k) for k in range(7))) == [f"v{k}" for k in range(7)]
    assert source.queries == [[0], [1, 2, 3], [4, 5, 6]]


async def test_a_failed_query_fails_its_own_lookups_and_the_next_query_still_runs() -> None:
    source = Source()
    loads = Coalescer("test", source.fetch)
    source.gate.clear()
    source.fail = ConnectionError("the database went away")
    doomed = [asyncio.create_task(loads.load(k)) for k in (1, 2)]
    await asyncio.sleep(0)
    source.gate.set()
    for task in doomed:
        with pytest.raises(ConnectionError):
            await task
    source.fail = None
    assert await loads.load(3) == "v3"


async def test_a_cancelled_lookup_leaves_the_others_answered() -> None:
    source = Source()
    loads = Coalescer("test", source.fetch)
    source.gate.clear()
    gone, kept = asyncio.create_task(loads.load(1)), asyncio.create_task(loads.load(2))
    await asyncio.sleep(0)
    gone.cancel()
    source.gate.set()
    assert await kept == "v2"
    assert gone.cancelled()


async def test_a_fetch_that_answers_the_wrong_number_of_values_is_an_error_not_a_wrong_answer() -> None:
    async def short(keys: list[int]) -> list[str]:
        await asyncio.sleep(0)
        return [f"v{k}" for k in keys[1:]]

    loads = Coalescer("test", short)
    results = await asyncio.gather(loads.load(1), loads.load(2), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)


async def test_lookups_left_behind_by_a_cancelled_query_fail_instead_of_waiting_for_ever() -> None:
    source = Source()
    loads = Coalescer("test", source.fetch, max_batch=1)
    source.gate.clear()
    first = asyncio.create_task(loads.load(1))
    await asyncio.sleep(0)
    in_batch, left_behind = asyncio.create_task(loads.load(2)), asyncio.create_task(loads.load(3))
    await asyncio.sleep(0)
    first.cancel()  # its query ends, and the next one takes lookup 2 only
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    drainer = loads._drainer
    assert drainer is not None and source.queries == [[1], [2]]
    drainer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await in_batch
    with pytest.raises(RuntimeError, match="cancelled"):
        await left_behind
    source.gate.set()
    assert await loads.load(4) == "v4"
