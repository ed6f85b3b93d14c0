"""Every SQL statement of the publication service. Methods take the connection and never commit.

A repository is made for one scope (`PublicationRepository.for_scope`) and every statement it makes filters
by that scope, a version's or a claim's through its publication's row, joined in the statement itself: a
publication of another scope is as absent as a missing one. The one statement that serves many scopes at
once, the coalesced read (`PublicationRepository.read_versions`), takes the scope with each key and checks
it in the same join. The service has no sweep, so there is no unscoped access.
"""

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
VERSIONS = Keyset(("v.version",), (Int32,))
# One version of one publication in one scope: $1 the id, $2 the version, $3 the scope.
_ONE_VERSION = (
    " FROM publication_versions v JOIN publications p ON p.id = v.publication_id"
    " WHERE v.publication_id = $1 AND v.version = $2 AND p.scope = $3"
)


class PublicationRepository:
    """Makes the repository of one scope, and reads many scopes' versions in one statement."""

    def for_scope(self, scope: str) -> ScopedPublicationRepository:
        return ScopedPublicationRepository(scope)

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


class ScopedPublicationRepository:
    """The publications of one scope, their versions, the hits of its runs' searches and its claims' marks."""

    def __init__(self, scope: str):
        self.scope = scope

    async def insert_publication(
        self,
        conn: asyncpg.Connection,
        *,
        id: str,
        title: str,
        workspace_id: str | None,
        request_key: str | None,
    ) -> bool:
        """False when `request_key` was already used in this scope (nothing is inserted)."""
        inserted = await conn.fetchval(
            "INSERT INTO publications (id, scope, title, latest_version, workspace_id, request_key)"
            " VALUES ($1, $2, $3, 1, $4, $5) ON CONFLICT DO NOTHING RETURNING 1",
            id,
            self.scope,
            title,
            workspace_id,
            request_key,
        )
        return inserted is not None

    async def find_by_request_key(self, conn: asyncpg.Connection, *, request_key: str) -> str | None:
        found = await conn.fetchval(
            "SELECT id FROM publications WHERE scope = $1 AND request_key = $2", self.scope, request_key
        )
        return str(found) if found is not None else None

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
        """A version of a publication of the scope (none is inserted for another scope's)."""
        await conn.execute(
            "INSERT INTO publication_versions"
            " (publication_id, version, title, body, content_hash, sources, run_id, claims)"
            " SELECT id, $2, $3, $4, $5, $6, $7, $8 FROM publications WHERE id = $1 AND scope = $9",
            id,
            version,
            title,
            body,
            content_hash,
            sources,
            run_id,
            claims or [],
            self.scope,
        )

    async def lock_publication(self, conn: asyncpg.Connection, *, id: str) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT id, title, latest_version, workspace_id FROM publications WHERE id = $1 AND scope = $2 FOR UPDATE",
            id,
            self.scope,
        )

    async def set_latest(self, conn: asyncpg.Connection, *, id: str, version: int, title: str) -> None:
        await conn.execute(
            "UPDATE publications SET latest_version = $2, title = $3, updated_at = now() WHERE id = $1 AND scope = $4",
            id,
            version,
            title,
            self.scope,
        )

    async def get_publication(self, conn: asyncpg.Connection, *, id: str) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT id, title, latest_version FROM publications WHERE id = $1 AND scope = $2", id, self.scope
        )

    async def list_versions(
        self, conn: asyncpg.Connection, *, id: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        """A page of the publication's versions; none for another scope's publication."""
        return await VERSIONS.page(
            conn,
            "SELECT v.version, v.content_hash, v.status, v.run_id, v.created_at FROM publication_versions v"
            " JOIN publications p ON p.id = v.publication_id AND p.scope = $2 WHERE v.publication_id = $1",
            id,
            self.scope,
            of=page,
        )

    async def get_version(
        self, conn: asyncpg.Connection, *, id: str, version: int, for_update: bool = False
    ) -> asyncpg.Record | None:
        return await conn.fetchrow(
            f"SELECT {_VERSION_COLUMNS}{_ONE_VERSION}" + (" FOR UPDATE OF v" if for_update else ""),
            id,
            version,
            self.scope,
        )

    async def withdraw_version(self, conn: asyncpg.Connection, *, id: str, version: int, reason: str) -> None:
        await conn.execute(
            "UPDATE publication_versions v SET status = 'withdrawn', withdrawn_reason = $3, withdrawn_at = now()"
            " FROM publications p WHERE p.id = v.publication_id AND p.scope = $4"
            " AND v.publication_id = $1 AND v.version = $2",
            id,
            version,
            reason,
            self.scope,
        )

    async def check_versions(
        self, conn: asyncpg.Connection, *, ids: list[str], versions: list[int | None]
    ) -> list[asyncpg.Record]:
        """One row per requested (id, version) found in the scope; a null version means the latest one."""
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT r.ord, p.id, v.version, v.title, v.content_hash, v.status, v.run_id, v.created_at,"
            " v.body IS NOT NULL AND encode(sha256(convert_to(v.body, 'UTF8')), 'hex') = v.content_hash"
            " AS intact"
            " FROM unnest($2::text[], $3::int[]) WITH ORDINALITY AS r(id, version, ord)"
            " JOIN publications p ON p.id = r.id AND p.scope = $1"
            " JOIN publication_versions v ON v.publication_id = p.id"
            "  AND v.version = COALESCE(r.version, p.latest_version)",
            self.scope,
            ids,
            versions,
        )
        return rows

    async def search_workspace(
        self, conn: asyncpg.Connection, *, workspace_id: str, q: str, limit: int, offset: int = 0
    ) -> list[asyncpg.Record]:
        """The latest active versions of the workspace's publications matching any word of `q`, best first,
        after the best `offset` (the order is total, so pages neither repeat nor skip a hit). The words are
        the query's own lexemes joined by OR: a question need not match a title whole."""
        rows: list[asyncpg.Record] = await conn.fetch(
            "WITH q AS (SELECT (SELECT string_agg(quote_literal(l), ' | ')"
            "   FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, $3))) AS l)::tsquery AS query)"
            " SELECT p.id, v.version, v.title, v.created_at, v.run_id, ts_rank(v.search, q.query) AS score,"
            " ts_headline('english'::regconfig, left(v.body, 20000), q.query, 'MaxWords=30, MinWords=8')"
            " AS snippet"
            " FROM q, publications p JOIN publication_versions v"
            "  ON v.publication_id = p.id AND v.version = p.latest_version"
            " WHERE p.scope = $1 AND p.workspace_id = $2 AND v.status = 'active' AND v.search @@ q.query"
            " ORDER BY score DESC, v.created_at DESC, p.id LIMIT $4 OFFSET $5",
            self.scope,
            workspace_id,
            q,
            limit,
            offset,
        )
        return rows

    async def record_found(self, conn: asyncpg.Connection, *, run_id: str, ids: list[str], versions: list[int]) -> None:
        await conn.execute(
            "INSERT INTO run_found (run_id, scope, publication_id, version)"
            " SELECT $1, $2, f.id, f.version FROM unnest($3::text[], $4::int[]) AS f(id, version)"
            " ON CONFLICT DO NOTHING",
            run_id,
            self.scope,
            ids,
            versions,
        )

    async def was_found_by(self, conn: asyncpg.Connection, *, run_id: str, id: str, version: int) -> bool:
        row = await conn.fetchval(
            "SELECT 1 FROM run_found WHERE run_id = $1 AND scope = $2 AND publication_id = $3 AND version = $4",
            run_id,
            self.scope,
            id,
            version,
        )
        return row is not None

    async def claim_stale(
        self, conn: asyncpg.Connection, *, id: str, version: int, indexes: list[int]
    ) -> dict[int, dict[str, Any]]:
        """The change each of these claims of a version shows now (claims with none are left out)."""
        rows = await conn.fetch(
            "SELECT s.claim_index, s.stale FROM claim_stale s JOIN publications p ON p.id = s.publication_id"
            " AND p.scope = $4 WHERE s.publication_id = $1 AND s.version = $2 AND s.claim_index = ANY($3::int[])",
            id,
            version,
            indexes,
            self.scope,
        )
        return {row["claim_index"]: row["stale"] for row in rows}

    async def put_claim_stale(
        self, conn: asyncpg.Connection, *, id: str, version: int, marks: list[tuple[int, dict[str, Any]]]
    ) -> None:
        """Keep these marks of a version of a publication of the scope (none for another scope's)."""
        await conn.executemany(
            "INSERT INTO claim_stale (publication_id, version, claim_index, stale)"
            " SELECT id, $2, $3, $4 FROM publications WHERE id = $1 AND scope = $5"
            " ON CONFLICT (publication_id, version, claim_index)"
            " DO UPDATE SET stale = EXCLUDED.stale, marked_at = now()",
            [(id, version, index, stale, self.scope) for index, stale in marks],
        )
