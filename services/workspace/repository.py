"""Every SQL statement of the workspace service. Methods take the connection and never commit.

A repository is made for one scope (`WorkspaceRepository.for_scope`) and every statement it makes filters by
that scope: a workspace of another scope is as absent as a missing one. A row that hangs off a workspace
(a goal version, an association, an admission, a checkpoint revision) is joined to its workspace's row in
the statement itself, so the scope is checked by the query that reads or changes it, whatever was checked
before. The one statement that crosses scopes, the backfill's listing of what owners have yet to tell, is
on `WorkspaceMaintenance`, which only the backfill holds.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from shared.contracts.common import PageRequest
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


def workspace_of_scope(workspace: int, scope: int) -> str:
    """The condition that the workspace whose id is parameter `workspace` is of the scope in parameter
    `scope`: one look at the workspace's row, made once for the whole statement."""
    return f"EXISTS (SELECT 1 FROM workspaces WHERE id = ${workspace} AND scope = ${scope})"


class WorkspaceRepository:
    """Makes the repository of one scope; it holds no statement of its own."""

    def for_scope(self, scope: str) -> ScopedWorkspaceRepository:
        return ScopedWorkspaceRepository(scope)


class WorkspaceMaintenance:
    """What crosses scopes: the backfill's listing of the rows its owners have yet to tell about."""

    async def pending_backfill(self, conn: asyncpg.Connection, *, after: int, limit: int) -> list[asyncpg.Record]:
        """Flagged associations of every scope after `after` (a seq), each with its workspace's scope."""
        return list(
            await conn.fetch(
                "SELECT a.seq, a.workspace_id, w.scope, a.kind, a.ref_id FROM associations a"
                " JOIN workspaces w ON w.id = a.workspace_id WHERE a.backfill AND a.seq > $1 ORDER BY a.seq LIMIT $2",
                after,
                limit,
            )
        )


