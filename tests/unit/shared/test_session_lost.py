"""`session_lost` knows a gone session from a statement that failed on its own."""

from __future__ import annotations

import asyncpg
import pytest

from shared.db import session_lost


@pytest.mark.parametrize(
    "exc",
    [
        asyncpg.ConnectionDoesNotExistError("connection was closed in the middle of operation"),
        asyncpg.AdminShutdownError("terminating connection due to administrator command"),
        asyncpg.CannotConnectNowError("the database system is starting up"),
        asyncpg.IdleInTransactionSessionTimeoutError("terminating connection due to idle-in-transaction timeout"),
        ConnectionRefusedError(111, "Connect call failed"),
        ConnectionResetError(104, "Connection reset by peer"),
        asyncpg.InterfaceError("cannot call Connection.fetchval(): connection has been released back to the pool"),
        asyncpg.InterfaceError("cannot call Transaction.__aexit__(): the underlying connection is closed"),
    ],
)
def test_a_gone_session(exc: Exception) -> None:
    assert session_lost(exc)


@pytest.mark.parametrize(
    "exc",
    [
        asyncpg.UniqueViolationError("duplicate key value violates unique constraint"),
        asyncpg.QueryCanceledError("canceling statement due to statement timeout"),
        asyncpg.LockNotAvailableError("canceling statement due to lock timeout"),
        asyncpg.InterfaceError("cannot perform operation: another operation is in progress"),
        ValueError("connection is closed"),
        TimeoutError(),
    ],
)
def test_a_statement_that_failed_on_its_own(exc: Exception) -> None:
    assert not session_lost(exc)
