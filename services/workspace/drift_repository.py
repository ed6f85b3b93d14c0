"""The SQL of drift detection: what associated publications cite, who cites a ref, the drift rows.

Kept beside repository.py (which holds everything else) so each stays a readable size. As there, a
repository is made for one scope (`DriftRepository.for_scope`) and every statement filters by it: the
citations by their own scope, a drift row through its workspace's row, joined in the statement itself.
Drift is detected on events, each of which carries its scope, so nothing here crosses scopes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

import asyncpg

from services.workspace.repository import workspace_of_scope
from shared.contracts.common import PageRequest, Ref
from shared.contracts.workspace import DriftReason
from shared.paging import Int64, Keyset

# Oldest first, as they were detected.
DRIFTS = Keyset(("d.seq",), (Int64,))
# The first key of the advisory locks that order a ref's change with the recording of citations of it.
_REF_LOCKS = 7_351_101


class DriftRepository:
    """Makes the drift repository of one scope; it holds no statement of its own."""

    def for_scope(self, scope: str) -> ScopedDriftRepository:
        return ScopedDriftRepository(scope)


class ScopedDriftRepository:
    """The citations, drift rows and drift questions of one scope's workspaces."""

    def __init__(self, scope: str):
        self.scope = scope

    async def insert_citations(
        self,
        conn: asyncpg.Connection,
        *,
        pub_id: str,
        pub_version: int,
        pub_title: str,
        refs: list[dict[str, Any]],
    ) -> None:
        await conn.executemany(
            "INSERT INTO citations (scope, pub_id, pub_version, ref_kind, ref_id, ref_version, pub_title)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING",
            [(self.scope, pub_id, pub_version, r["kind"], r["id"], r["version"], pub_title) for r in refs],
        )

    async def lock_refs(self, conn: asyncpg.Connection, refs: list[tuple[str, str]]) -> None:
        """Hold these (kind, id) refs until the transaction ends, in one order (no two handlers wait on each
        other): a change of a ref and the recording of a citation of it never run side by side, so the one
        that comes second always sees the other."""
        keys = sorted({f"{self.scope}\x01{kind}\x01{ref_id}" for kind, ref_id in refs})
        # One statement; unnest gives the keys in the array's order, and each lock is taken as its row is.
        await conn.execute(
            "SELECT pg_advisory_xact_lock($1, hashtext(k)) FROM unnest($2::text[]) AS k", _REF_LOCKS, keys
        )

    async def record_change(
        self, conn: asyncpg.Connection, *, kind: str, ref_id: str, reason: DriftReason, version: int, at: datetime
    ) -> None:
        await conn.execute(
            "INSERT INTO ref_changes (scope, ref_kind, ref_id, reason, version, at) VALUES ($1, $2, $3, $4, $5, $6)"
            " ON CONFLICT DO NOTHING",
            self.scope,
            kind,
            ref_id,
            reason,
            version,
            at,
        )

    async def changes_since(
        self, conn: asyncpg.Connection, *, refs: list[Ref], cited_at: datetime
    ) -> list[tuple[Ref, DriftReason, int | None]]:
        """For each cited ref (with its version), in their order, the changes made after `cited_at` that concern
        that version, as (ref, reason, new version): the newest later version, its withdrawal, the ref's
        retirement. One statement for all of them."""
        rows = await conn.fetch(
            "SELECT r.n, c.reason, max(c.version) AS version"
            " FROM unnest($2::text[], $3::text[], $4::int[]) WITH ORDINALITY AS r(kind, id, version, n)"
            " JOIN ref_changes c ON c.scope = $1 AND c.ref_kind = r.kind AND c.ref_id = r.id AND c.at > $5"
            "  AND ((c.reason = 'new_version' AND c.version > r.version)"
            "   OR (c.reason = 'withdrawn' AND c.version = r.version) OR c.reason = 'retired')"
            " GROUP BY r.n, c.reason ORDER BY r.n, c.reason",
            self.scope,
            [r.kind for r in refs],
            [r.id for r in refs],
            [r.version for r in refs],
            cited_at,
        )
        # The reasons are those `record_change` was given, each a DriftReason.
        return [
            (refs[r["n"] - 1], cast(DriftReason, r["reason"]), r["version"] if r["reason"] == "new_version" else None)
            for r in rows
        ]

    async def cited_by_publications(self, conn: asyncpg.Connection, *, kind: str, ref_id: str) -> list[asyncpg.Record]:
        """Active workspaces whose associated publications cite some version of the ref."""
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT a.workspace_id, ct.pub_id, ct.pub_version, ct.ref_version FROM citations ct"
            " JOIN associations a ON a.kind = 'publication' AND a.ref_id = ct.pub_id"
            " JOIN workspaces w ON w.id = a.workspace_id AND w.scope = $1 AND w.status = 'active'"
            " WHERE ct.scope = $1 AND ct.ref_kind = $2 AND ct.ref_id = $3"
            " ORDER BY a.workspace_id, ct.pub_id, ct.pub_version",
            self.scope,
            kind,
            ref_id,
        )
        return rows

    async def cited_by_checkpoints(self, conn: asyncpg.Connection, *, kind: str, ref_id: str) -> list[asyncpg.Record]:
        """Active workspaces whose current checkpoint derives from some version of the ref."""
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT w.id AS workspace_id, c.derived_from FROM workspaces w"
            " JOIN checkpoint_revisions c ON c.workspace_id = w.id AND c.revision = w.checkpoint_revision"
            " WHERE w.scope = $1 AND w.status = 'active'"
            "  AND (c.derived_from->'sources' @> jsonb_build_array(jsonb_build_object('kind', $2::text, 'id', $3::text))"
            "   OR ($2 = 'publication' AND c.derived_from->'publication'->>'id' = $3))"
            " ORDER BY w.id",
            self.scope,
            kind,
            ref_id,
        )
        return rows

    async def citing_publications(self, conn: asyncpg.Connection, *, kind: str, ref_id: str) -> list[asyncpg.Record]:
        """Every publication version of the scope that cites some version of the ref, whatever its workspace."""
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT pub_id, pub_version, ref_version FROM citations"
            " WHERE scope = $1 AND ref_kind = $2 AND ref_id = $3 ORDER BY pub_id, pub_version, ref_version",
            self.scope,
            kind,
            ref_id,
        )
        return rows

    async def titles(
        self, conn: asyncpg.Connection, *, workspace_id: str, refs: list[tuple[str, str]]
    ) -> dict[tuple[str, str], str]:
        """The titles known for these (kind, id) refs (those with none left out): the workspace's association's,
        else, for a publication, the one its citing version was announced with."""
        rows = await conn.fetch(
            "SELECT r.kind, r.ref_id, coalesce(a.title, ("
            "  SELECT ct.pub_title FROM citations ct WHERE r.kind = 'publication' AND ct.scope = $1"
            "   AND ct.pub_id = r.ref_id AND ct.pub_title IS NOT NULL ORDER BY ct.pub_version DESC LIMIT 1"
            " )) AS title"
            " FROM unnest($3::text[], $4::text[]) AS r(kind, ref_id)"
            " LEFT JOIN associations a ON a.workspace_id = $2 AND a.kind = r.kind AND a.ref_id = r.ref_id"
            f"  AND {workspace_of_scope(2, 1)}",
            self.scope,
            workspace_id,
            [kind for kind, _ in refs],
            [ref_id for _, ref_id in refs],
        )
        return {(row["kind"], row["ref_id"]): row["title"] for row in rows if row["title"]}

    async def set_question(self, conn: asyncpg.Connection, *, seq: int, question_id: str) -> None:
        await conn.execute(
            "UPDATE drifts d SET question_id = $2 FROM workspaces w WHERE d.seq = $1"
            " AND w.id = d.workspace_id AND w.scope = $3",
            seq,
            question_id,
            self.scope,
        )

    async def drift_questions(self, conn: asyncpg.Connection, *, workspace_id: str) -> dict[str, Ref]:
        """Each new-version drift's question, by id: the new version that answers it once a run reads it."""
        rows = await conn.fetch(
            "SELECT question_id, ref_kind, ref_id, new_version FROM drifts"
            f" WHERE workspace_id = $1 AND question_id IS NOT NULL AND reason = 'new_version' AND {workspace_of_scope(1, 2)}",
            workspace_id,
            self.scope,
        )
        return {
            row["question_id"]: Ref(kind=row["ref_kind"], id=row["ref_id"], version=row["new_version"]) for row in rows
        }

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
        """The new drift row, or None when this (ref, new version, reason) was already recorded (or the
        workspace is not of the scope)."""
        return await conn.fetchrow(
            "INSERT INTO drifts (workspace_id, ref_kind, ref_id, ref_version, cited_by, new_version, reason)"
            " SELECT id, $2, $3, $4, $5, $6, $7 FROM workspaces WHERE id = $1 AND scope = $8"
            " ON CONFLICT DO NOTHING RETURNING *",
            workspace_id,
            ref["kind"],
            ref["id"],
            ref["version"],
            cited_by,
            new_version,
            reason,
            self.scope,
        )

    async def list_drifts(
        self, conn: asyncpg.Connection, *, workspace_id: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        return await DRIFTS.page(
            conn,
            "SELECT d.* FROM drifts d JOIN workspaces w ON w.id = d.workspace_id AND w.scope = $2"
            " WHERE d.workspace_id = $1",
            workspace_id,
            self.scope,
            of=page,
        )
