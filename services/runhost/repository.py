"""The SQL of a run by its id alone (`WorkerRuns`): its lease, counters, ledger and files, for whoever holds the
lease and for the sweepers. Writes under a lease are fenced: they apply only under the current lease epoch.
An actor's queries are `ActorRuns`'s (services/runhost/actor_runs.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import asyncpg

from services.runhost.admitted import AdmittedRun
from services.runhost.sealed import ref_key, unpack
from shared.paging import Keyset

# How the run host's lists page (shared/paging.py): a workspace's runs newest first, a conversation's oldest
# first, a run's files by path. The ledger pages by a numbering of its own (`page_ledger`).
RUNS = Keyset(("created_at", "id"), (datetime, str), descending=True)
CONVERSATION_RUNS = Keyset(("created_at", "id"), (datetime, str))
FILES = Keyset(("path",), (str,))
# PostgreSQL notifies idle workers on this channel when a run is admitted (they also poll).
WAKE_CHANNEL = "dossier_runs"
# The lease held: the run ($1) is running under this epoch ($2). Every worker write is fenced by it.
HELD = "id = $1 AND lease_epoch = $2 AND status = 'running'"
LEASED = f"SELECT 1 FROM runs WHERE {HELD}"
FENCE = f"EXISTS ({LEASED})"
# The columns of a ledger row and of a file-index row, live or sealed (services/runhost/sealed.py).
LEDGER_COLUMNS = "id, stage, ref, content_hash, locator, reason, model_request, at"
FILE_COLUMNS = "path, size, sha256, ref, content_hash, locator, by_content"

_FILE_FIELDS = FILE_COLUMNS.split(", ")
# One row: the live file's columns, or (when it has no live row) the run's sealed file index, if any.
_FILE_OR_SEALED = (
    f"SELECT {', '.join(f'f.{name}' for name in _FILE_FIELDS)},"
    " CASE WHEN f.path IS NULL THEN (SELECT files FROM run_files_sealed WHERE run_id = $1) END AS sealed"
    " FROM (SELECT 1) AS one LEFT JOIN run_files AS f ON f.run_id = $1 AND f.path = $2"
)

# The end of a fenced ledger insert (after a CTE `held`, the fence): a row the run has already is kept as
# it was, but for the model request that carried it, filled in if it had none; says whether the fence held.
_ONCE_WITH_ITS_REQUEST = (
    "   ON CONFLICT (run_id, ledger_key(stage, ref, locator)) WHERE ref IS NOT NULL DO UPDATE"
    "   SET model_request = EXCLUDED.model_request"
    "   WHERE ledger.model_request IS NULL AND EXCLUDED.model_request IS NOT NULL)"
    " SELECT EXISTS (SELECT 1 FROM held)"
)


# What indexing a run's file came to (`WorkerRuns.index_file`).
FileIndexed = Literal["indexed", "let go", "fenced"]


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


class WorkerRuns:
    """A run by its id alone, in any scope: for the worker or the outside agent's session that holds its lease
    (every write fenced by the lease epoch) and for the sweepers. What an actor asks for goes through
    `ActorRuns` (services/runhost/actor_runs.py), which carries the actor's scope into every query."""

    # -- runs ---------------------------------------------------------------------------------------
    async def get_run(self, conn: asyncpg.Connection, *, id: str) -> AdmittedRun | None:
        """The run, whatever its scope: for whoever holds its lease or sweeps it."""
        return _run(await conn.fetchrow("SELECT * FROM runs WHERE id = $1", id))

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

    async def release_lease(self, conn: asyncpg.Connection, *, run_id: str, epoch: int) -> None:
        """The run free to be taken up again at once, unless a newer attempt holds it already."""
        await conn.execute(
            f"UPDATE runs SET lease_expires_at = now() WHERE {HELD} AND lease_expires_at > now()",
            run_id,
            epoch,
        )

    async def heartbeat(self, conn: asyncpg.Connection, *, run_id: str, epoch: int, lease_seconds: float) -> bool:
        row = await conn.fetchval(
            "UPDATE runs SET lease_expires_at = now() + make_interval(secs => $3)"
            f" WHERE {HELD} RETURNING cancel_requested",
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
            f"UPDATE runs SET {sets} WHERE {HELD}{also} RETURNING 1",
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
        return bool(await conn.fetchval(LEASED, run_id, epoch))

    async def cancel_state(self, conn: asyncpg.Connection, *, run_id: str, epoch: int) -> bool | None:
        """Whether a cancel was asked for; None once the lease is no longer this epoch's (a read, no write)."""
        value = await conn.fetchval(
            f"SELECT cancel_requested FROM runs WHERE {HELD}",
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
            f" WHERE {HELD}"
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
            f"WITH held AS ({LEASED}),"
            " added AS (INSERT INTO ledger (run_id, epoch, stage, ref, content_hash, locator, reason, model_request)"
            "   SELECT $1, $2, $3, $4, $5, $6, $7, $8 FROM held" + _ONCE_WITH_ITS_REQUEST,
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

    async def append_included(
        self,
        conn: asyncpg.Connection,
        *,
        run_id: str,
        epoch: int,
        rows: list[tuple[dict[str, Any], str | None, str | None]],
        model_request: str,
    ) -> bool:
        """`included` rows (ref, content hash, locator) for one model request, in their order, under the fence
        (false when the lease is not this epoch's), each as `append_ledger` keeps it. The rows must differ in
        ref or locator: one statement cannot update a row twice."""
        held: bool = await conn.fetchval(
            f"WITH held AS ({LEASED}),"
            " added AS (INSERT INTO ledger (run_id, epoch, stage, ref, content_hash, locator, model_request)"
            "   SELECT $1, $2, 'included', i.ref, i.content_hash, i.locator, $6"
            "   FROM held, unnest($3::jsonb[], $4::text[], $5::text[]) WITH ORDINALITY AS i(ref, content_hash, locator, n)"
            "   ORDER BY i.n" + _ONCE_WITH_ITS_REQUEST,
            run_id,
            epoch,
            [ref for ref, _, _ in rows],
            [content_hash for _, content_hash, _ in rows],
            [locator for _, _, locator in rows],
            model_request,
        )
        return held

    async def append_listed(
        self,
        conn: asyncpg.Connection,
        *,
        run_id: str,
        epoch: int,
        refs: list[dict[str, Any]],
        locators: list[str | None],
    ) -> bool:
        """`listed` rows for what one listing showed, in its order, under the fence (false when the lease is
        not this epoch's); a row the run already has is kept as it was."""
        held: bool = await conn.fetchval(
            f"WITH held AS ({LEASED}),"
            " added AS (INSERT INTO ledger (run_id, epoch, stage, ref, locator)"
            "   SELECT $1, $2, 'listed', l.ref, l.locator"
            "   FROM held, unnest($3::jsonb[], $4::text[]) WITH ORDINALITY AS l(ref, locator, n) ORDER BY l.n"
            "   ON CONFLICT (run_id, ledger_key(stage, ref, locator)) WHERE ref IS NOT NULL DO NOTHING)"
            " SELECT EXISTS (SELECT 1 FROM held)",
            run_id,
            epoch,
            refs,
            locators,
        )
        return held

    async def list_ledger(self, conn: asyncpg.Connection, *, run_id: str) -> list[dict[str, Any]]:
        """The run's ledger in id order, each row numbered (`seq`) from 1."""
        return numbered(await ledger_rows(conn, run_id, None))

    async def included_refs(self, conn: asyncpg.Connection, *, run_id: str) -> list[dict[str, Any]]:
        """The consumed materials: distinct refs with an `included` row, in first-inclusion order, but for
        those with an `unavailable` row (withdrawn or retired while the run held them)."""
        rows = await ledger_rows(conn, run_id, None)
        withheld = {ref_key(r["ref"]) for r in rows if r["stage"] == "unavailable" and r["ref"] is not None}
        seen: set[str] = set()
        included: list[dict[str, Any]] = []
        for row in rows:
            key = ref_key(row["ref"])
            if row["stage"] == "included" and row["ref"] is not None and key not in withheld | seen:
                seen.add(key)
                included.append({"ref": row["ref"]})
        return included

    # -- files --------------------------------------------------------------------------------------
    async def index_file(
        self,
        conn: asyncpg.Connection,
        *,
        run_id: str,
        path: str,
        size: int,
        sha256: str,
        generation: int,
        epoch: int | None,
        provenance: dict[str, Any] | None = None,
    ) -> FileIndexed:
        """Record a working file on its content (bytes stored at its content key), in one statement: the
        content's row is held (locked, marked stored and touched) only if it is still at the `generation`
        the writer touched, and the file's row is written only then. With an epoch the write is fenced; a
        person's plan edit has none. "let go": the content was let go since it was touched (nothing is
        written); "fenced": the lease is not this epoch's."""
        fence = f" AND {FENCE}" if epoch is not None else " AND $2::int IS NULL"
        prov = provenance or {}
        row = await conn.fetchrow(
            "WITH held AS (UPDATE file_contents SET stored = true, touched_at = now()"
            "   WHERE sha256 = $5 AND generation = $9 RETURNING 1),"
            " put AS (INSERT INTO run_files (run_id, path, size, sha256, ref, content_hash, locator, by_content)"
            "   SELECT $1, $3, $4, $5, $6, $7, $8, true WHERE EXISTS (SELECT 1 FROM held)" + fence + ""
            "   ON CONFLICT (run_id, path) DO UPDATE SET size = EXCLUDED.size, sha256 = EXCLUDED.sha256,"
            "   ref = EXCLUDED.ref, content_hash = EXCLUDED.content_hash, locator = EXCLUDED.locator,"
            "   by_content = true, updated_at = now() RETURNING 1)"
            " SELECT EXISTS (SELECT 1 FROM held) AS held, EXISTS (SELECT 1 FROM put) AS put",
            run_id,
            epoch,
            path,
            size,
            sha256,
            prov.get("ref"),
            prov.get("content_hash"),
            prov.get("locator"),
            generation,
        )
        return "indexed" if row["put"] else "fenced" if row["held"] else "let go"

    async def list_files(self, conn: asyncpg.Connection, *, run_id: str) -> list[dict[str, Any]]:
        return await file_rows(conn, run_id, None)

    async def get_file(self, conn: asyncpg.Connection, *, run_id: str, path: str) -> Mapping[str, Any] | None:
        """A live row first (one written after the seal is the file), then the sealed entry: one statement,
        so one snapshot, and one round trip for a file not written yet (most of a running run's misses)."""
        row = await conn.fetchrow(_FILE_OR_SEALED, run_id, path)
        if row["path"] is not None:
            return {name: row[name] for name in _FILE_FIELDS}
        if row["sealed"] is None:
            return None
        return _by_path(row["sealed"]).get(path)


# -- a run's child rows, read for whoever holds its lease or sweeps it (`scope` None) or for an actor ----------
# An actor reads a run's rows only where the run is in its scope: each read joins them to their run.
OWNED = "EXISTS (SELECT 1 FROM runs WHERE runs.id = $1 AND ($2::text IS NULL OR runs.scope = $2))"


def numbered(rows: list[dict[str, Any]], after_seq: int = 0) -> list[dict[str, Any]]:
    """Ledger rows numbered (`seq`) on from `after_seq`, without their ids."""
    return [{"seq": seq, **{k: v for k, v in row.items() if k != "id"}} for seq, row in enumerate(rows, after_seq + 1)]


async def ledger_rows(conn: asyncpg.Connection, run_id: str, scope: str | None) -> list[dict[str, Any]]:
    """The run's rows in id order, live or sealed (services/runhost/storage_repository.py `seal_ledger`).
    The live rows are read first: a seal committing after that read leaves them whole, one committed
    before it leaves none, and then the document holds them."""
    rows = await conn.fetch(
        f"SELECT {LEDGER_COLUMNS} FROM ledger WHERE run_id = $1 AND {OWNED} ORDER BY id", run_id, scope
    )
    return [dict(r) for r in rows] if rows else await sealed_ledger(conn, run_id, scope)


async def sealed_ledger(conn: asyncpg.Connection, run_id: str, scope: str | None) -> list[dict[str, Any]]:
    data = await conn.fetchval(f"SELECT entries FROM ledger_sealed WHERE run_id = $1 AND {OWNED}", run_id, scope)
    return [] if data is None else unpack(data)


# A run's live file rows beside its sealed file index, in one statement (so one snapshot): a row for each
# live file, or one row without a file when it has none, each with the sealed document (NULL until sealed).
_FILES_AND_SEALED = (
    f"SELECT s.files AS sealed, {', '.join(f'f.{name}' for name in _FILE_FIELDS)} FROM (SELECT 1) AS one"
    " LEFT JOIN run_files_sealed AS s ON s.run_id = $1 LEFT JOIN run_files AS f ON f.run_id = $1"
    f" WHERE {OWNED}"
)


async def file_rows(
    conn: asyncpg.Connection, run_id: str, scope: str | None, sealed: dict[str, dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """The run's files by path: the sealed entries (`seal_files`), and the live rows over them (a file written
    after the seal). Both are read in one statement, so in one snapshot, unless the caller passes the sealed
    entries it read already: a run is sealed once, so the live rows read after them are those written since."""
    if sealed is None:
        rows = await conn.fetch(_FILES_AND_SEALED, run_id, scope)
        document = rows[0]["sealed"] if rows else None
        sealed = _by_path(document)
        live = [{name: r[name] for name in _FILE_FIELDS} for r in rows if r["path"] is not None]
    else:
        live = await conn.fetch(f"SELECT {FILE_COLUMNS} FROM run_files WHERE run_id = $1 AND {OWNED}", run_id, scope)
    files = sealed | {r["path"]: dict(r) for r in live}
    return [files[path] for path in sorted(files)]


async def sealed_files(conn: asyncpg.Connection, run_id: str, scope: str | None) -> dict[str, dict[str, Any]]:
    data = await conn.fetchval(f"SELECT files FROM run_files_sealed WHERE run_id = $1 AND {OWNED}", run_id, scope)
    return _by_path(data)


def _by_path(document: bytes | None) -> dict[str, dict[str, Any]]:
    """A sealed file index (`seal_files`) by path; none (NULL) is empty."""
    return {} if document is None else {entry["path"]: entry for entry in unpack(document)}
