"""Every SQL statement of the gateway (API tokens only)."""

from __future__ import annotations

import asyncpg


class TokenRepository:
    async def insert_token(self, conn: asyncpg.Connection, *, token_hash: str, scope: str, principal: str) -> None:
        await conn.execute(
            "INSERT INTO api_tokens (token_hash, scope, principal) VALUES ($1, $2, $3)",
            token_hash,
            scope,
            principal,
        )

    async def find_token(self, conn: asyncpg.Connection, *, token_hash: str) -> asyncpg.Record | None:
        return await conn.fetchrow("SELECT scope, principal FROM api_tokens WHERE token_hash = $1", token_hash)
