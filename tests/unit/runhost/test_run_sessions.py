"""The reads of a run's steps say a session that closed under them as a lost session (shared/db.py `statement`),
which the worker answers by letting the run be taken up again, as after a crash. Raised as asyncpg raised it,
the client error of a session whose goodbye is read amid a statement ("another operation is in progress")
failed the run as an internal error (tests/e2e/test_runs_faults.py, PostgreSQL killed, once in a CI run).

The race inside asyncpg that raises it cannot be played on demand (tests/service/test_database_sessions.py
tests the wrapper on a real server): here a pool hands out a session that has closed and a repository whose
every statement raises that error."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pytest

from services.runhost.claims import check_answer
from services.runhost.journal import ModelJournal
from services.runhost.ledger import RunLedger
from services.runhost.memory import RunFiles
from shared.db import Database, session_lost

RUN = "run_0123456789abcdef0123456789abcdef"


class ClosedSession:
    def is_closed(self) -> bool:
        return True


class Pool:
    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[ClosedSession]:
        yield ClosedSession()


class Repository:
    """Every statement fails as one on a session whose close was read amid it."""

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def statement(*_: Any, **__: Any) -> Any:
            raise asyncpg.exceptions.InternalClientError(
                "cannot switch to state 12; another operation (2) is in progress"
            )

        return statement


def database() -> Database:
    db = Database("postgresql://unused@127.0.0.1:1/unused")
    db._pool = Pool()  # type: ignore[assignment]
    return db


def reads(db: Database) -> dict[str, Callable[[], Awaitable[Any]]]:
    repo: Any = Repository()
    files = RunFiles(None, db, repo, RUN, 1)  # type: ignore[arg-type]
    return {
        "a working file's entry": lambda: files.entry("plan.md"),
        "the working files' listing": files.listing,
        "the ledger an earlier attempt left": RunLedger(db, repo, RUN, 1).load,
        "the model journal's transcript": ModelJournal(db, RUN, 1, repo=repo).transcript,
        "the answer's claims": lambda: check_answer(db, repo, files, "an answer"),
    }


@pytest.mark.parametrize("read", list(reads(database())))
async def test_a_session_closed_under_a_run_s_read_is_a_lost_session(read: str) -> None:
    with pytest.raises(Exception) as raised:
        await reads(database())[read]()
    assert session_lost(raised.value), repr(raised.value)
