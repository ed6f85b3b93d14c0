"""Runhost's repository made for an actor: every query carries the actor's scope.

A run, a conversation or a request id is found only in the actor's scope, and a run's child rows (its
ledger, its files, its model-call journal, its lease epochs, a conversation's runs) are read joined to
their run in that scope, in the same statement: no read leans on an earlier check of the parent. Work
on a run by its id alone, in any scope, is `WorkerRuns`'s (services/runhost/repository.py), for whoever
holds the run's lease and for the sweepers.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any

import asyncpg

from services.runhost.admitted import AdmittedRun
from services.runhost.repository import (
    FILE_COLUMNS,
    LEDGER_COLUMNS,
    OWNED,
    file_rows,
    ledger_rows,
    numbered,
    sealed_files,
    sealed_ledger,
)
from shared.contracts.common import Actor, PageRequest
from shared.paging import Keyset

# How an actor's lists page (shared/paging.py): a workspace's runs newest first, a conversation's oldest
# first, a run's files by path. The ledger pages by a numbering of its own (`page_ledger`).
RUNS = Keyset(("created_at", "id"), (datetime, str), descending=True)
CONVERSATION_RUNS = Keyset(("created_at", "id"), (datetime, str))
FILES = Keyset(("path",), (str,))


def _run(record: asyncpg.Record | None) -> AdmittedRun | None:
    return None if record is None else AdmittedRun.of(record)


def _with_now(record: asyncpg.Record | None) -> tuple[AdmittedRun, datetime] | None:
    return None if record is None else (AdmittedRun.of(record), record["now"])


class ActorRuns:
    def __init__(self, actor: Actor):
        self.scope = actor.scope

    # -- conversations ------------------------------------------------------------------------------
    async def insert_conversation(self, conn: asyncpg.Connection, *, id: str, workspace_id: str) -> None:
        await conn.execute(
            "INSERT INTO conversations (id, scope, workspace_id) VALUES ($1, $2, $3)", id, self.scope, workspace_id
        )

    async def get_conversation(self, conn: asyncpg.Connection, *, id: str) -> asyncpg.Record | None:
        return await conn.fetchrow("SELECT * FROM conversations WHERE id = $1 AND scope = $2", id, self.scope)

    async def list_conversation_runs(
        self, conn: asyncpg.Connection, *, conversation_id: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        """Oldest first, after the (created_at, id) of the last run of the previous page."""
        return await CONVERSATION_RUNS.page(
            conn,
            "SELECT id, question, status, created_at FROM runs WHERE conversation_id = $1 AND scope = $2",
            conversation_id,
            self.scope,
            of=page,
        )

    # -- runs ---------------------------------------------------------------------------------------
    async def lock_request(self, conn: asyncpg.Connection, *, request_id: str) -> None:
        """Serialise admissions of one (scope, request_id) for the rest of the transaction."""
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"{self.scope}|{request_id}")

    async def find_by_request(self, conn: asyncpg.Connection, *, request_id: str) -> AdmittedRun | None:
        row = await conn.fetchrow("SELECT * FROM runs WHERE scope = $1 AND request_id = $2", self.scope, request_id)
        return _run(row)

    async def insert_run(self, conn: asyncpg.Connection, *, values: dict[str, Any]) -> AdmittedRun:
        """A run of the actor's scope, with the columns of `values`."""
        values = values | {"scope": self.scope}
        columns = ", ".join(values)
        params = ", ".join(f"${i}" for i in range(1, len(values) + 1))
        sql = f"INSERT INTO runs ({columns}) VALUES ({params}) RETURNING *"
        return AdmittedRun.of(await conn.fetchrow(sql, *values.values()))

    async def get_run(self, conn: asyncpg.Connection, *, id: str) -> AdmittedRun | None:
        return _run(await conn.fetchrow("SELECT * FROM runs WHERE id = $1 AND scope = $2", id, self.scope))

    async def peek_run(self, conn: asyncpg.Connection, *, id: str) -> tuple[AdmittedRun, datetime] | None:
        """The run as it is (not locked), and the database's time."""
        return _with_now(
            await conn.fetchrow("SELECT *, now() AS now FROM runs WHERE id = $1 AND scope = $2", id, self.scope)
        )

    async def lock_run(self, conn: asyncpg.Connection, *, id: str) -> tuple[AdmittedRun, datetime] | None:
        """The run, locked for the rest of the transaction, and the database's time."""
        row = await conn.fetchrow(
            "SELECT *, now() AS now FROM runs WHERE id = $1 AND scope = $2 FOR UPDATE", id, self.scope
        )
        return _with_now(row)

    async def list_runs(
        self, conn: asyncpg.Connection, *, workspace_id: str, page: PageRequest
    ) -> tuple[list[AdmittedRun], str | None]:
        """Newest first."""
        query = "SELECT * FROM runs WHERE scope = $1 AND workspace_id = $2"
        rows, next_cursor = await RUNS.page(conn, query, self.scope, workspace_id, of=page)
        return [AdmittedRun.of(r) for r in rows], next_cursor

    async def cancel_unclaimed(self, conn: asyncpg.Connection, *, id: str) -> AdmittedRun | None:
        row = await conn.fetchrow(
            "UPDATE runs SET status = 'cancelled', cancel_requested = true, finished_at = now()"
            " WHERE id = $1 AND scope = $2 AND status = 'admitted' RETURNING *",
            id,
            self.scope,
        )
        return _run(row)

    async def request_cancel(self, conn: asyncpg.Connection, *, id: str) -> AdmittedRun | None:
        row = await conn.fetchrow(
            # A run whose finish has won it (its answer is kept) is ending as completed: the cancel loses.
            "UPDATE runs SET cancel_requested = true"
            " WHERE id = $1 AND scope = $2 AND status = 'running' AND final_answer IS NULL RETURNING *",
            id,
            self.scope,
        )
        return _run(row)

    # -- a run's rows -------------------------------------------------------------------------------
    async def list_ledger(self, conn: asyncpg.Connection, *, run_id: str) -> list[dict[str, Any]]:
        """The run's ledger in id order, each row numbered (`seq`) from 1."""
        return numbered(await ledger_rows(conn, run_id, self.scope))

    async def page_ledger(
        self, conn: asyncpg.Connection, *, run_id: str, limit: int, after_id: int, after_seq: int
    ) -> list[dict[str, Any]]:
        """Rows after (id, seq) of the previous page's last row. A run's rows are appended in id order by its
        one fenced worker, so numbering on from `after_seq` gives each row the seq a full read would."""
        live = await conn.fetch(
            f"SELECT {LEDGER_COLUMNS} FROM ledger WHERE run_id = $1 AND {OWNED} AND id > $3 ORDER BY id LIMIT $4",
            run_id,
            self.scope,
            after_id,
            limit,
        )
        rows = [dict(r) for r in live]
        if not rows:
            rows = [row for row in await sealed_ledger(conn, run_id, self.scope) if row["id"] > after_id][:limit]
        return [{"seq": after_seq + i, **row} for i, row in enumerate(rows, 1)]

    async def ledger_totals(self, conn: asyncpg.Connection, *, run_id: str) -> dict[str, int]:
        rows = await conn.fetch(
            f"SELECT stage, count(*) AS n FROM ledger WHERE run_id = $1 AND {OWNED} GROUP BY stage", run_id, self.scope
        )
        if rows:
            return {r["stage"]: r["n"] for r in rows}
        return dict(Counter(row["stage"] for row in await sealed_ledger(conn, run_id, self.scope)))

    async def page_files(
        self, conn: asyncpg.Connection, *, run_id: str, page: PageRequest
    ) -> tuple[list[dict[str, Any]], str | None]:
        # The live rows first, then the document: a seal committing in between leaves a document to read.
        rows, cursor = await FILES.page(
            conn, f"SELECT {FILE_COLUMNS} FROM run_files WHERE run_id = $1 AND {OWNED}", run_id, self.scope, of=page
        )
        sealed = await sealed_files(conn, run_id, self.scope)
        if not sealed:
            return [dict(r) for r in rows], cursor
        after = FILES.after(page.cursor)
        kept = [
            row for row in await file_rows(conn, run_id, self.scope, sealed) if after is None or row["path"] > after[0]
        ]
        return FILES.cut(kept[: page.limit + 1], page.limit)

    async def journal_rows(self, conn: asyncpg.Connection, *, run_id: str, request_id: str) -> list[asyncpg.Record]:
        """The model-call journal rows of one model request, oldest first."""
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT request_id, epoch, response, result, created_at FROM model_journal"
            f" WHERE run_id = $1 AND {OWNED} AND request_id = $3 ORDER BY seq",
            run_id,
            self.scope,
            request_id,
        )
        return rows

    async def lease_epochs(self, conn: asyncpg.Connection, *, run_id: str) -> list[asyncpg.Record]:
        """Each lease epoch of an outside agent's run (its admission's, then one per take-over) and when it
        began."""
        rows: list[asyncpg.Record] = await conn.fetch(
            f"SELECT epoch, created_at FROM run_leases WHERE run_id = $1 AND {OWNED} ORDER BY epoch",
            run_id,
            self.scope,
        )
        return rows
