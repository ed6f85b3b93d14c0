"""PostgreSQL: a pool with JSON codecs, numbered-migration runner, the one-transaction helper, rows to models."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
from pydantic import BaseModel

log = logging.getLogger("dossier.db")
SHARED_MIGRATIONS = Path(__file__).parent / "migrations"
_NAME = re.compile(r"^\d{4}_[a-z0-9_]+\.sql$")
# Any constant will do, as long as every service uses the same one for its own database.
_MIGRATION_LOCK = 7_351_002

M = TypeVar("M", bound=BaseModel)

# What a statement raises when its session is gone: the server was restarted or shut down, an operator ended
# the session, it waited too long inside a transaction (`Database(idle_transaction_seconds=…)`), or the
# server could not be reached.
_LOST: tuple[type[Exception], ...] = (
    asyncpg.PostgresConnectionError,
    asyncpg.AdminShutdownError,
    asyncpg.CrashShutdownError,
    asyncpg.CannotConnectNowError,
    asyncpg.IdleInTransactionSessionTimeoutError,
    ConnectionError,
)
# asyncpg's words when the session closed under a connection still in use: the pool took the connection
# back as it closed, or the statement came after the close.
_LOST_WORDS = ("connection has been released back to the pool", "connection is closed")


class SessionLost(ConnectionError):
    """A transaction's session closed under it, where asyncpg said so with a client error."""


async def _closing(conn: asyncpg.Connection) -> bool:
    """Whether the connection is closed or closes within a few turns of the loop (a close already read from
    the socket is handled in a later turn than the data before it)."""
    for _ in range(5):
        try:
            if conn.is_closed():
                return True
        except asyncpg.InterfaceError:  # the pool took it back as it closed
            return True
        await asyncio.sleep(0.01)
    return False


@asynccontextmanager
async def _lost_said(conn: asyncpg.Connection, what: str) -> AsyncIterator[None]:
    """asyncpg's client errors on a session that closed under the block, said as `SessionLost` (a
    `ConnectionError`, which every caller that rides out a database blip catches). A process that resumes
    after the server ended its session can read the server's goodbye amid its next statement and see its
    protocol in a state that says only "in progress"."""
    try:
        yield
    except (asyncpg.InterfaceError, asyncpg.exceptions.InternalClientError) as exc:
        if session_lost(exc) or await _closing(conn):
            raise SessionLost(f"the session ended under the {what} ({exc!r})") from exc
        raise


def session_lost(exc: BaseException) -> bool:
    """Whether `exc` says the session of the statement is gone. The work it was part of did not happen, or
    not all of it: it can be redone, as after a crash of the process."""
    if isinstance(exc, _LOST):
        return True
    return isinstance(exc, asyncpg.InterfaceError) and any(words in str(exc) for words in _LOST_WORDS)


async def _init_connection(conn: asyncpg.Connection) -> None:
    for typename in ("json", "jsonb"):
        await conn.set_type_codec(typename, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Nothing to undo: see `Database(session_state=False)`."""


def from_row(model: type[M], row: Mapping[str, Any], **values: Any) -> M:
    """`model` from the row's columns named like its fields (other columns are left out), and `values`,
    which take the place of a column of the same name."""
    return model.model_validate({name: row[name] for name in model.model_fields if name in row} | values)


def database_name(dsn: str) -> str:
    return urlsplit(dsn).path.lstrip("/")


async def ensure_database(dsn: str) -> None:
    """Create the database named by `dsn` when it is missing (through the server's own `postgres` db),
    open to its creator alone: CONNECT is revoked from PUBLIC, so no other service's role gets in."""
    parts = urlsplit(dsn)
    name = database_name(dsn)
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ValueError(f"refusing to create a database with the name {name!r}")
    try:
        # The usual case, and the only one a role without access to `postgres` can take.
        await (await asyncpg.connect(dsn)).close()
        return
    except asyncpg.InvalidCatalogNameError:
        pass
    admin = await asyncpg.connect(urlunsplit(parts._replace(path="/postgres")))
    try:
        exists = await admin.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name)
        if not exists:
            try:
                await admin.execute(f'CREATE DATABASE "{name}"')
            except (asyncpg.DuplicateDatabaseError, asyncpg.UniqueViolationError):
                # Made meanwhile by another process of the same service (gateway workers start together):
                # two concurrent CREATEs can collide on the catalog's unique index instead.
                pass
            await admin.execute(f'REVOKE ALL ON DATABASE "{name}" FROM PUBLIC')
    finally:
        await admin.close()


def migration_files(*directories: Path) -> list[tuple[str, Path]]:
    files: list[tuple[str, Path]] = []
    for directory in directories:
        for path in sorted(directory.glob("*.sql")):
            if not _NAME.match(path.name):
                raise ValueError(f"migration {path.name} does not follow NNNN_name.sql")
            files.append((f"{directory.parent.name}/{path.name}", path))
    return files


async def migrate(pool: asyncpg.Pool, *directories: Path) -> list[str]:
    """Apply, once and in order, the shared migrations then each directory's numbered .sql files."""
    applied: list[str] = []
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _MIGRATION_LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["name"] for r in await conn.fetch("SELECT name FROM schema_migrations")}
        for name, path in migration_files(SHARED_MIGRATIONS, *directories):
            if name in done:
                continue
            await conn.execute(path.read_text())
            await conn.execute("INSERT INTO schema_migrations (name) VALUES ($1)", name)
            applied.append(name)
    return applied


