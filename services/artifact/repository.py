"""Every SQL statement of the artifact service. Methods take the connection and never commit.

A repository is made for one scope (`ArtifactRepository.for_scope`) and every statement it makes filters by
that scope: an artifact of another scope is as absent as a missing one. The service has no sweep that
crosses scopes (expiry is decided at each read, by the database clock), so there is no unscoped access.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

# `expired` is decided by the database clock, so every reader agrees on the same instant.
_COLUMNS = (
    "id, title, media_type, size, content_hash, bucket, object_key, expires_at, retained_at, created_at,"
    " (expires_at IS NOT NULL AND expires_at <= now()) AS expired"
)


class ArtifactRepository:
    """Makes the repository of one scope; it holds no statement of its own."""

    def for_scope(self, scope: str) -> ScopedArtifactRepository:
        return ScopedArtifactRepository(scope)


class ScopedArtifactRepository:
    """The artifacts of one scope: what it inserts is of that scope, what it reads or changes is filtered by it."""

    def __init__(self, scope: str):
        self.scope = scope

    async def insert_artifact(
        self,
        conn: asyncpg.Connection,
        *,
        id: str,
        title: str,
        media_type: str,
        size: int,
        content_hash: str,
        bucket: str,
        object_key: str,
        expires_at: datetime | None,
    ) -> asyncpg.Record:
        return await conn.fetchrow(
            "INSERT INTO artifacts (id, scope, title, media_type, size, content_hash, bucket, object_key, expires_at)"
            f" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {_COLUMNS}",
            id,
            self.scope,
            title,
            media_type,
            size,
            content_hash,
            bucket,
            object_key,
            expires_at,
        )

    async def get_artifact(
        self, conn: asyncpg.Connection, *, id: str, for_update: bool = False
    ) -> asyncpg.Record | None:
        return await conn.fetchrow(
            f"SELECT {_COLUMNS} FROM artifacts WHERE id = $1 AND scope = $2" + (" FOR UPDATE" if for_update else ""),
            id,
            self.scope,
        )

    async def retain(self, conn: asyncpg.Connection, *, id: str, expires_at: datetime | None) -> asyncpg.Record | None:
        """The artifact's row after the change; None when the scope holds no such artifact."""
        return await conn.fetchrow(
            "UPDATE artifacts SET retained_at = now(),"
            " expires_at = CASE WHEN expires_at IS NULL OR $3::timestamptz IS NULL THEN NULL"
            "  ELSE greatest(expires_at, $3::timestamptz) END"
            f" WHERE id = $1 AND scope = $2 RETURNING {_COLUMNS}",
            id,
            self.scope,
            expires_at,
        )

    async def check_artifacts(self, conn: asyncpg.Connection, *, ids: list[str]) -> list[asyncpg.Record]:
        """One row per requested id that exists in the scope, with its position in the request."""
        rows: list[asyncpg.Record] = await conn.fetch(
            f"SELECT r.ord, a.* FROM unnest($2::text[]) WITH ORDINALITY AS r(id, ord)"
            f" JOIN LATERAL (SELECT {_COLUMNS} FROM artifacts WHERE id = r.id AND scope = $1) a ON true",
            self.scope,
            ids,
        )
        return rows
