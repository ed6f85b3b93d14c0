"""Extraction slots shared fairly between scopes, and the claims of versions that wait for one.

A version waiting for a parser slot holds no pooled connection: its claim (the advisory lock that keeps
the recovery sweep away from it) is held on one dedicated connection for all waiting versions, and
handed to a pooled connection only once a slot is free. Slots go round-robin to the scopes that wait,
each scope in its own bounded FIFO, so one tenant's many slow files never stall another's.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg

from services.assets.repository import AssetsMaintenance
from shared.errors import Timeout


class ScopeQueueFull(Timeout):
    pass


class FairSlots:
    def __init__(self, capacity: int, *, per_scope: int):
        self._free = max(1, capacity)
        self._per_scope = per_scope
        self._queues: dict[str, deque[asyncio.Future[None]]] = {}
        self._turns: deque[str] = deque()

    def waiting(self, scope: str | None = None) -> int:
        if scope is not None:
            return len(self._queues.get(scope, ()))
        return sum(len(q) for q in self._queues.values())

    @asynccontextmanager
    async def slot(self, scope: str) -> AsyncIterator[None]:
        await self._acquire(scope)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, scope: str) -> None:
        if self._free > 0 and not self._turns:
            self._free -= 1
            return
        queue = self._queues.setdefault(scope, deque())
        if len(queue) >= self._per_scope:
            raise ScopeQueueFull(
                "too many files of this scope are waiting to be extracted; try again later",
                {"limit": self._per_scope},
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue.append(waiter)
        if len(queue) == 1:
            self._turns.append(scope)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # the slot was handed to us as we were cancelled: pass it on
            else:
                self._forget(scope, waiter)
            raise

    # Lent slots, for the shares of a split file (services.assets.splitting): only a slot nobody waits for
    # is lent, and a lent slot goes back at its share's next block boundary once anybody waits.

    def try_take(self) -> bool:
        if self._free > 0 and not self._turns:
            self._free -= 1
            return True
        return False

    def contended(self) -> bool:
        return bool(self._turns)

    def give_back(self) -> None:
        self._release()

    def _forget(self, scope: str, waiter: asyncio.Future[None]) -> None:
        queue = self._queues.get(scope)
        if queue is None or waiter not in queue:
            return
        queue.remove(waiter)
        if not queue:
            del self._queues[scope]
            self._turns.remove(scope)

    def _release(self) -> None:
        """Hand the slot to the next scope in turn (its oldest waiter), else keep it free."""
        while self._turns:
            scope = self._turns.popleft()
            queue = self._queues[scope]
            waiter = queue.popleft()
            if queue:
                self._turns.append(scope)
            else:
                del self._queues[scope]
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class ClaimHolder:
    """Claims of versions that wait for a slot, all held on one connection of its own (not the pool's)."""

    def __init__(self, dsn: str, repo: AssetsMaintenance):
        self._dsn, self._repo = dsn, repo
        self._conn: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()

    async def hold(self, asset_id: str) -> bool:
        async with self._lock:
            try:
                if self._conn is None or self._conn.is_closed():
                    self._conn = await asyncpg.connect(self._dsn)
                return await self._repo.try_claim(self._conn, asset_id=asset_id)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                # Without the claim a waiting version can be taken by the sweep; that is still one outcome.
                self._conn = None
                return False

    async def let_go(self, asset_id: str) -> None:
        async with self._lock:
            if self._conn is None or self._conn.is_closed():
                return
            try:
                await self._repo.release(self._conn, asset_id=asset_id)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                self._conn = None

    async def close(self) -> None:
        if self._conn is not None and not self._conn.is_closed():
            await self._conn.close()
        self._conn = None
