"""The SQL of drift detection: what associated publications cite, who cites a ref, the drift rows.

Kept beside repository.py (which holds everything else) so each stays a readable size.
"""

from __future__ import annotations

from typing import Any

import asyncpg

from shared.contracts.common import PageRequest
from shared.paging import Int64, Keyset

# Oldest first, as they were detected.
DRIFTS = Keyset(("seq",), (Int64,))


class DriftRepository:
    async def insert_citations(
        self, conn: asyncpg.Connection, *, scope: str, pub_id: str, pub_version: int, refs: list[dict[str, Any]]
    ) -> None:
        await conn.executemany(
            "INSERT INTO citations (scope, pub_id, pub_version, ref_kind, ref_id, ref_version)"
            " VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            [(scope, pub_id, pub_version, r["kind"], r["id"], r["version"]) for r in refs],
        )

    async def cited_by_publications(
        self, conn: asyncpg.Connection, *, scope: str, kind: str, ref_id: str
    ) -> list[asyncpg.Record]:
        """Active workspaces whose associated publications cite some version of the ref."""
        return await conn.fetch(
            "SELECT a.workspace_id, ct.pub_id, ct.pub_version, ct.ref_version FROM citations ct"
            " JOIN associations a ON a.kind = 'publication' AND a.ref_id = ct.pub_id"
            " JOIN workspaces w ON w.id = a.workspace_id AND w.scope = $1 AND w.status = 'active'"
            " WHERE ct.scope = $1 AND ct.ref_kind = $2 AND ct.ref_id = $3"
            " ORDER BY a.workspace_id, ct.pub_id, ct.pub_version",
            scope,
            kind,
            ref_id,
        )

    async def cited_by_checkpoints(
        self, conn: asyncpg.Connection, *, scope: str, kind: str, ref_id: str
    ) -> list[asyncpg.Record]:
        """Active workspaces whose current checkpoint derives from some version of the ref."""
        return await conn.fetch(
            "SELECT w.id AS workspace_id, c.derived_from FROM workspaces w"
            " JOIN checkpoint_revisions c ON c.workspace_id = w.id AND c.revision = w.checkpoint_revision"
            " WHERE w.scope = $1 AND w.status = 'active'"
            "  AND (c.derived_from->'sources' @> jsonb_build_array(jsonb_build_object('kind', $2::text, 'id', $3::text))"
            "   OR ($2 = 'publication' AND c.derived_from->'publication'->>'id' = $3))"
            " ORDER BY w.id",
            scope,
            kind,
            ref_id,
        )

    async def citing_publications(
        self, conn: asyncpg.Connection, *, scope: str, kind: str, ref_id: str
    ) -> list[asyncpg.Record]:
        """Every publication version of the scope that cites some version of the ref, whatever its workspace."""
        return await conn.fetch(
            "SELECT pub_id, pub_version, ref_version FROM citations"
            " WHERE scope = $1 AND ref_kind = $2 AND ref_id = $3 ORDER BY pub_id, pub_version, ref_version",
            scope,
            kind,
            ref_id,
        )

    async def insert_drift(
        self,
        conn: asyncpg.Connection,
        *,
        workspace_id: str,
        ref: dict[str, Any],
        cited_by: list[dict[str, Any]],
        new_version: int | None,
        reason: str,
    ) -> asyncpg.Record | None:
        """The new drift row, or None when this (ref, new version, reason) was already recorded."""
        return await conn.fetchrow(
            "INSERT INTO drifts (workspace_id, ref_kind, ref_id, ref_version, cited_by, new_version, reason)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING *",
            workspace_id,
            ref["kind"],
            ref["id"],
            ref["version"],
            cited_by,
            new_version,
            reason,
        )

    async def list_drifts(
        self, conn: asyncpg.Connection, *, workspace_id: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        return await DRIFTS.page(
            conn,
            "SELECT * FROM drifts WHERE workspace_id = $1",
            workspace_id,
            of=page,
        )
