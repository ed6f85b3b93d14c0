"""A service's own database for a test: a new database, migrated as the service migrates it at start."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest

from shared.db import Database
from tests.support.infra import Infra


def migrated_database(service: str, migrations: Path) -> Callable[..., Any]:
    """A fixture `db`: a database of its own for each test, named after `service`, with its `migrations`."""

    @pytest.fixture
    async def db(infra: Infra) -> AsyncIterator[Database]:
        async with AsyncExitStack() as stack:
            database = Database(infra.dsn(f"{service}_{uuid.uuid4().hex[:10]}"))
            stack.push_async_callback(database.close)
            await database.connect(migrations)
            yield database

    return db


async def listener_session(db: Database) -> int | None:
    """The session of `db`'s database that listens (`Database.listening`): its last statement was a LISTEN,
    and it is done. PostgreSQL shows a statement from its start, so a session still running its LISTEN would
    not yet hear a NOTIFY sent now."""
    async with db.pool.acquire() as conn:
        pid = await conn.fetchval(
            "SELECT pid FROM pg_stat_activity"
            " WHERE datname = current_database() AND query LIKE 'LISTEN %' AND state = 'idle'"
        )
    return int(pid) if pid is not None else None
