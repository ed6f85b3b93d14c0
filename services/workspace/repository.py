"""Every SQL statement of the workspace service. Methods take the connection and never commit.

Every statement filters by scope: a workspace of another scope is as absent as a missing one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from shared.contracts.common import PageRequest
from shared.contracts.workspace import CATALOG_KINDS
from shared.paging import Int32, Keyset

_WORKSPACE_COLUMNS = (
    "w.id, w.title, w.status, w.goal_version, w.checkpoint_revision, w.catalog_count, w.created_at,"
    " w.updated_at, w.archived_at, g.text AS goal_text, g.created_at AS goal_created_at"
)
_WITH_GOAL = "FROM workspaces w JOIN goal_versions g ON g.workspace_id = w.id AND g.version = w.goal_version"
_CHECKPOINT_COLUMNS = "c.revision, c.summary, c.questions, c.derived_from, c.author, c.created_at"

# The lists of this repository, newest workspace first, goals and checkpoint revisions oldest first.
WORKSPACES = Keyset(("w.created_at", "w.id"), (datetime, str), descending=True)
GOALS = Keyset(("g.version",), (Int32,))
CHECKPOINTS = Keyset(("c.revision",), (Int32,))


class WorkspaceRepository:
    # -- workspaces and goals ---------------------------------------------------------------------

    async def insert_workspace(self, conn: asyncpg.Connection, *, id: str, scope: str, title: str) -> None:
        await conn.execute(
            "INSERT INTO workspaces (id, scope, title, status) VALUES ($1, $2, $3, 'active')", id, scope, title
        )

    async def insert_goal_version(
        self, conn: asyncpg.Connection, *, scope: str, workspace_id: str, version: int, text: str
    ) -> None:
        await conn.execute(
            "INSERT INTO goal_versions (workspace_id, version, text)"
            " SELECT id, $3, $4 FROM workspaces WHERE id = $1 AND scope = $2",
            workspace_id,
            scope,
            version,
            text,
        )

    async def find_workspace(self, conn: asyncpg.Connection, *, scope: str, id: str) -> asyncpg.Record | None:
        """A live (active or archived) workspace with its current goal; None for missing or deleted."""
        return await conn.fetchrow(
            f"SELECT {_WORKSPACE_COLUMNS} {_WITH_GOAL} WHERE w.id = $1 AND w.scope = $2 AND w.status <> 'deleted'",
            id,
            scope,
        )

    async def lock_workspace(
        self, conn: asyncpg.Connection, *, scope: str, id: str, share: bool = False
    ) -> asyncpg.Record | None:
        """The row in any status, tombstones included, locked until the transaction ends.

        Archive and delete take it exclusively; admissions and associations take it too, so each of them
        happens entirely before or entirely after a change of status.
        """
        return await conn.fetchrow(
            "SELECT id, status, goal_version, checkpoint_revision, archived_at FROM workspaces"
            " WHERE id = $1 AND scope = $2 " + ("FOR SHARE" if share else "FOR UPDATE"),
            id,
            scope,
        )

    async def list_workspaces(
        self, conn: asyncpg.Connection, *, scope: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        return await WORKSPACES.page(
            conn,
            f"SELECT {_WORKSPACE_COLUMNS} {_WITH_GOAL} WHERE w.scope = $1 AND w.status <> 'deleted'",
            scope,
            of=page,
        )

    async def set_goal_version(self, conn: asyncpg.Connection, *, scope: str, id: str, version: int) -> None:
        await conn.execute(
            "UPDATE workspaces SET goal_version = $3, updated_at = now() WHERE id = $1 AND scope = $2",
            id,
            scope,
            version,
        )

    async def list_goal_versions(
        self, conn: asyncpg.Connection, *, scope: str, id: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        return await GOALS.page(
            conn,
            "SELECT g.version, g.text, g.created_at FROM goal_versions g"
            " JOIN workspaces w ON w.id = g.workspace_id AND w.scope = $2 AND w.status <> 'deleted'"
            " WHERE g.workspace_id = $1",
            id,
            scope,
            of=page,
        )

    async def set_status(self, conn: asyncpg.Connection, *, scope: str, id: str, status: str) -> None:
        # clock_timestamp(), not now(): the archive instant must follow every admission that got the lock first.
        await conn.execute(
            "UPDATE workspaces SET status = $3, updated_at = now(),"
            " archived_at = CASE WHEN $3 = 'archived' THEN clock_timestamp() ELSE NULL END"
            " WHERE id = $1 AND scope = $2",
            id,
            scope,
            status,
        )

    async def tombstone(self, conn: asyncpg.Connection, *, scope: str, id: str) -> None:
        """Remove what hangs off the workspace and keep only the row that reserves its id."""
        for table in ("goal_versions", "checkpoint_revisions", "associations", "admissions", "drifts"):
            await conn.execute(
                f"DELETE FROM {table} t USING workspaces w WHERE t.workspace_id = w.id AND w.id = $1 AND w.scope = $2",
                id,
                scope,
            )
        await conn.execute(
            "UPDATE workspaces SET status = 'deleted', title = '', catalog_count = 0, checkpoint_revision = 0,"
            " archived_at = NULL, deleted_at = now(), updated_at = now() WHERE id = $1 AND scope = $2",
            id,
            scope,
        )

    # -- associations -------------------------------------------------------------------------------

    async def insert_association(
        self,
        conn: asyncpg.Connection,
        *,
        scope: str,
        workspace_id: str,
        kind: str,
        ref_id: str,
        version: int | None,
        run_id: str | None,
        title: str | None,
    ) -> bool:
        """False when the association already existed (nothing changes: associating is idempotent)."""
        inserted = await conn.fetchval(
            "INSERT INTO associations (workspace_id, kind, ref_id, version, run_id, title)"
            " SELECT id, $3, $4, $5, $6, $7 FROM workspaces WHERE id = $1 AND scope = $2"
            " ON CONFLICT DO NOTHING RETURNING 1",
            workspace_id,
            scope,
            kind,
            ref_id,
            version,
            run_id,
            title,
        )
        if inserted is None:
            return False
        if kind in CATALOG_KINDS:
            await conn.execute(
                "UPDATE workspaces SET catalog_count = catalog_count + 1 WHERE id = $1 AND scope = $2",
                workspace_id,
                scope,
            )
        return True

    async def get_association(
        self, conn: asyncpg.Connection, *, scope: str, workspace_id: str, kind: str, ref_id: str
    ) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT a.workspace_id, a.kind, a.ref_id, a.version, a.run_id, a.created_at FROM associations a"
            " JOIN workspaces w ON w.id = a.workspace_id AND w.scope = $2"
            " WHERE a.workspace_id = $1 AND a.kind = $3 AND a.ref_id = $4",
            workspace_id,
            scope,
            kind,
            ref_id,
        )

    async def catalog_page(
        self, conn: asyncpg.Connection, *, scope: str, workspace_id: str, limit: int
    ) -> list[asyncpg.Record]:
        """The newest `limit` catalog associations and the total, in one statement (one snapshot).

        No rows: the workspace is missing, deleted or of another scope. One row with a null kind: it has
        no catalog associations yet. The page is read through `associations_catalog` and stops at
        `limit`; the total comes from the counter, so neither depends on how many associations exist.
        """
        return await conn.fetch(
            "SELECT w.catalog_count, a.kind, a.ref_id, a.version, a.run_id, a.title, a.created_at"
            " FROM workspaces w LEFT JOIN LATERAL ("
            "  SELECT kind, ref_id, version, run_id, title, created_at, seq FROM associations"
            "  WHERE workspace_id = w.id AND kind IN ('publication', 'source', 'artifact')"
            "  ORDER BY seq DESC LIMIT $3"
            " ) a ON true"
            " WHERE w.id = $1 AND w.scope = $2 AND w.status <> 'deleted'"
            " ORDER BY a.seq DESC",
            workspace_id,
            scope,
            limit,
        )

    async def catalog_for_question(
        self,
        conn: asyncpg.Connection,
        *,
        scope: str,
        workspace_id: str,
        limit: int,
        kinds: list[str],
        words: list[str],
        window: int,
    ) -> list[asyncpg.Record]:
        """A run's catalog (see `catalog.py`): per kind, the newest `window` associations ranked by how
        many of the question's words their title holds, then by recency; the kinds take turns (in the
        order of `kinds`) until `limit`. Read as `catalog_page` reads (same rows, same total), each kind
        through `associations_by_kind`, so the cost is bounded by `window` per kind."""
        return await conn.fetch(
            "SELECT w.catalog_count, a.kind, a.ref_id, a.version, a.run_id, a.title, a.created_at"
            " FROM workspaces w LEFT JOIN LATERAL ("
            "  SELECT c.*, row_number() OVER (PARTITION BY c.kind ORDER BY c.relevance DESC, c.seq DESC) AS turn"
            "  FROM unnest($3::text[]) AS k(kind) CROSS JOIN LATERAL ("
            "   SELECT kind, ref_id, version, run_id, title, created_at, seq,"
            "    (SELECT count(*) FROM unnest($4::text[]) AS q(word)"
            "     WHERE position(q.word IN lower(coalesce(title, ''))) > 0) AS relevance"
            "   FROM associations WHERE workspace_id = w.id AND kind = k.kind ORDER BY seq DESC LIMIT $5"
            "  ) c ORDER BY turn, array_position($3::text[], c.kind) LIMIT $6"
            " ) a ON true"
            " WHERE w.id = $1 AND w.scope = $2 AND w.status <> 'deleted'"
            " ORDER BY array_position($3::text[], a.kind), a.relevance DESC, a.seq DESC",
            workspace_id,
            scope,
            kinds,
            words,
            window,
            limit,
        )

    async def catalog_browse(
        self,
        conn: asyncpg.Connection,
        *,
        scope: str,
        workspace_id: str,
        kinds: list[str],
        limit: int,
        before: int,
        title_holds: str,
    ) -> list[asyncpg.Record]:
        """Up to `limit` associations of `kinds` older than `before` (a seq), newest first, each row with how
        many such associations exist in all (`total`) and how many are newer than `before` (`newer`).
        No rows: the workspace is missing, deleted or of another scope; one row with a null kind: none left."""
        return await conn.fetch(
            "SELECT t.total, t.newer, a.kind, a.ref_id, a.version, a.run_id, a.title, a.created_at, a.seq,"
            " 0 AS catalog_count FROM workspaces w"
            " CROSS JOIN LATERAL ("
            "  SELECT count(*) AS total, count(*) FILTER (WHERE seq >= $5) AS newer FROM associations"
            "  WHERE workspace_id = w.id AND kind = ANY($3::text[]) AND strpos(lower(coalesce(title, ref_id)), $6) > 0"
            " ) t LEFT JOIN LATERAL ("
            "  SELECT kind, ref_id, version, run_id, title, created_at, seq FROM associations"
            "  WHERE workspace_id = w.id AND kind = ANY($3::text[]) AND seq < $5 AND strpos(lower(coalesce(title, ref_id)), $6) > 0"
            "  ORDER BY seq DESC LIMIT $4"
            " ) a ON true"
            " WHERE w.id = $1 AND w.scope = $2 AND w.status <> 'deleted'"
            " ORDER BY a.seq DESC",
            workspace_id,
            scope,
            kinds,
            limit,
            before,
            title_holds.lower(),
        )

    # -- admissions ---------------------------------------------------------------------------------

    async def insert_admission(self, conn: asyncpg.Connection, *, scope: str, workspace_id: str, run_id: str) -> None:
        """Idempotent: a run admitted again keeps its first admission instant."""
        await conn.execute(
            "INSERT INTO admissions (workspace_id, run_id, admitted_at)"
            " SELECT id, $3, clock_timestamp() FROM workspaces WHERE id = $1 AND scope = $2"
            " ON CONFLICT DO NOTHING",
            workspace_id,
            scope,
            run_id,
        )

    async def find_admission(
        self, conn: asyncpg.Connection, *, scope: str, workspace_id: str, run_id: str
    ) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT a.run_id, a.admitted_at FROM admissions a"
            " JOIN workspaces w ON w.id = a.workspace_id AND w.scope = $2"
            " WHERE a.workspace_id = $1 AND a.run_id = $3",
            workspace_id,
            scope,
            run_id,
        )

    # -- checkpoints --------------------------------------------------------------------------------

    async def latest_checkpoint(
        self, conn: asyncpg.Connection, *, scope: str, workspace_id: str
    ) -> asyncpg.Record | None:
        return await conn.fetchrow(
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoint_revisions c"
            " JOIN workspaces w ON w.id = c.workspace_id AND w.scope = $2 AND w.status <> 'deleted'"
            "  AND c.revision = w.checkpoint_revision"
            " WHERE c.workspace_id = $1",
            workspace_id,
            scope,
        )

    async def list_checkpoints(
        self, conn: asyncpg.Connection, *, scope: str, workspace_id: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        return await CHECKPOINTS.page(
            conn,
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoint_revisions c"
            " JOIN workspaces w ON w.id = c.workspace_id AND w.scope = $2 AND w.status <> 'deleted'"
            " WHERE c.workspace_id = $1",
            workspace_id,
            scope,
            of=page,
        )

    async def insert_checkpoint(
        self,
        conn: asyncpg.Connection,
        *,
        scope: str,
        workspace_id: str,
        revision: int,
        summary: str | None,
        questions: list[dict[str, Any]],
        derived_from: dict[str, Any],
        author: str,
    ) -> asyncpg.Record:
        row = await conn.fetchrow(
            "INSERT INTO checkpoint_revisions AS c (workspace_id, revision, summary, questions, derived_from, author)"
            " SELECT id, $3, $4, $5, $6, $7 FROM workspaces WHERE id = $1 AND scope = $2"
            f" RETURNING {_CHECKPOINT_COLUMNS}",
            workspace_id,
            scope,
            revision,
            summary,
            questions,
            derived_from,
            author,
        )
        await conn.execute(
            "UPDATE workspaces SET checkpoint_revision = $3 WHERE id = $1 AND scope = $2", workspace_id, scope, revision
        )
        return row
