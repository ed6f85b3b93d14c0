"""Every SQL statement of the artifact service. Methods take the connection and never commit."""

from __future__ import annotations

from datetime import datetime

import asyncpg

# `expired` is decided by the database clock, so every reader agrees on the same instant.
_COLUMNS = (
    "id, title, media_type, size, content_hash, bucket, object_key, expires_at, retained_at, created_at,"
    " (expires_at IS NOT NULL AND expires_at <= now()) AS expired"
)


class ArtifactRepository:
    async def insert_artifact(
        self,
        conn: asyncpg.Connection,
        *,
        id: str,
        scope: str,
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
            scope,
            title,
            media_type,
            size,
            content_hash,
            bucket,
            object_key,
            expires_at,
        )

    async def get_artifact(
        self, conn: asyncpg.Connection, *, scope: str, id: str, for_update: bool = False
    ) -> asyncpg.Record | None:
        return await conn.fetchrow(
            f"SELECT {_COLUMNS} FROM artifacts WHERE id = $1 AND scope = $2" + (" FOR UPDATE" if for_update else ""),
            id,
            scope,
        )

    async def retain(
        self, conn: asyncpg.Connection, *, scope: str, id: str, expires_at: datetime | None
    ) -> asyncpg.Record:
        return await conn.fetchrow(
            "UPDATE artifacts SET retained_at = now(),"
            " expires_at = CASE WHEN expires_at IS NULL OR $3::timestamptz IS NULL THEN NULL"
            "  ELSE greatest(expires_at, $3::timestamptz) END"
            f" WHERE id = $1 AND scope = $2 RETURNING {_COLUMNS}",
            id,
            scope,
            expires_at,
        )

    async def check_artifacts(self, conn: asyncpg.Connection, *, scope: str, ids: list[str]) -> list[asyncpg.Record]:
        """One row per requested id that exists in the scope, with its position in the request."""
        return await conn.fetch(
            f"SELECT r.ord, a.* FROM unnest($2::text[]) WITH ORDINALITY AS r(id, ord)"
            f" JOIN LATERAL (SELECT {_COLUMNS} FROM artifacts WHERE id = r.id AND scope = $1) a ON true",
            scope,
            ids,
        )
