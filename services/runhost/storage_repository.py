"""The SQL of what runs leave behind: the content store of run files (services/runhost/memory.py,
services/runhost/retention.py)."""

from __future__ import annotations

import asyncpg


class StorageRepository:
    # -- the content store -------------------------------------------------------------------------
    async def touch_content(self, conn: asyncpg.Connection, *, sha256: str, size: int) -> tuple[int, bool]:
        """The content's generation and whether its bytes are stored; a new row when there was none. Touching
        it keeps the sweeper off it for the grace period, while the writer puts the bytes and indexes them."""
        row = await conn.fetchrow(
            "INSERT INTO file_contents (sha256, size) VALUES ($1, $2)"
            " ON CONFLICT (sha256) DO UPDATE SET touched_at = now() RETURNING generation, stored",
            sha256,
            size,
        )
        return int(row["generation"]), bool(row["stored"])

    async def hold_content(self, conn: asyncpg.Connection, *, sha256: str, generation: int) -> bool:
        """Lock the content's row for the transaction that indexes a file on it (the sweeper cannot let it go
        meanwhile); false when the content was let go since the writer touched it."""
        held = await conn.fetchval(
            "UPDATE file_contents SET stored = true, touched_at = now()"
            " WHERE sha256 = $1 AND generation = $2 RETURNING 1",
            sha256,
            generation,
        )
        return held is not None

    async def lock_unreferenced(self, conn: asyncpg.Connection, *, grace_seconds: float, limit: int) -> list[str]:
        """Contents no file names, untouched for the grace period, locked until the transaction ends: a writer
        that wants one waits, and finds it gone."""
        rows = await conn.fetch(
            "SELECT sha256 FROM file_contents WHERE refs = 0 AND touched_at < now() - make_interval(secs => $1)"
            " ORDER BY touched_at LIMIT $2 FOR UPDATE SKIP LOCKED",
            grace_seconds,
            limit,
        )
        return [str(r["sha256"]) for r in rows]

    async def forget_contents(self, conn: asyncpg.Connection, *, sha256s: list[str]) -> None:
        await conn.execute("DELETE FROM file_contents WHERE sha256 = ANY($1::text[])", sha256s)
