"""Concurrent lookups answered by one query, with no lookup ever joining a query already sent.

A hot read costs one round trip to PostgreSQL, and most of its price is the trip, not the row. Under load
many reads wait at once, so `Coalescer` sends them together: a lookup that finds no query in flight sends
its own at once, from its own task; the lookups that arrive while a query runs wait and go out together in
the next one, up to `max_batch` per query.
No lookup waits for a timer, and none is answered from a query sent before it arrived, so every read
still sees what was committed before it came in.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

from shared.metrics import COALESCED

K = TypeVar("K")
V = TypeVar("V")


class Coalescer(Generic[K, V]):
    """`load(key)` answers through `fetch(keys)`, which returns one value per key, in order."""

    def __init__(self, name: str, fetch: Callable[[list[K]], Awaitable[Sequence[V]]], *, max_batch: int = 64):
        self._batch_sizes = COALESCED.labels(name)
        self._fetch = fetch
        self._max_batch = max_batch
        self._waiting: list[tuple[K, asyncio.Future[V]]] = []
        self._drainer: asyncio.Task[None] | None = None
        self._busy = False

    async def load(self, key: K) -> V:
        if self._busy:
            future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
            self._waiting.append((key, future))
            return await future
        # Nothing in flight: this lookup's query goes at once, from the caller's own task.
        self._busy = True
        try:
            (value,) = await self._fetch_checked([key])
        finally:
            self._hand_over()
        return value

    def _hand_over(self) -> None:
        """After a query: the lookups that arrived meanwhile go next, or nothing is in flight any more."""
        if self._waiting:
            self._drainer = asyncio.create_task(self._drain())
            self._drainer.add_done_callback(self._drained)
        else:
            self._busy = False

    async def _drain(self) -> None:
        while self._waiting:
            batch = self._waiting[: self._max_batch]
            del self._waiting[: self._max_batch]
            await self._answer(batch)

    def _drained(self, task: asyncio.Task[None]) -> None:
        self._drainer = None
        if not task.cancelled():
            self._hand_over()
            return
        # A cancelled drain (the loop is closing) leaves lookups behind: they fail rather than wait for ever.
        self._busy = False
        left, self._waiting = self._waiting, []
        for _, future in left:
            if not future.done():
                future.set_exception(RuntimeError("the lookup's query was cancelled"))

    async def _fetch_checked(self, keys: list[K]) -> Sequence[V]:
        self._batch_sizes.observe(len(keys))
        values = await self._fetch(keys)
        if len(values) != len(keys):
            raise RuntimeError(f"fetch answered {len(values)} values for {len(keys)} keys")
        return values

    async def _answer(self, batch: list[tuple[K, asyncio.Future[V]]]) -> None:
        try:
            values = await self._fetch_checked([key for key, _ in batch])
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        except BaseException:
            for _, future in batch:
                if not future.done():
                    future.cancel()
            raise
        for (_, future), value in zip(batch, values, strict=True):
            if not future.done():
                future.set_result(value)