class Database:
    """A lazily connected pool. Rules get this object; the runtime connects and closes it."""

    def __init__(
        self,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        session_state: bool = True,
        idle_transaction_seconds: float | None = None,
    ):
        """`session_state=False` promises the code never leaves session state on a connection (no session
        advisory locks, LISTEN, cursors or SET outside a transaction), so a released connection skips the
        reset query: one round trip less per acquire (asyncpg still rolls back an open transaction).
        `idle_transaction_seconds`: PostgreSQL ends a session of this pool that waits this long inside a
        transaction, so a frozen process (stopped, paused) never keeps its row locks from the others."""
        self.dsn = dsn
        self._min, self._max = min_size, max_size
        self._reset = None if session_state else _keep_session
        self._server_settings = (
            {}
            if idle_transaction_seconds is None
            else {"idle_in_transaction_session_timeout": str(int(idle_transaction_seconds * 1000))}
        )
        self._pool: asyncpg.Pool | None = None

    @property
    def pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("the database is not connected")
        return self._pool

    async def connect(self, *migration_dirs: Path) -> None:
        await ensure_database(self.dsn)
        self._pool = await asyncpg.create_pool(
            self.dsn,
            min_size=self._min,
            max_size=self._max,
            init=_init_connection,
            reset=self._reset,
            server_settings=self._server_settings,
        )
        await migrate(self._pool, *migration_dirs)

    async def close(self, timeout: float = 10.0) -> None:
        """Graceful close, bounded: a connection still out after `timeout` is terminated, never waited on."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                async with asyncio.timeout(timeout):
                    await pool.close()
            except TimeoutError:
                log.warning("database pool did not close within %.0fs; terminating it", timeout)
                pool.terminate()

    @asynccontextmanager
    async def listening(
        self, channel: str, wake: Callable[[], None], retry_seconds: float = 1.0
    ) -> AsyncIterator[None]:
        """Calls `wake()` at every NOTIFY on `channel` while the block runs, on a session of the pool held for
        it. When that session ends (the server restarted, an operator ended it), a new one listens after
        `retry_seconds`, and `wake()` is called once it does: what was notified in between is not missed."""
        task = asyncio.create_task(self._listen(channel, wake, retry_seconds))
        try:
            yield
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _listen(self, channel: str, wake: Callable[[], None], retry_seconds: float) -> None:
        again = told = False
        while True:
            try:
                await self._listen_once(channel, wake, again)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # no session to listen on yet (the server is down or restarting)
                if not told:
                    log.warning("cannot listen on %s (%r); trying again every %g s", channel, exc, retry_seconds)
                told = True
            else:
                log.warning("the listener on %s lost its session; listening again", channel)
                told = False
            again = True
            await asyncio.sleep(retry_seconds)

    async def _listen_once(self, channel: str, wake: Callable[[], None], again: bool) -> None:
        """Listens on one session of the pool until it ends (or the task is cancelled); raises when it cannot
        start to."""
        lost = asyncio.Event()

        def on_notify(*_: object) -> None:
            wake()

        def on_lost(_conn: object) -> None:
            lost.set()

        async with self.pool.acquire() as conn:
            conn.add_termination_listener(on_lost)
            await conn.add_listener(channel, on_notify)
            try:
                if again:
                    log.info("listening on %s again", channel)
                    wake()
                await lost.wait()
            finally:
                if not lost.is_set():
                    # Stopped (a lost session takes its listeners with it): the pool gets the session back clean.
                    with suppress(Exception):
                        conn.remove_termination_listener(on_lost)
                        await conn.remove_listener(channel, on_notify)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[asyncpg.Connection]:
        """One transaction per message: the change and its outbox row commit together, or neither."""
        async with self.pool.acquire() as conn, _lost_said(conn, "transaction"), conn.transaction():
            yield conn

    @asynccontextmanager
    async def statement(self) -> AsyncIterator[asyncpg.Connection]:
        """A session for statements that PostgreSQL runs atomically each on its own: no BEGIN and COMMIT
        round trips beside them. A lost session is said as `transaction()` says it, so whoever rides out a
        database blip (a run's worker lets its run be taken up again, a request is answered as one whose
        outcome is not known) knows it. The services take every session here or in `transaction()`, never
        from the pool itself (tests/unit/test_layers.py)."""
        async with self.pool.acquire() as conn, _lost_said(conn, "statement"):
            yield conn
