"""The SQL of what runs leave behind: the content store of run files, the trimming of ended runs' journals,
and the release of working files past retention (services/runhost/retention.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import asyncpg

from services.runhost.repository import FILE_COLUMNS, LEDGER_COLUMNS, WorkerRuns
from services.runhost.sealed import pack, unpack

_ENDED = "status IN ('completed', 'failed', 'cancelled') AND finished_at IS NOT NULL"
# One release at a time, whatever the number of runhost processes: a release decrements the references of
# many contents, and two of them doing so in different orders could deadlock.
_RELEASE_LOCK = 0x52554E52454C  # "RUNREL"


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

    # -- the journal of ended runs -----------------------------------------------------------------
    async def untrimmed_runs(self, conn: asyncpg.Connection, *, limit: int) -> list[str]:
        return await _ended_runs(conn, "journal_trimmed_at IS NULL", limit=limit)

    async def journal_entries(self, conn: asyncpg.Connection, *, run_id: str) -> list[asyncpg.Record]:
        """The journal of an ended run, its rows locked (a second trimmer waits, then finds it trimmed)."""
        rows: list[asyncpg.Record] = await conn.fetch(
            "SELECT seq, response, result FROM model_journal WHERE run_id = $1 ORDER BY seq FOR UPDATE", run_id
        )
        return rows

    async def set_journal_entry(
        self, conn: asyncpg.Connection, *, seq: int, response: dict[str, Any], result: dict[str, Any] | None
    ) -> None:
        await conn.execute("UPDATE model_journal SET response = $2, result = $3 WHERE seq = $1", seq, response, result)

    async def seal_ledger(self, conn: asyncpg.Connection, *, run_id: str) -> None:
        """Keep an ended run's ledger as one document (services/runhost/sealed.py) and drop its rows and their
        index entries: nothing appends to it any more, and whole it costs a few bytes a row instead of some
        hundreds. Run in the transaction that marks the run trimmed."""
        rows = await conn.fetch(
            f"SELECT {LEDGER_COLUMNS} FROM ledger WHERE run_id = $1 ORDER BY id FOR UPDATE",
            run_id,
        )
        if rows and await _sealed(conn, "ledger_sealed", "entries", run_id, pack(rows)):
            await conn.execute("DELETE FROM ledger WHERE id = ANY($1::bigint[])", [r["id"] for r in rows])

    async def seal_files(self, conn: asyncpg.Connection, *, run_id: str) -> None:
        """Keep an ended run's file index as one document likewise, in the transaction that seals its ledger.
        The contents keep their references (the document names them): the rows go under `dossier.sealing`,
        which the reference-counting trigger skips."""
        rows = await conn.fetch(
            f"SELECT {FILE_COLUMNS} FROM run_files WHERE run_id = $1 ORDER BY path FOR UPDATE",
            run_id,
        )
        if rows and await _sealed(conn, "run_files_sealed", "files", run_id, pack(rows)):
            await conn.execute("SELECT set_config('dossier.sealing', 'on', true)")
            await conn.execute(
                "DELETE FROM run_files WHERE run_id = $1 AND path = ANY($2::text[])", run_id, [r["path"] for r in rows]
            )
            await conn.execute("SELECT set_config('dossier.sealing', 'off', true)")

    async def mark_trimmed(self, conn: asyncpg.Connection, *, run_id: str) -> bool:
        done = await conn.fetchval(
            f"UPDATE runs SET journal_trimmed_at = now() WHERE id = $1 AND journal_trimmed_at IS NULL AND {_ENDED}"
            " RETURNING 1",
            run_id,
        )
        return done is not None

    # -- retention ---------------------------------------------------------------------------------
    async def runs_past_retention(self, conn: asyncpg.Connection, *, days: float, limit: int) -> list[str]:
        past = "files_released_at IS NULL AND finished_at < now() - make_interval(secs => $2)"
        return await _ended_runs(conn, past, days * 86400.0, limit=limit)

    async def per_run_files(self, conn: asyncpg.Connection, *, run_id: str) -> list[dict[str, Any]]:
        """The files a run stored under its own keys (before the content store): deleted with the run's files."""
        return [row for row in await WorkerRuns().list_files(conn, run_id=run_id) if not row["by_content"]]

    async def release(self, conn: asyncpg.Connection, *, run_id: str) -> bool:
        """Drop an ended run's file index and journal; its contents lose a reference each (the sweeper lets
        go of those no other run names)."""
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _RELEASE_LOCK)
        released = await conn.fetchval(
            "UPDATE runs SET files_released_at = now()"
            f" WHERE id = $1 AND files_released_at IS NULL AND {_ENDED} RETURNING files_released_at",
            run_id,
        )
        if released is None:
            return False
        await conn.execute("DELETE FROM run_files WHERE run_id = $1", run_id)
        # A sealed index gives back the references its document held, in the contents' order.
        files = await conn.fetchval("DELETE FROM run_files_sealed WHERE run_id = $1 RETURNING files", run_id)
        named = Counter(entry["sha256"] for entry in unpack(files) if entry["by_content"]) if files else Counter()
        if named:
            shas = sorted(named)
            await conn.execute(
                "UPDATE file_contents f SET refs = f.refs - n.count"
                " FROM unnest($1::text[], $2::int[]) AS n(sha256, count) WHERE f.sha256 = n.sha256",
                shas,
                [named[sha] for sha in shas],
            )
        await conn.execute("DELETE FROM model_journal WHERE run_id = $1", run_id)
        return True

    async def released_at(self, conn: asyncpg.Connection, *, run_id: str) -> Any:
        return await conn.fetchval("SELECT files_released_at FROM runs WHERE id = $1", run_id)


async def _ended_runs(conn: asyncpg.Connection, condition: str, *args: Any, limit: int) -> list[str]:
    """Ended runs meeting `condition` (its parameters from $2), the earliest ended first."""
    rows = await conn.fetch(
        f"SELECT id FROM runs WHERE {_ENDED} AND {condition} ORDER BY finished_at LIMIT $1", limit, *args
    )
    return [str(r["id"]) for r in rows]


async def _sealed(conn: asyncpg.Connection, table: str, column: str, run_id: str, document: bytes) -> bool:
    """Store a run's sealed document; false when it was sealed already (its rows then stay)."""
    done = await conn.fetchval(
        f"INSERT INTO {table} (run_id, {column}) VALUES ($1, $2) ON CONFLICT (run_id) DO NOTHING RETURNING 1",
        run_id,
        document,
    )
    return done is not None
