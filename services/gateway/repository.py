"""Every SQL statement of the gateway: API tokens, the workbench's sessions, write holds' signals and the runs
MCP sessions hold."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from shared.contracts.common import PageRequest
from shared.paging import Keyset

_COLUMNS = "id, scope, principal, expires_at, created_at"
# The admin's token list pages oldest first (shared/paging.py).
TOKENS = Keyset(("created_at", "id"), (datetime, str))


class TokenRepository:
    async def insert_token(
        self,
        conn: asyncpg.Connection,
        *,
        token_id: str,
        token_hash: str,
        scope: str,
        principal: str,
        expires_in: int | None,
    ) -> asyncpg.Record:
        return await conn.fetchrow(
            "INSERT INTO api_tokens (id, token_hash, scope, principal, expires_at)"
            " VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::double precision))"
            f" RETURNING {_COLUMNS}",
            token_id,
            token_hash,
            scope,
            principal,
            expires_in,
        )

    async def find_token(self, conn: asyncpg.Connection, *, token_hash: str) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT id, scope, principal, expires_at, revoked_at FROM api_tokens WHERE token_hash = $1", token_hash
        )

    async def list_tokens(
        self, conn: asyncpg.Connection, *, scope: str | None, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        """Unrevoked tokens (of one scope, or of all), oldest first."""
        query = f"SELECT {_COLUMNS} FROM api_tokens WHERE revoked_at IS NULL AND ($1::text IS NULL OR scope = $1)"
        return await TOKENS.page(conn, query, scope, of=page)

    async def revoke_token(self, conn: asyncpg.Connection, *, token_id: str) -> bool:
        revoked = await conn.fetchval(
            "UPDATE api_tokens SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING id", token_id
        )
        return revoked is not None


async def hold_token(conn: asyncpg.Connection, *, token_hash: str) -> None:
    """Until the transaction ends, the token's other openings of what it holds wait for this one, so each
    counts what the one before it left."""
    await conn.execute("SELECT 1 FROM api_tokens WHERE token_hash = $1 FOR UPDATE", token_hash)


class SessionRepository:
    async def insert_session(
        self, conn: asyncpg.Connection, *, session_hash: str, token_hash: str, lifetime_seconds: float
    ) -> None:
        await conn.execute(
            "INSERT INTO web_sessions (session_hash, token_hash, expires_at)"
            " VALUES ($1, $2, now() + make_interval(secs => $3::double precision))",
            session_hash,
            token_hash,
            lifetime_seconds,
        )

    async def delete_expired_sessions(self, conn: asyncpg.Connection) -> None:
        await conn.execute("DELETE FROM web_sessions WHERE expires_at <= now()")

    async def find_session(self, conn: asyncpg.Connection, *, session_hash: str) -> asyncpg.Record | None:
        """The session's token (its hash), while the session has not expired."""
        return await conn.fetchrow(
            "SELECT token_hash, expires_at FROM web_sessions WHERE session_hash = $1 AND expires_at > now()",
            session_hash,
        )

    async def delete_session(self, conn: asyncpg.Connection, *, session_hash: str) -> None:
        await conn.execute("DELETE FROM web_sessions WHERE session_hash = $1", session_hash)

    async def end_sessions_past(self, conn: asyncpg.Connection, *, token_hash: str, keep: int) -> list[str]:
        """Ends the token's sessions beyond its `keep` newest; returns the ended ones' hashes."""
        rows = await conn.fetch(
            "DELETE FROM web_sessions WHERE session_hash IN (SELECT session_hash FROM web_sessions"
            " WHERE token_hash = $1 ORDER BY created_at DESC, session_hash DESC OFFSET $2) RETURNING session_hash",
            token_hash,
            keep,
        )
        return [str(row["session_hash"]) for row in rows]


class HoldRepository:
    """The signals of a write hold (services/gateway/holds.py): NOTIFY, and the listeners' connections."""

    async def name_listener(self, conn: asyncpg.Connection, *, name: str) -> None:
        await conn.execute("SELECT set_config('application_name', $1, false)", name)

    async def count_listeners(self, conn: asyncpg.Connection, *, name: str) -> int:
        return int(
            await conn.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1",
                name,
            )
        )

    async def notify(self, conn: asyncpg.Connection, *, channel: str, payload: str) -> None:
        await conn.execute("SELECT pg_notify($1, $2)", channel, payload)


class RunBindingRepository:
    async def bind(
        self,
        conn: asyncpg.Connection,
        *,
        session_hash: str,
        run_id: str,
        token_hash: str,
        sealed_lease: bytes,
        lifetime_seconds: float,
    ) -> None:
        """The session holds the run under this lease from now on (a take-over's lease replaces the older)."""
        await conn.execute(
            "INSERT INTO mcp_run_bindings (session_hash, run_id, token_hash, sealed_lease, expires_at)"
            " VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5::double precision))"
            " ON CONFLICT (session_hash, run_id) DO UPDATE SET token_hash = EXCLUDED.token_hash,"
            " sealed_lease = EXCLUDED.sealed_lease, bound_at = now(), expires_at = EXCLUDED.expires_at",
            session_hash,
            run_id,
            token_hash,
            sealed_lease,
            lifetime_seconds,
        )

    async def extend(
        self, conn: asyncpg.Connection, *, session_hash: str, run_id: str, lifetime_seconds: float
    ) -> None:
        await conn.execute(
            "UPDATE mcp_run_bindings SET expires_at = now() + make_interval(secs => $3::double precision)"
            " WHERE session_hash = $1 AND run_id = $2",
            session_hash,
            run_id,
            lifetime_seconds,
        )

    async def find(
        self, conn: asyncpg.Connection, *, session_hash: str, token_hash: str, run_id: str | None
    ) -> asyncpg.Record | None:
        """The session's binding of `run_id`, or its latest one (None: the session holds no such run)."""
        return await conn.fetchrow(
            "SELECT run_id, sealed_lease FROM mcp_run_bindings"
            " WHERE session_hash = $1 AND token_hash = $2 AND ($3::text IS NULL OR run_id = $3)"
            " AND expires_at > now() ORDER BY bound_at DESC LIMIT 1",
            session_hash,
            token_hash,
            run_id,
        )

    async def forget_session(self, conn: asyncpg.Connection, *, session_hash: str, token_hash: str) -> None:
        await conn.execute(
            "DELETE FROM mcp_run_bindings WHERE session_hash = $1 AND token_hash = $2", session_hash, token_hash
        )

    async def delete_expired(self, conn: asyncpg.Connection) -> None:
        await conn.execute("DELETE FROM mcp_run_bindings WHERE expires_at <= now()")

    async def end_bindings_past(self, conn: asyncpg.Connection, *, token_hash: str, keep: int) -> None:
        """Ends the token's bindings beyond the `keep` that live longest: a run that renews its lease extends
        its binding, so an ended run's binding goes first."""
        await conn.execute(
            "DELETE FROM mcp_run_bindings WHERE (session_hash, run_id) IN (SELECT session_hash, run_id"
            " FROM mcp_run_bindings WHERE token_hash = $1 ORDER BY expires_at DESC, bound_at DESC OFFSET $2)",
            token_hash,
            keep,
        )
