"""Every SQL statement of runhost. Worker writes are fenced: they apply only under the current lease epoch."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from services.runhost.admitted import AdmittedRun
from shared.contracts.common import PageRequest
from shared.paging import Keyset

# How the run host's lists page (shared/paging.py): a workspace's runs newest first, a conversation's oldest
# first, a run's files by path. The ledger pages by a numbering of its own (`page_ledger`).
RUNS = Keyset(("created_at", "id"), (datetime, str), descending=True)
CONVERSATION_RUNS = Keyset(("created_at", "id"), (datetime, str))
FILES = Keyset(("path",), (str,))
# PostgreSQL notifies idle workers on this channel when a run is admitted (they also poll).
WAKE_CHANNEL = "dossier_runs"
_FENCE = "EXISTS (SELECT 1 FROM runs WHERE id = $1 AND lease_epoch = $2 AND status = 'running')"


@dataclass(frozen=True)
class WorkDone:
    """What one step of a run adds to its counters (all under the lease fence)."""

    steps: int = 0
    chars: int = 0
    requests: int = 0
    input_chars: int = 0
    source_chars: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None


def _run(record: asyncpg.Record | None) -> AdmittedRun | None:
    return None if record is None else AdmittedRun.of(record)


class RunRepository:
    # -- conversations ------------------------------------------------------------------------------
    async def insert_conversation(self, conn: asyncpg.Connection, *, id: str, scope: str, workspace_id: str) -> None:
        await conn.execute(
            "INSERT INTO conversations (id, scope, workspace_id) VALUES ($1, $2, $3)", id, scope, workspace_id
        )

    async def get_conversation(self, conn: asyncpg.Connection, *, scope: str, id: str) -> asyncpg.Record | None:
        return await conn.fetchrow("SELECT * FROM conversations WHERE id = $1 AND scope = $2", id, scope)

    async def list_conversation_runs(
        self, conn: asyncpg.Connection, *, conversation_id: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        """Oldest first, after the (created_at, id) of the last run of the previous page."""
        return await CONVERSATION_RUNS.page(
            conn,
            "SELECT id, question, status, created_at FROM runs WHERE conversation_id = $1",
            conversation_id,
            of=page,
        )

    # -- runs ---------------------------------------------------------------------------------------
    async def lock_request(self, conn: asyncpg.Connection, *, scope: str, request_id: str) -> None:
        """Serialise admissions of one (scope, request_id) for the rest of the transaction."""
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"{scope}|{request_id}")

    async def find_by_request(self, conn: asyncpg.Connection, *, scope: str, request_id: str) -> AdmittedRun | None:
        return _run(await conn.fetchrow("SELECT * FROM runs WHERE scope = $1 AND request_id = $2", scope, request_id))

    async def insert_run(self, conn: asyncpg.Connection, *, values: dict[str, Any]) -> AdmittedRun:
        columns = ", ".join(values)
        params = ", ".join(f"${i}" for i in range(1, len(values) + 1))
        sql = f"INSERT INTO runs ({columns}) VALUES ({params}) RETURNING *"
        return AdmittedRun.of(await conn.fetchrow(sql, *values.values()))

    async def get_run(self, conn: asyncpg.Connection, *, scope: str, id: str) -> AdmittedRun | None:
        return _run(await conn.fetchrow("SELECT * FROM runs WHERE id = $1 AND scope = $2", id, scope))

    async def get_run_unscoped(self, conn: asyncpg.Connection, *, id: str) -> AdmittedRun | None:
        """Only for the worker that holds the run's lease."""
        return _run(await conn.fetchrow("SELECT * FROM runs WHERE id = $1", id))

    async def list_runs(
        self, conn: asyncpg.Connection, *, scope: str, workspace_id: str, page: PageRequest
    ) -> tuple[list[AdmittedRun], str | None]:
        """Newest first."""
        query = "SELECT * FROM runs WHERE scope = $1 AND workspace_id = $2"
        rows, next_cursor = await RUNS.page(conn, query, scope, workspace_id, of=page)
        return [AdmittedRun.of(r) for r in rows], next_cursor

    async def cancel_unclaimed(self, conn: asyncpg.Connection, *, scope: str, id: str) -> AdmittedRun | None:
        row = await conn.fetchrow(
            "UPDATE runs SET status = 'cancelled', cancel_requested = true, finished_at = now()"
            " WHERE id = $1 AND scope = $2 AND status = 'admitted' RETURNING *",
            id,
            scope,
        )
        return _run(row)

    async def request_cancel(self, conn: asyncpg.Connection, *, scope: str, id: str) -> AdmittedRun | None:
        row = await conn.fetchrow(
            # A run whose finish has won it (its answer is kept) is ending as completed: the cancel loses.
            "UPDATE runs SET cancel_requested = true"
            " WHERE id = $1 AND scope = $2 AND status = 'running' AND final_answer IS NULL RETURNING *",
            id,
            scope,
        )
        return _run(row)

    # -- leases -------------------------------------------------------------------------------------
    async def claim_run(self, conn: asyncpg.Connection, *, owner: str, lease_seconds: float) -> AdmittedRun | None:
        """Take the oldest run that is admitted, or running under an expired lease; bump the epoch."""
        row = await conn.fetchrow(
            "UPDATE runs SET lease_owner = $1, lease_epoch = lease_epoch + 1,"
            " lease_expires_at = now() + make_interval(secs => $2), status = 'running',"
            " started_at = COALESCE(started_at, now())"
            " WHERE id = (SELECT id FROM runs WHERE status IN ('admitted', 'running') AND driver = 'dossier'"
            "   AND (lease_expires_at IS NULL OR lease_expires_at < now())"
            "   ORDER BY created_at FOR UPDATE SKIP LOCKED LIMIT 1)"
            " RETURNING *",
            owner,
            lease_seconds,
        )
        return _run(row)

    async def release_leases(self, conn: asyncpg.Connection, *, owner: str) -> None:
        await conn.execute(
            "UPDATE runs SET lease_expires_at = now() WHERE lease_owner = $1 AND status = 'running'", owner
        )

    async def heartbeat(self, conn: asyncpg.Connection, *, run_id: str, epoch: int, lease_seconds: float) -> bool:
        row = await conn.fetchval(
            "UPDATE runs SET lease_expires_at = now() + make_interval(secs => $3)"
            " WHERE id = $1 AND lease_epoch = $2 AND status = 'running' RETURNING cancel_requested",
            run_id,
            epoch,
            lease_seconds,
        )
        return row is not None

    async def fenced_update(
        self, conn: asyncpg.Connection, *, run_id: str, epoch: int, values: dict[str, Any], also: str = ""
    ) -> bool:
        sets = ", ".join(f"{column} = ${i}" for i, column in enumerate(values, start=3))
        done = await conn.fetchval(
            f"UPDATE runs SET {sets} WHERE id = $1 AND lease_epoch = $2 AND status = 'running'{also} RETURNING 1",
            run_id,
            epoch,
            *values.values(),
        )
        return done is not None

    async def claim_end(self, conn: asyncpg.Connection, *, run_id: str, epoch: int, values: dict[str, Any]) -> bool:
        """The run's end, won by a finish: the answer is kept (`values`) only under this epoch, while the run is
        running, no finish has won it yet and no cancel was asked for. The row stays locked until the caller's
        transaction ends, so a cancel or a take-over waits for it and then finds the run won."""
        also = " AND final_answer IS NULL AND NOT cancel_requested"
        return await self.fenced_update(conn, run_id=run_id, epoch=epoch, values=values, also=also)

    async def holds_lease(self, conn: asyncpg.Connection, *, run_id: str, epoch: int) -> bool:
        return bool(
            await conn.fetchval(
                "SELECT 1 FROM runs WHERE id = $1 AND lease_epoch = $2 AND status = 'running'", run_id, epoch
            )
        )

    async def cancel_state(self, conn: asyncpg.Connection, *, run_id: str, epoch: int) -> bool | None:
        """Whether a cancel was asked for; None once the lease is no longer this epoch's (a read, no write)."""
        value = await conn.fetchval(
            "SELECT cancel_requested FROM runs WHERE id = $1 AND lease_epoch = $2 AND status = 'running'",
            run_id,
            epoch,
        )
        return None if value is None else bool(value)

    async def add_counters(
        self, conn: asyncpg.Connection, *, run_id: str, epoch: int, work: WorkDone
    ) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "UPDATE runs SET steps = steps + $3, chars_read = chars_read + $4, model_requests = model_requests + $5,"
            " model_input_chars_max = greatest(model_input_chars_max, $6),"
            " model_input_chars_total = model_input_chars_total + $6,"
            " source_chars_read = source_chars_read + $7,"
            " tokens_in = CASE WHEN $8::bigint IS NULL THEN tokens_in ELSE coalesce(tokens_in, 0) + $8 END,"
            " tokens_out = CASE WHEN $9::bigint IS NULL THEN tokens_out ELSE coalesce(tokens_out, 0) + $9 END"
            " WHERE id = $1 AND lease_epoch = $2 AND status = 'running'"
            " RETURNING steps, chars_read, model_requests, cancel_requested",
            run_id,
            epoch,
            work.steps,
            work.chars,
            work.requests,
            work.input_chars,
            work.source_chars,
            work.tokens_in,
            work.tokens_out,
        )

    async def count_by_status(self, conn: asyncpg.Connection) -> dict[str, int]:
        rows = await conn.fetch("SELECT status, count(*) AS n FROM runs GROUP BY status")
        return {r["status"]: r["n"] for r in rows}

    async def pending_associations(self, conn: asyncpg.Connection, *, limit: int) -> list[AdmittedRun]:
        rows = await conn.fetch(
            "SELECT * FROM runs WHERE status = 'completed' AND workspace_association = 'pending'"
            " AND publication_id IS NOT NULL ORDER BY finished_at LIMIT $1",
            limit,
        )
        return [AdmittedRun.of(r) for r in rows]

    async def set_association(self, conn: asyncpg.Connection, *, run_id: str, association: str) -> None:
        await conn.execute(
            "UPDATE runs SET workspace_association = $2 WHERE id = $1 AND workspace_association = 'pending'",
            run_id,
            association,
        )

    # -- ledger -------------------------------------------------------------------------------------
    async def append_ledger(
        self,
        conn: asyncpg.Connection,
        *,
        run_id: str,
        epoch: int,
        stage: str,
        ref: dict[str, Any],
        content_hash: str | None = None,
        locator: str | None = None,
        reason: str | None = None,
        model_request: str | None = None,
    ) -> bool:
        """One row under the fence: false when the lease is not this epoch's. A row the run already has (the
        same stage, ref and locator: a concurrent call under the same lease) is kept as it was, but for the
        model request that carried it, filled in if it had none (an answer citing a version whose read was
        refused before is that refusal's row, now tied to the answer)."""
        held: bool = await conn.fetchval(
            "WITH held AS (SELECT 1 FROM runs WHERE id = $1 AND lease_epoch = $2 AND status = 'running'),"
            " added AS (INSERT INTO ledger (run_id, epoch, stage, ref, content_hash, locator, reason, model_request)"
            "   SELECT $1, $2, $3, $4, $5, $6, $7, $8 FROM held"
            "   ON CONFLICT (run_id, stage, ref, locator) WHERE ref IS NOT NULL DO UPDATE"
            "   SET model_request = EXCLUDED.model_request"
            "   WHERE ledger.model_request IS NULL AND EXCLUDED.model_request IS NOT NULL)"
            " SELECT EXISTS (SELECT 1 FROM held)",
            run_id,
            epoch,
            stage,
            ref,
            content_hash,
            locator,
            reason,
            model_request,
        )
        return held

    async def list_ledger(self, conn: asyncpg.Connection, *, run_id: str) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT row_number() OVER (ORDER BY id) AS seq, stage, ref, content_hash, locator, reason,"
            " model_request, at FROM ledger WHERE run_id = $1 ORDER BY id",
            run_id,
        )
        return rows

    async def page_ledger(
        self, conn: asyncpg.Connection, *, run_id: str, limit: int, after_id: int, after_seq: int
    ) -> list[asyncpg.Record]:
        """Rows after (id, seq) of the previous page's last row. A run's rows are appended in id order by its
        one fenced worker, so numbering on from `after_seq` gives each row the seq a full read would."""
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT id, $3 + row_number() OVER (ORDER BY id) AS seq, stage, ref, content_hash, locator, reason,"
            " model_request, at FROM ledger WHERE run_id = $1 AND id > $2 ORDER BY id LIMIT $4",
            run_id,
            after_id,
            after_seq,
            limit,
        )
        return rows

    async def ledger_totals(self, conn: asyncpg.Connection, *, run_id: str) -> dict[str, int]:
        rows = await conn.fetch("SELECT stage, count(*) AS n FROM ledger WHERE run_id = $1 GROUP BY stage", run_id)
        return {r["stage"]: r["n"] for r in rows}

    async def included_refs(self, conn: asyncpg.Connection, *, run_id: str) -> list[asyncpg.Record]:
        """The consumed materials: distinct refs with an `included` row, in first-inclusion order, but for
        those with an `unavailable` row (withdrawn or retired while the run held them)."""
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT ref FROM (SELECT DISTINCT ON (ref) ref, id FROM ledger"
            " WHERE run_id = $1 AND stage = 'included' AND ref NOT IN"
            " (SELECT ref FROM ledger WHERE run_id = $1 AND stage = 'unavailable' AND ref IS NOT NULL)"
            " ORDER BY ref, id) AS firsts ORDER BY id",
            run_id,
        )
        return rows

    # -- files --------------------------------------------------------------------------------------
    async def upsert_file(
        self,
        conn: asyncpg.Connection,
        *,
        run_id: str,
        path: str,
        size: int,
        sha256: str,
        epoch: int | None,
        provenance: dict[str, Any] | None = None,
    ) -> bool:
        """Record a working file (its bytes are at its content key). With an epoch the write is fenced; a
        person's plan edit has none."""
        fence = f" WHERE {_FENCE}" if epoch is not None else " WHERE $2::int IS NULL"
        prov = provenance or {}
        done = await conn.fetchval(
            "INSERT INTO run_files (run_id, path, size, sha256, ref, content_hash, locator, by_content)"
            " SELECT $1, $3, $4, $5, $6, $7, $8, true" + fence + " ON CONFLICT (run_id, path)"
            " DO UPDATE SET size = EXCLUDED.size, sha256 = EXCLUDED.sha256, ref = EXCLUDED.ref,"
            " content_hash = EXCLUDED.content_hash, locator = EXCLUDED.locator, by_content = true,"
            " updated_at = now() RETURNING 1",
            run_id,
            epoch,
            path,
            size,
            sha256,
            prov.get("ref"),
            prov.get("content_hash"),
            prov.get("locator"),
        )
        return done is not None

    async def list_files(self, conn: asyncpg.Connection, *, run_id: str) -> list[asyncpg.Record]:
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT path, size, ref, content_hash, locator FROM run_files WHERE run_id = $1 ORDER BY path", run_id
        )
        return rows

    async def page_files(
        self, conn: asyncpg.Connection, *, run_id: str, page: PageRequest
    ) -> tuple[list[asyncpg.Record], str | None]:
        return await FILES.page(
            conn,
            "SELECT path, size FROM run_files WHERE run_id = $1",
            run_id,
            of=page,
        )

    async def get_file(self, conn: asyncpg.Connection, *, run_id: str, path: str) -> asyncpg.Record | None:
        return await conn.fetchrow(
            "SELECT path, size, sha256, ref, content_hash, locator, by_content FROM run_files"
            " WHERE run_id = $1 AND path = $2",
            run_id,
            path,
        )
