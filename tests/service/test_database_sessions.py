"""Sessions of `shared.db.Database` on a real PostgreSQL: one frozen inside a transaction lets go of its row
locks after `idle_transaction_seconds`, what a lost session raises is known by `session_lost`, and a
listener whose session ends listens again."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from services.runhost.app import IDLE_TRANSACTION, create_app
from shared.db import Database, database_name, session_lost
from shared.settings import RunhostSettings
from tests.support.databases import listener_session
from tests.support.eventbus import in_memory
from tests.support.infra import Infra
from tests.support.probe import probe_until


@contextlib.asynccontextmanager
async def databases(infra: Infra, idle: float | None = None) -> AsyncIterator[tuple[Database, Database]]:
    """Two pools on one new database holding one row: the first ending sessions idle `idle` seconds inside
    a transaction, the second never. Both are closed at the end."""
    dsn = infra.dsn(f"sessions_{uuid.uuid4().hex[:10]}")
    first, second = Database(dsn, idle_transaction_seconds=idle), Database(dsn)
    try:
        await first.connect()
        await second.connect()
        async with second.transaction() as conn:
            await conn.execute("CREATE TABLE held (id int PRIMARY KEY, n int NOT NULL)")
            await conn.execute("INSERT INTO held VALUES (1, 0)")
        yield first, second
    finally:
        await first.close()
        await second.close()


async def lock_row(db: Database, wait: str) -> int:
    """The row locked and updated by a transaction that waits at most `wait` for its lock."""
    async with db.transaction() as conn:
        await conn.execute(f"SET LOCAL lock_timeout = '{wait}'")
        return int(await conn.fetchval("UPDATE held SET n = n + 1 WHERE id = 1 RETURNING n"))


async def test_a_session_frozen_inside_a_transaction_lets_go_of_its_row(infra: Infra) -> None:
    locked, woken = asyncio.Event(), asyncio.Event()

    async def frozen(db: Database) -> None:
        async with db.transaction() as conn:
            await conn.execute("UPDATE held SET n = 100 WHERE id = 1")
            locked.set()
            await woken.wait()  # sends nothing meanwhile, as a stopped process would
            await conn.fetchval("SELECT n FROM held WHERE id = 1")

    async with databases(infra, idle=1.0) as (frozen_db, other):
        holder = asyncio.create_task(frozen(frozen_db))
        try:
            await locked.wait()
            # Another takes the row once the server ends the frozen session, well within a lock wait that
            # would otherwise run out.
            assert await lock_row(other, "60s") == 1
            woken.set()
            with pytest.raises(Exception) as raised:
                await holder
            assert session_lost(raised.value), repr(raised.value)
            # The pool replaces what the server closed: the next transaction has a session of its own.
            assert await lock_row(frozen_db, "5s") == 2
        finally:
            holder.cancel()
            await asyncio.gather(holder, return_exceptions=True)


@pytest.mark.parametrize("then", ["commit", "statement"])
async def test_a_process_frozen_inside_a_transaction_finds_its_session_lost_when_it_wakes(
    infra: Infra, then: str
) -> None:
    """The whole process stops (here: its loop blocked, as SIGSTOP would), so it reads the server's goodbye
    only amid what it sends next; whatever asyncpg then raises, it is known as a lost session."""
    async with databases(infra, idle=0.5) as (db, _):
        with pytest.raises(Exception) as raised:
            async with db.transaction() as conn:
                await conn.execute("UPDATE held SET n = 100 WHERE id = 1")
                time.sleep(1.5)  # noqa: ASYNC251 - the point: the loop frozen, as in a stopped process
                if then == "statement":
                    await conn.fetchval("SELECT n FROM held WHERE id = 1")
        assert session_lost(raised.value), repr(raised.value)
        # Nothing of the frozen transaction was kept, and the pool serves on.
        assert await lock_row(db, "5s") == 1


async def terminate(dsn: str, pid: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
    finally:
        await conn.close()


@pytest.mark.parametrize("closed", [True, False])
@pytest.mark.parametrize("block", ["transaction", "statement"])
async def test_a_client_error_in_a_transaction_or_statement_is_a_lost_session_only_when_the_session_closes(
    infra: Infra, closed: bool, block: str
) -> None:
    """A client error raised in a transaction (or a `statement()` block) whose session is ended meanwhile (the
    goodbye not yet read) comes out as a lost session; one raised on a live session comes out as it was raised. (The error a
    stopped run host met as it woke, its COMMIT reading the goodbye, comes from a race inside asyncpg that
    only tests/e2e/test_runs_faults.py's frozen worker reproduces.)"""
    raised_in = asyncpg.exceptions.InternalClientError(
        "cannot switch to state 15; another operation (2) is in progress"
    )
    async with databases(infra) as (db, admin):
        with pytest.raises(Exception) as raised:
            async with db.transaction() if block == "transaction" else db.statement() as conn:
                if closed:
                    # Ended from another thread while this loop waits, blocked: the goodbye is not read yet.
                    pid = await conn.fetchval("SELECT pg_backend_pid()")
                    ender = threading.Thread(target=asyncio.run, args=(terminate(admin.dsn, pid),))
                    ender.start()
                    ender.join()
                raise raised_in
        assert session_lost(raised.value) is closed, repr(raised.value)
        if not closed:
            assert raised.value is raised_in


async def test_without_the_setting_a_frozen_transaction_keeps_its_row(infra: Infra) -> None:
    async with databases(infra) as (holder, other):
        async with holder.transaction() as conn:
            await conn.execute("UPDATE held SET n = 100 WHERE id = 1")
            await asyncio.sleep(1.5)
            with pytest.raises(asyncpg.LockNotAvailableError):
                await lock_row(other, "1s")
        assert await lock_row(other, "5s") == 101


async def test_a_session_ended_by_an_operator_is_named_lost(infra: Infra) -> None:
    async with databases(infra) as (db, admin), db.pool.acquire() as conn:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        query = asyncio.create_task(conn.fetchval("SELECT pg_sleep(30)"))
        await asyncio.sleep(0.3)
        async with admin.pool.acquire() as other:
            assert await other.fetchval("SELECT pg_terminate_backend($1)", pid)
        with pytest.raises(Exception) as raised:
            await query
        assert session_lost(raised.value), repr(raised.value)


async def test_the_run_hosts_sessions_end_when_frozen_inside_a_transaction(infra: Infra) -> None:
    async with in_memory(infra, "runhost", create_app, RunhostSettings) as served:
        async with served.runtime.db.pool.acquire() as conn:
            shown = await conn.fetchval("SHOW idle_in_transaction_session_timeout")
    assert shown == f"{int(IDLE_TRANSACTION)}s"


async def test_a_listener_whose_session_ends_listens_again_and_says_so(infra: Infra) -> None:
    """What the run host's claim loop and every outbox relay stand on: after a restart of PostgreSQL they were
    woken by their polls alone. The owner is woken once the new session listens, for what it missed."""
    wakes: list[float] = []
    woken = asyncio.Event()

    def wake() -> None:
        wakes.append(time.monotonic())
        woken.set()

    async def notified(sender: Database) -> None:
        woken.clear()
        async with sender.pool.acquire() as conn:
            await conn.execute("NOTIFY tests_wake")
        async with asyncio.timeout(10):
            await woken.wait()

    async with databases(infra) as (db, admin):
        async with db.listening("tests_wake", wake, retry_seconds=0.1):
            first = await probe_until(lambda: listener_session(admin), timeout=10)
            await notified(admin)
            assert len(wakes) == 1
            woken.clear()
            await terminate(admin.dsn, first)
            async with asyncio.timeout(10):
                await woken.wait()  # listening again, and said so
            assert len(wakes) == 2
            again = await listener_session(admin)
            assert again is not None and again != first
            await notified(admin)
            assert len(wakes) == 3
        # Stopped: the session went back to the pool without its LISTEN, and nothing wakes the owner any more.
        assert await listener_session(admin) is None
        async with admin.pool.acquire() as conn:
            await conn.execute("NOTIFY tests_wake")
        await asyncio.sleep(0.3)
        assert len(wakes) == 3


async def test_a_listener_that_cannot_have_a_session_tries_again_until_it_has_one(
    infra: Infra, caplog: pytest.LogCaptureFixture
) -> None:
    """Its session ended while the database takes no new ones (as while a server restarts): the listener
    tries again, says so once, and listens and wakes its owner when it can."""
    woken = asyncio.Event()
    async with databases(infra) as (db, admin):
        name = database_name(db.dsn)
        async with db.listening("tests_wake", woken.set, retry_seconds=0.1):
            first = await probe_until(lambda: listener_session(admin), timeout=10)
            server = await asyncpg.connect(infra.dsn("postgres"))
            try:
                await server.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
                try:
                    assert await server.fetchval("SELECT pg_terminate_backend($1, 5000)", first)
                    await asyncio.sleep(1.0)  # ten tries refused
                    assert not woken.is_set()
                finally:
                    await server.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
            finally:
                await server.close()
            async with asyncio.timeout(10):
                await woken.wait()
            assert await listener_session(admin) not in (None, first)
    refused = [r for r in caplog.records if r.getMessage().startswith("cannot listen on tests_wake")]
    assert len(refused) == 1, [r.getMessage() for r in caplog.records]
