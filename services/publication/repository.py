"""Every SQL statement of the publication service. Methods take the connection and never commit."""

from __future__ import annotations

from typing import Any

import asyncpg

from shared.contracts.common import PageRequest
from shared.paging import Int32, Keyset

# What a read answers and checks (the version's state and hash), and no more.
_READ_COLUMNS = (
    "v.publication_id AS id, v.version, v.title, v.body, v.content_hash, v.sources, v.run_id,"
    " v.status, v.withdrawn_reason, v.created_at"
)
_VERSION_COLUMNS = _READ_COLUMNS + ", p.workspace_id, v.claims"
# A publication's versions, oldest first.
VERSIONS = Keyset(("version",), (Int32,))
# One version of one publication in one scope: $1 the id, $2 the version, $3 the scope.
_ONE_VERSION = (
    " FROM publication_versions v JOIN publications p ON p.id = v.publication_id"
    " WHERE v.publication_id = $1 AND v.version = $2 AND p.scope = $3"
)


class PublicationRepository:
    async def insert_publication(
        self,
        conn: asyncpg.Connection,
        *,
        id: str,
        scope: str,
        title: str,
        workspace_id: str | None,
        request_key: str | None,
    ) -> bool:
        """False when `request_key` was already used in this scope (nothing is inserted)."""
        inserted = await conn.fetchval(
            "INSERT INTO publications (id, scope, title, latest_version, workspace_id, request_key)"
            " VALUES ($1, $2, $3, 1, $4, $5) ON CONFLICT DO NOTHING RETURNING 1",
            id,
            scope,
            title,
            workspace_id,
            request_key,
        )
        return inserted is not None

    async def find_by_request_key(self, conn: asyncpg.Connection, *, scope: str, request_key: str) -> str | None:
        return await conn.fetchval(
            "SELECT id FROM publications WHERE scope = $1 AND request_key = $2", scope, request_key
        )

    async def insert_version(
        self,
        conn: asyncpg.Connection,
        *,
        id: str,
        version: int,
        title: str,
        body: str,
        content_hash: str,
        sources: list[dict[str, Any]],
        run_id: str | None,
        claims: list[dict[str, Any]] | None = None,
    ) -> None:
        await conn.execute(
            "INSERT INTO publication_versions"
            " (publication_id, version, title, body, content_hash, sources, run_id, claims)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            id,
            version,
            title,
            body,
            content_hash,
            sources,
            run_id,
            claims or [],
        )

    async def lock_publication(self, conn: asyncpg.Connection, *, scope: str, id: str) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT id, title, latest_version, workspace_id FROM publications WHERE id = $1 AND scope = $2 FOR UPDATE",
            id,
            scope,
        )

    async def set_latest(self, conn: asyncpg.Connection, *, id: str, version: int, title: str) -> None:
        await conn.execute(
            "UPDATE publications SET latest_version = $2, title = $3, updated_at = now() WHERE id = $1",
            id,
            version,
            title,
        )

    async def get_publication(self, conn: asyncpg.Connection, *, scope: str, id: str) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT id, title, latest_version FROM publications WHERE id = $1 AND scope = $2", id, scope
        )

    async def list_versions(
        self, conn: asyncpg.Connection, *, id: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        return await VERSIONS.page(
            conn,
            "SELECT version, content_hash, status, run_id, created_at FROM publication_versions WHERE publication_id = $1",
            id,
            of=page,
        )

    async def get_version(
        self, conn: asyncpg.Connection, *, scope: str, id: str, version: int, for_update: bool = False
    ) -> asyncpg.Record | None:
        return await conn.fetchrow(
            f"SELECT {_VERSION_COLUMNS}{_ONE_VERSION}" + (" FOR UPDATE OF v" if for_update else ""),
            id,
            version,
            scope,
        )

    async def read_versions(
        self, conn: asyncpg.Connection, keys: list[tuple[str, str, int]]
    ) -> list[asyncpg.Record | None]:
        """What a read answers, for each (scope, id, version) in order: None where no such version is in that
        scope. One statement for many concurrent reads (shared.coalesce); a lone read takes the plain point
        query, which costs less than unpacking arrays. Without the claims, which a read does not answer."""
        if len(keys) == 1:
            ((scope, id, version),) = keys
            return [await conn.fetchrow(f"SELECT {_READ_COLUMNS}{_ONE_VERSION}", id, version, scope)]
        scopes, ids, versions = (list(column) for column in zip(*keys, strict=True))
        rows = await conn.fetch(
            f"SELECT r.ord, {_READ_COLUMNS}"
            " FROM unnest($1::text[], $2::text[], $3::int[]) WITH ORDINALITY AS r(scope, id, version, ord)"
            " JOIN publications p ON p.id = r.id AND p.scope = r.scope"
            " JOIN publication_versions v ON v.publication_id = r.id AND v.version = r.version",
            scopes,
            ids,
            versions,
        )
        found: list[asyncpg.Record | None] = [None] * len(keys)
        for row in rows:
            found[row["ord"] - 1] = row
        return found

    async def withdraw_version(self, conn: asyncpg.Connection, *, id: str, version: int, reason: str) -> None:
        await conn.execute(
            "UPDATE publication_versions SET status = 'withdrawn', withdrawn_reason = $3, withdrawn_at = now()"
            " WHERE publication_id = $1 AND version = $2",
            id,
            version,
            reason,
        )

    async def check_versions(
        self, conn: asyncpg.Connection, *, scope: str, ids: list[str], versions: list[int | None]
    ) -> list[asyncpg.Record]:
        """One row per requested (id, version); a null version means the latest one."""
        return await conn.fetch(
            "SELECT r.ord, p.id, v.version, v.title, v.content_hash, v.status, v.run_id, v.created_at,"
            " v.body IS NOT NULL AND encode(sha256(convert_to(v.body, 'UTF8')), 'hex') = v.content_hash"
            " AS intact"
            " FROM unnest($2::text[], $3::int[]) WITH ORDINALITY AS r(id, version, ord)"
            " JOIN publications p ON p.id = r.id AND p.scope = $1"
            " JOIN publication_versions v ON v.publication_id = p.id"
            "  AND v.version = COALESCE(r.version, p.latest_version)",
            scope,
            ids,
            versions,
        )

    async def search_workspace(
        self, conn: asyncpg.Connection, *, scope: str, workspace_id: str, q: str, limit: int, offset: int = 0
    ) -> list[asyncpg.Record]:
        """The latest active versions of the workspace's publications matching any word of `q`, best first,
        after the best `offset` (the order is total, so pages neither repeat nor skip a hit). The words are
        the query's own lexemes joined by OR: a question need not match a title whole."""
        return await conn.fetch(
            "WITH q AS (SELECT (SELECT string_agg(quote_literal(l), ' | ')"
            "   FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, $3))) AS l)::tsquery AS query)"
            " SELECT p.id, v.version, v.title, v.created_at, v.run_id, ts_rank(v.search, q.query) AS score,"
            " ts_headline('english'::regconfig, left(v.body, 20000), q.query, 'MaxWords=30, MinWords=8')"
            " AS snippet"
            " FROM q, publications p JOIN publication_versions v"
            "  ON v.publication_id = p.id AND v.version = p.latest_version"
            " WHERE p.scope = $1 AND p.workspace_id = $2 AND v.status = 'active' AND v.search @@ q.query"
            " ORDER BY score DESC, v.created_at DESC, p.id LIMIT $4 OFFSET $5",
            scope,
            workspace_id,
            q,
            limit,
            offset,
        )

    async def record_found(
        self, conn: asyncpg.Connection, *, run_id: str, scope: str, ids: list[str], versions: list[int]
    ) -> None:
        await conn.execute(
            "INSERT INTO run_found (run_id, scope, publication_id, version)"
            " SELECT $1, $2, f.id, f.version FROM unnest($3::text[], $4::int[]) AS f(id, version)"
            " ON CONFLICT DO NOTHING",
            run_id,
            scope,
            ids,
            versions,
        )

    async def was_found_by(self, conn: asyncpg.Connection, *, run_id: str, scope: str, id: str, version: int) -> bool:
        row = await conn.fetchval(
            "SELECT 1 FROM run_found WHERE run_id = $1 AND scope = $2 AND publication_id = $3 AND version = $4",
            run_id,
            scope,
            id,
            version,
        )
        return row is not None

    async def claim_stale(
        self, conn: asyncpg.Connection, *, id: str, version: int, indexes: list[int]
    ) -> dict[int, dict[str, Any]]:
        """The change each of these claims of a version shows now (claims with none are left out)."""
        rows = await conn.fetch(
            "SELECT claim_index, stale FROM claim_stale"
            " WHERE publication_id = $1 AND version = $2 AND claim_index = ANY($3::int[])",
            id,
            version,
            indexes,
        )
        return {row["claim_index"]: row["stale"] for row in rows}

    async def put_claim_stale(
        self, conn: asyncpg.Connection, *, id: str, version: int, marks: list[tuple[int, dict[str, Any]]]
    ) -> None:
        await conn.executemany(
            "INSERT INTO claim_stale (publication_id, version, claim_index, stale) VALUES ($1, $2, $3, $4)"
            " ON CONFLICT (publication_id, version, claim_index)"
            " DO UPDATE SET stale = EXCLUDED.stale, marked_at = now()",
            [(id, version, index, stale) for index, stale in marks],
        )