class ScopedWorkspaceRepository:
    """The workspaces of one scope and every row that hangs off them."""

    def __init__(self, scope: str):
        self.scope = scope

    # -- workspaces and goals ---------------------------------------------------------------------

    async def insert_workspace(self, conn: asyncpg.Connection, *, id: str, title: str) -> None:
        await conn.execute(
            "INSERT INTO workspaces (id, scope, title, status) VALUES ($1, $2, $3, 'active')", id, self.scope, title
        )

    async def insert_goal_version(
        self, conn: asyncpg.Connection, *, workspace_id: str, version: int, text: str
    ) -> None:
        await conn.execute(
            "INSERT INTO goal_versions (workspace_id, version, text)"
            " SELECT id, $3, $4 FROM workspaces WHERE id = $1 AND scope = $2",
            workspace_id,
            self.scope,
            version,
            text,
        )

    async def find_workspace(self, conn: asyncpg.Connection, *, id: str) -> asyncpg.Record | None:
        """A live (active or archived) workspace with its current goal; None for missing or deleted."""
        return await conn.fetchrow(
            f"SELECT {_WORKSPACE_COLUMNS} {_WITH_GOAL} WHERE w.id = $1 AND w.scope = $2 AND w.status <> 'deleted'",
            id,
            self.scope,
        )

    async def lock_workspace(self, conn: asyncpg.Connection, *, id: str, share: bool = False) -> asyncpg.Record | None:
        """The row in any status, tombstones included, locked until the transaction ends.

        Archive and delete take it exclusively; admissions and associations take it too, so each of them
        happens entirely before or entirely after a change of status. Exclusively is FOR NO KEY UPDATE: no
        one changes a workspace's id, so a row that only refers to it (a drift, a checkpoint revision, whose
        foreign key holds the workspace's key) neither waits for the lock nor makes it wait. A rule that
        inserts such a row and then locks the workspace (a drift asking its question) thus cannot deadlock
        with another doing the same.
        """
        return await conn.fetchrow(
            "SELECT id, status, goal_version, checkpoint_revision, archived_at FROM workspaces"
            " WHERE id = $1 AND scope = $2 " + ("FOR SHARE" if share else "FOR NO KEY UPDATE"),
            id,
            self.scope,
        )

    async def list_workspaces(
        self, conn: asyncpg.Connection, *, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        return await WORKSPACES.page(
            conn,
            f"SELECT {_WORKSPACE_COLUMNS} {_WITH_GOAL} WHERE w.scope = $1 AND w.status <> 'deleted'",
            self.scope,
            of=page,
        )

    async def set_goal_version(self, conn: asyncpg.Connection, *, id: str, version: int) -> None:
        await conn.execute(
            "UPDATE workspaces SET goal_version = $3, updated_at = now() WHERE id = $1 AND scope = $2",
            id,
            self.scope,
            version,
        )

    async def list_goal_versions(
        self, conn: asyncpg.Connection, *, id: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        return await GOALS.page(
            conn,
            "SELECT g.version, g.text, g.created_at FROM goal_versions g"
            " JOIN workspaces w ON w.id = g.workspace_id AND w.scope = $2 AND w.status <> 'deleted'"
            " WHERE g.workspace_id = $1",
            id,
            self.scope,
            of=page,
        )

    async def set_status(self, conn: asyncpg.Connection, *, id: str, status: str) -> None:
        # clock_timestamp(), not now(): the archive instant must follow every admission that got the lock first.
        await conn.execute(
            "UPDATE workspaces SET status = $3, updated_at = now(),"
            " archived_at = CASE WHEN $3 = 'archived' THEN clock_timestamp() ELSE NULL END"
            " WHERE id = $1 AND scope = $2",
            id,
            self.scope,
            status,
        )

    async def tombstone(self, conn: asyncpg.Connection, *, id: str) -> None:
        """Remove what hangs off the workspace and keep only the row that reserves its id."""
        for table in ("goal_versions", "checkpoint_revisions", "associations", "admissions", "drifts"):
            await conn.execute(
                f"DELETE FROM {table} t USING workspaces w WHERE t.workspace_id = w.id AND w.id = $1 AND w.scope = $2",
                id,
                self.scope,
            )
        await conn.execute(
            "UPDATE workspaces SET status = 'deleted', title = '', catalog_count = 0, pinned_count = 0,"
            " checkpoint_revision = 0,"
            " archived_at = NULL, deleted_at = now(), updated_at = now() WHERE id = $1 AND scope = $2",
            id,
            self.scope,
        )

    # -- associations -------------------------------------------------------------------------------

    async def insert_association(
        self,
        conn: asyncpg.Connection,
        *,
        workspace_id: str,
        kind: str,
        ref_id: str,
        version: int | None,
        run_id: str | None,
        title: str | None,
    ) -> int | None:
        """The new association's `seq`; None when it already existed (associating is idempotent)."""
        row = await conn.fetchrow(
            "INSERT INTO associations (workspace_id, kind, ref_id, version, run_id, title)"
            " SELECT id, $3, $4, $5, $6, $7 FROM workspaces WHERE id = $1 AND scope = $2"
            " ON CONFLICT DO NOTHING RETURNING seq, catalog_class",
            workspace_id,
            self.scope,
            kind,
            ref_id,
            version,
            run_id,
            title,
        )
        if row is None:
            return None
        if row["catalog_class"] is not None:
            # The counters and the mark change with the row, under the caller's lock of the workspace.
            pinned = kind == "artifact"
            await conn.execute(
                "UPDATE workspaces SET catalog_count = catalog_count + $3, pinned_count = pinned_count + $4,"
                " catalog_mark = greatest(catalog_mark, $5) WHERE id = $1 AND scope = $2",
                workspace_id,
                self.scope,
                0 if pinned else 1,
                1 if pinned else 0,
                row["seq"],
            )
        return int(row["seq"])

    async def get_association(
        self, conn: asyncpg.Connection, *, workspace_id: str, kind: str, ref_id: str
    ) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT a.workspace_id, a.kind, a.ref_id, a.version, a.run_id, a.title, a.seq, a.created_at"
            " FROM associations a JOIN workspaces w ON w.id = a.workspace_id AND w.scope = $2"
            " WHERE a.workspace_id = $1 AND a.kind = $3 AND a.ref_id = $4",
            workspace_id,
            self.scope,
            kind,
            ref_id,
        )

    async def fill_title(
        self, conn: asyncpg.Connection, *, workspace_id: str, kind: str, ref_id: str, title: str
    ) -> bool:
        """Give an association the title it was recorded without; one it has already is kept."""
        done = await conn.fetchval(
            "UPDATE associations SET title = $4 WHERE workspace_id = $1 AND kind = $2 AND ref_id = $3"
            f" AND title IS NULL AND {workspace_of_scope(1, 5)} RETURNING 1",
            workspace_id,
            kind,
            ref_id,
            title,
            self.scope,
        )
        return done is not None

    async def supersede(
        self, conn: asyncpg.Connection, *, workspace_id: str, by_seq: int, title: str | None, cited: list[str]
    ) -> int:
        """Mark the workspace's current run publications older than `by_seq` that answered `title` or are among
        `cited` as superseded, all with one new mark (from the sequence `seq` is taken from); how many."""
        mark = await conn.fetchval("SELECT nextval(pg_get_serial_sequence('associations', 'seq'))")
        marked = 0
        if title is not None:
            marked += await conn.fetchval(
                "WITH m AS (UPDATE associations SET superseded_seq = $3 WHERE workspace_id = $1 AND catalog_class = 1"
                " AND superseded_seq IS NULL AND md5(title) = md5($4) AND title = $4 AND seq < $2"
                f" AND {workspace_of_scope(1, 5)} RETURNING 1) SELECT count(*) FROM m",
                workspace_id,
                by_seq,
                mark,
                title,
                self.scope,
            )
        if cited:
            marked += await conn.fetchval(
                "WITH m AS (UPDATE associations SET superseded_seq = $3 WHERE workspace_id = $1 AND kind = 'publication'"
                " AND ref_id = ANY($4::text[]) AND catalog_class = 1 AND superseded_seq IS NULL AND seq < $2"
                f" AND {workspace_of_scope(1, 5)} RETURNING 1) SELECT count(*) FROM m",
                workspace_id,
                by_seq,
                mark,
                cited,
                self.scope,
            )
        if marked:
            await conn.execute(
                "UPDATE workspaces SET catalog_mark = greatest(catalog_mark, $2) WHERE id = $1 AND scope = $3",
                workspace_id,
                mark,
                self.scope,
            )
        return marked

    async def catalog_state(self, conn: asyncpg.Connection, *, workspace_id: str) -> asyncpg.Record | None:
        """The counters and the mark of a live workspace (None: missing, deleted or of another scope)."""
        return await conn.fetchrow(
            "SELECT catalog_count, pinned_count, catalog_mark FROM workspaces"
            " WHERE id = $1 AND scope = $2 AND status <> 'deleted'",
            workspace_id,
            self.scope,
        )

    async def catalog_part(
        self,
        conn: asyncpg.Connection,
        *,
        workspace_id: str,
        part: int,
        as_of: int,
        before: int,
        kinds: list[str],
        limit: int,
    ) -> list[asyncpg.Record]:
        """Up to `limit` items of one part of the catalog as of `as_of` (services/workspace/catalog.py), newest
        first, older than `before`: 0 the analyst's own material of `kinds`, 1 the runs' publications current
        as of then, 2 those superseded before then. Each is an index-ordered scan that stops at `limit`."""
        columns = "kind, ref_id, version, run_id, title, created_at, seq"
        # $1 the workspace, $2 the seq the items are older than, $3 the limit, $4 the kinds or the mark, $5 the scope.
        if part == 0:
            sql = (
                f"SELECT {columns} FROM associations WHERE workspace_id = $1 AND catalog_class = 0"
                f" AND kind = ANY($4::text[]) AND seq < $2 AND {workspace_of_scope(1, 5)} ORDER BY seq DESC LIMIT $3"
            )
        elif part == 1:
            # Current then: never superseded, or superseded since (a few rows, through their own index).
            sql = (
                f"SELECT {columns} FROM ("
                f" (SELECT {columns} FROM associations WHERE workspace_id = $1 AND catalog_class = 1"
                "   AND superseded_seq IS NULL AND seq < $2 ORDER BY seq DESC LIMIT $3)"
                " UNION ALL"
                f" (SELECT {columns} FROM associations WHERE workspace_id = $1 AND superseded_seq >= $4"
                "   AND catalog_class = 1 AND seq < $2 ORDER BY seq DESC LIMIT $3)"
                f") current WHERE {workspace_of_scope(1, 5)} ORDER BY seq DESC LIMIT $3"
            )
        else:
            sql = (
                f"SELECT {columns} FROM associations WHERE workspace_id = $1 AND catalog_class = 1"
                " AND superseded_seq IS NOT NULL AND superseded_seq < $4 AND seq < $2"
                f" AND {workspace_of_scope(1, 5)} ORDER BY seq DESC LIMIT $3"
            )
        rows: list[asyncpg.Record] = await conn.fetch(
            sql, workspace_id, min(before, as_of), limit, kinds if part == 0 else as_of, self.scope
        )
        return rows

    async def catalog_holds(
        self, conn: asyncpg.Connection, *, workspace_id: str, as_of: int, kind: str, ref_id: str
    ) -> bool:
        """Whether the workspace's catalog as of `as_of` holds this item."""
        held = await conn.fetchval(
            "SELECT 1 FROM associations a JOIN workspaces w ON w.id = a.workspace_id AND w.scope = $2"
            " AND w.status <> 'deleted' WHERE a.workspace_id = $1 AND a.kind = $3 AND a.ref_id = $4"
            " AND a.catalog_class IS NOT NULL AND a.seq < $5",
            workspace_id,
            self.scope,
            kind,
            ref_id,
            as_of,
        )
        return held is not None

    # -- what owners have yet to tell (services/workspace/backfill.py) ------------------------------

    async def settle_backfill(
        self,
        conn: asyncpg.Connection,
        *,
        workspace_id: str,
        kind: str,
        ref_id: str,
        title: str | None,
        report_of: str | None,
    ) -> None:
        """What the owner told: the title a row lacks, or that an artifact is the report of run `report_of`
        (then no catalog item: it leaves the counter)."""
        row = await conn.fetchrow(
            "UPDATE associations SET backfill = false, title = coalesce(title, $4),"
            " run_id = coalesce(run_id, $5) WHERE workspace_id = $1 AND kind = $2 AND ref_id = $3 AND backfill"
            f" AND {workspace_of_scope(1, 6)} RETURNING catalog_class",
            workspace_id,
            kind,
            ref_id,
            title,
            report_of,
            self.scope,
        )
        if row is not None and report_of is not None and row["catalog_class"] is None:
            await conn.execute(
                "UPDATE workspaces SET pinned_count = pinned_count - 1 WHERE id = $1 AND scope = $2",
                workspace_id,
                self.scope,
            )

    async def catalog_browse(
        self,
        conn: asyncpg.Connection,
        *,
        workspace_id: str,
        kinds: list[str],
        limit: int,
        before: int,
        title_holds: str,
    ) -> list[asyncpg.Record]:
        """Up to `limit` associations of `kinds` older than `before` (a seq), newest first, each row with how
        many such associations exist in all (`total`) and how many are newer than `before` (`newer`).
        No rows: the workspace is missing, deleted or of another scope; one row with a null kind: none left."""
        rows: list[asyncpg.Record] = await conn.fetch(
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
            self.scope,
            kinds,
            limit,
            before,
            title_holds.lower(),
        )
        return rows

    # -- admissions ---------------------------------------------------------------------------------

    async def insert_admission(self, conn: asyncpg.Connection, *, workspace_id: str, run_id: str) -> None:
        """Idempotent: a run admitted again keeps its first admission instant."""
        await conn.execute(
            "INSERT INTO admissions (workspace_id, run_id, admitted_at)"
            " SELECT id, $3, clock_timestamp() FROM workspaces WHERE id = $1 AND scope = $2"
            " ON CONFLICT DO NOTHING",
            workspace_id,
            self.scope,
            run_id,
        )

    async def find_admission(
        self, conn: asyncpg.Connection, *, workspace_id: str, run_id: str
    ) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT a.run_id, a.admitted_at FROM admissions a"
            " JOIN workspaces w ON w.id = a.workspace_id AND w.scope = $2"
            " WHERE a.workspace_id = $1 AND a.run_id = $3",
            workspace_id,
            self.scope,
            run_id,
        )

    # -- checkpoints --------------------------------------------------------------------------------

    async def latest_checkpoint(self, conn: asyncpg.Connection, *, workspace_id: str) -> asyncpg.Record | None:
        return await conn.fetchrow(
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoint_revisions c"
            " JOIN workspaces w ON w.id = c.workspace_id AND w.scope = $2 AND w.status <> 'deleted'"
            "  AND c.revision = w.checkpoint_revision"
            " WHERE c.workspace_id = $1",
            workspace_id,
            self.scope,
        )

    async def list_checkpoints(
        self, conn: asyncpg.Connection, *, workspace_id: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        return await CHECKPOINTS.page(
            conn,
            f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoint_revisions c"
            " JOIN workspaces w ON w.id = c.workspace_id AND w.scope = $2 AND w.status <> 'deleted'"
            " WHERE c.workspace_id = $1",
            workspace_id,
            self.scope,
            of=page,
        )

    async def run_revision(self, conn: asyncpg.Connection, *, workspace_id: str, run_id: str) -> int | None:
        """The checkpoint revision the run's proposal made in the workspace, if it made one."""
        revision = await conn.fetchval(
            "SELECT c.revision FROM checkpoint_revisions c"
            " JOIN workspaces w ON w.id = c.workspace_id AND w.scope = $2 AND w.status <> 'deleted'"
            " WHERE c.workspace_id = $1 AND c.author = 'model' AND c.derived_from->>'run_id' = $3",
            workspace_id,
            self.scope,
            run_id,
        )
        return None if revision is None else int(revision)

    async def insert_checkpoint(
        self,
        conn: asyncpg.Connection,
        *,
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
            self.scope,
            revision,
            summary,
            questions,
            derived_from,
            author,
        )
        await conn.execute(
            "UPDATE workspaces SET checkpoint_revision = $3 WHERE id = $1 AND scope = $2",
            workspace_id,
            self.scope,
            revision,
        )
        return row
