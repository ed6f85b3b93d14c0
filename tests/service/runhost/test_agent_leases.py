"""An outside agent's lease and limits on real PostgreSQL: no lease outlives the run's time limit, a run ends at
a limit once and only under its epoch, and a take-over waits for a finish under way only as long as told."""

from __future__ import annotations

from datetime import timedelta

import pytest

from services.runhost.external_repository import ExternalRepository
from shared.db import Database
from tests.service.runhost.test_leases import admitted_run


async def external_run(db: Database, *, lease_seconds: int, max_seconds: float) -> str:
    """An external run just admitted and started under epoch 1."""
    limits = {"max_steps": 10, "max_chars": 10, "max_seconds": max_seconds}
    run_id = await admitted_run(db, model="external", driver="external", limits=limits)
    async with db.transaction() as conn:
        await ExternalRepository().start_lease(
            conn, run_id=run_id, token_hash=f"h1-{run_id}", lease_seconds=lease_seconds, holder="agent"
        )
    return run_id


async def test_no_lease_reaches_past_the_runs_time_limit(db: Database) -> None:
    leases = ExternalRepository()
    run_id = await external_run(db, lease_seconds=600, max_seconds=60)
    async with db.transaction() as conn:
        run, _ = await leases.lock_run(conn, id=run_id) or pytest.fail("no run")
        assert run.deadline == run.started_at + timedelta(seconds=60) == run.lease_expires_at
        renewed = await leases.renew(conn, run_id=run_id, epoch=1)
        assert renewed is not None and renewed["lease_expires_at"] == run.deadline
        taken = await leases.take(conn, run_id=run_id, token_hash=f"h2-{run_id}", holder="other")
        assert (taken["lease_epoch"], taken["lease_expires_at"]) == (2, run.deadline)

    short = await external_run(db, lease_seconds=30, max_seconds=600)
    async with db.transaction() as conn:
        run, _ = await leases.lock_run(conn, id=short) or pytest.fail("no run")
    assert run.started_at is not None and run.deadline is not None
    assert run.lease_expires_at == run.started_at + timedelta(seconds=30) < run.deadline


async def test_a_run_ends_at_a_limit_once_and_only_under_its_epoch(db: Database) -> None:
    leases = ExternalRepository()
    run_id = await external_run(db, lease_seconds=60, max_seconds=60)
    async with db.transaction() as conn:
        steps, chars = {"limit": "max_steps", "value": 3}, {"limit": "max_chars", "value": 9}
        assert await leases.end_at_limit(conn, run_id=run_id, epoch=2, error="limit_reached", details=steps) is None
        ended = await leases.end_at_limit(conn, run_id=run_id, epoch=1, error="limit_reached", details=steps)
        assert ended is not None and (ended.status, ended.error, ended.error_details) == (
            "failed",
            "limit_reached",
            steps,
        )
        assert await leases.end_at_limit(conn, run_id=run_id, epoch=1, error="limit_reached", details=chars) is None


async def test_a_take_over_waits_for_a_finish_under_way_only_as_long_as_told(db: Database) -> None:
    leases = ExternalRepository()
    run_id = await external_run(db, lease_seconds=60, max_seconds=60)
    async with db.pool.acquire() as finishing, finishing.transaction():
        await leases.hold_for_finish(finishing, run_id=run_id)
        # Another finish of the same session is under way beside it: finishes do not wait for each other.
        async with db.transaction() as second:
            await leases.hold_for_finish(second, run_id=run_id)
        async with db.transaction() as taking:
            assert not await leases.wait_for_finishes(taking, run_id=run_id, seconds=0.2)
            # The wait that ran out is undone, not the take-over's transaction, and no lock timeout stays.
            assert await taking.fetchval("SELECT current_setting('lock_timeout')") == "0"
            run, _ = await leases.lock_run(taking, id=run_id) or pytest.fail("no run")
            assert run.lease_epoch == 1
    async with db.transaction() as taking:
        assert await leases.wait_for_finishes(taking, run_id=run_id, seconds=0.2)
        assert await taking.fetchval("SELECT current_setting('lock_timeout')") == "0"
