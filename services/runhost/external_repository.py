"""The SQL of runs driven by an outside agent: their lease tokens (hashes), take-over and abandonment, the
limits their calls are held to, and the lock by which a finish under way holds a take-over off."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from services.runhost.admitted import AdmittedRun
from services.runhost.repository import HELD

# When the run's time limit runs out (`AdmittedRun.deadline`): no lease reaches past it.
_DEADLINE = "started_at + make_interval(secs => (limits->>'max_seconds')::float8)"
_LEASE_END = f"least(now() + make_interval(secs => lease_seconds), {_DEADLINE})"


class ExternalRepository:
    async def start_lease(
        self, conn: asyncpg.Connection, *, run_id: str, token_hash: str, lease_seconds: int, holder: str | None
    ) -> AdmittedRun:
        """An admitted external run starts at once, under epoch 1 held by the agent (`holder`: its principal)."""
        row = await conn.fetchrow(
            "UPDATE runs SET status = 'running', lease_owner = $3, lease_epoch = 1, lease_seconds = $2::int,"
            " lease_expires_at = least(now() + make_interval(secs => $2::int),"
            "   now() + make_interval(secs => (limits->>'max_seconds')::float8)), started_at = now()"
            " WHERE id = $1 RETURNING *",
            run_id,
            lease_seconds,
            holder,
        )
        await conn.execute("INSERT INTO run_leases (run_id, epoch, token_hash) VALUES ($1, 1, $2)", run_id, token_hash)
        return AdmittedRun.of(row)

    async def token_epoch(self, conn: asyncpg.Connection, *, run_id: str, token_hash: str) -> int | None:
        epoch: int | None = await conn.fetchval(
            "SELECT epoch FROM run_leases WHERE run_id = $1 AND token_hash = $2", run_id, token_hash
        )
        return epoch

    async def renew(self, conn: asyncpg.Connection, *, run_id: str, epoch: int) -> asyncpg.Record | None:
        """A later expiry, but never past the run's time limit."""
        return await conn.fetchrow(
            f"UPDATE runs SET lease_expires_at = {_LEASE_END}"
            f" WHERE {HELD} AND lease_expires_at > now()"
            " RETURNING lease_epoch, lease_expires_at",
            run_id,
            epoch,
        )

    async def lock_run(self, conn: asyncpg.Connection, *, id: str) -> tuple[AdmittedRun, datetime] | None:
        """The run, locked for the rest of the transaction, and the database's time: for the session that
        already showed it holds the run's lease (an actor's look at a run is `ActorRuns.lock_run`)."""
        row = await conn.fetchrow("SELECT *, now() AS now FROM runs WHERE id = $1 FOR UPDATE", id)
        return None if row is None else (AdmittedRun.of(row), row["now"])

    async def end_at_limit(
        self, conn: asyncpg.Connection, *, run_id: str, epoch: int, error: str, details: dict[str, Any]
    ) -> AdmittedRun | None:
        """The run fails at a limit, under the fence, unless a finish has won it."""
        row = await conn.fetchrow(
            "UPDATE runs SET status = 'failed', error = $3, error_details = $4, finished_at = now()"
            f" WHERE {HELD} AND final_answer IS NULL RETURNING *",
            run_id,
            epoch,
            error,
            details,
        )
        return None if row is None else AdmittedRun.of(row)

    async def past_deadline(self, conn: asyncpg.Connection, *, error: str) -> list[AdmittedRun]:
        """External runs left running past their time limit fail (but those a finish has won)."""
        rows = await conn.fetch(
            "UPDATE runs SET status = 'failed', error = $1, finished_at = now(),"
            " error_details = jsonb_build_object('limit', 'max_seconds', 'value', (limits->>'max_seconds')::float)"
            " WHERE driver = 'external' AND status = 'running' AND final_answer IS NULL"
            f"   AND {_DEADLINE} <= now() RETURNING *",
            error,
        )
        return [AdmittedRun.of(r) for r in rows]

    # A finish under way holds its run's lock shared (several finishes of one session may be under way) until
    # its transaction has won the run or failed; a take-over takes it exclusively, so it waits for them.
    async def hold_for_finish(self, conn: asyncpg.Connection, *, run_id: str) -> None:
        await conn.execute("SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))", f"finish|{run_id}")

    async def wait_for_finishes(self, conn: asyncpg.Connection, *, run_id: str, seconds: float) -> bool:
        """Wait, at most `seconds`, until no finish of the run is under way; false when the wait ran out."""
        try:
            async with conn.transaction():  # a savepoint: a wait that runs out is undone, not the transaction
                await conn.execute("SELECT set_config('lock_timeout', $1, true)", f"{max(int(seconds * 1000), 1)}ms")
                await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", f"finish|{run_id}")
                await conn.execute("SET LOCAL lock_timeout TO DEFAULT")
        except asyncpg.LockNotAvailableError:
            return False
        return True

    async def take(self, conn: asyncpg.Connection, *, run_id: str, token_hash: str, holder: str) -> asyncpg.Record:
        """A new epoch for another session: every write under an older one is fenced off from now on."""
        row = await conn.fetchrow(
            "UPDATE runs SET lease_epoch = lease_epoch + 1, lease_owner = $2,"
            f" lease_expires_at = {_LEASE_END}"
            " WHERE id = $1 RETURNING lease_epoch, lease_expires_at",
            run_id,
            holder,
        )
        await conn.execute(
            "INSERT INTO run_leases (run_id, epoch, token_hash) VALUES ($1, $2, $3)",
            run_id,
            row["lease_epoch"],
            token_hash,
        )
        return row

    async def abandon(self, conn: asyncpg.Connection, *, after_seconds: float, error: str) -> list[AdmittedRun]:
        """External runs whose lease has stayed expired this long fail, but for those a finish has won (they
        are finished by `interrupted_finishes`)."""
        rows = await conn.fetch(
            "UPDATE runs SET status = 'failed', error = $2, finished_at = now()"
            " WHERE driver = 'external' AND status = 'running' AND final_answer IS NULL"
            "   AND lease_expires_at < now() - make_interval(secs => $1) RETURNING *",
            after_seconds,
            error,
        )
        return [AdmittedRun.of(r) for r in rows]

    async def interrupted_finishes(self, conn: asyncpg.Connection) -> list[AdmittedRun]:
        """External runs a finish has won (their answer is kept) and that are still running past their lease."""
        rows = await conn.fetch(
            "SELECT * FROM runs WHERE driver = 'external' AND status = 'running' AND final_answer IS NOT NULL"
            " AND lease_expires_at < now() ORDER BY lease_expires_at LIMIT 50"
        )
        return [AdmittedRun.of(r) for r in rows]

    async def cancel_external(self, conn: asyncpg.Connection, *, id: str) -> AdmittedRun:
        """Inside the transaction that locked the running run (`lock_run`) and found no finish had won it."""
        row = await conn.fetchrow(
            "UPDATE runs SET status = 'cancelled', cancel_requested = true, finished_at = now() WHERE id = $1 RETURNING *",
            id,
        )
        return AdmittedRun.of(row)
