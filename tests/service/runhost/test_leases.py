"""Leases on real PostgreSQL (and S3): takeover after expiry, and every stale-epoch write refused."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from services.runhost.actor_runs import ActorRuns
from services.runhost.admitted import AdmittedRun
from services.runhost.finishing import Finisher
from services.runhost.leases import StaleLease
from services.runhost.ledger import RunLedger
from services.runhost.memory import RunFiles
from services.runhost.repository import WorkDone, WorkerRuns
from services.runhost.storage_repository import StorageRepository
from shared.blobs import Blobs
from shared.contracts.common import Actor, Ref
from shared.db import Database
from shared.settings import CommonSettings
from tests.support.infra import Infra
from tests.support.service import settings_from

REF = {"kind": "publication", "id": "pub_a", "version": 1}


# The actor whose runs these tests admit.
OWNER = Actor(scope="s", principal="p")


async def admitted_run(db: Database, **values: Any) -> str:
    """A run just admitted in `OWNER`'s scope (`values`: columns other than the defaults)."""
    run_id = f"run_{uuid.uuid4().hex}"
    runs = ActorRuns(OWNER)
    async with db.transaction() as conn:
        await runs.insert_conversation(conn, id=f"conv_{run_id}", workspace_id="ws")
        await runs.insert_run(
            conn,
            values={
                "id": run_id,
                "workspace_id": "ws",
                "conversation_id": f"conv_{run_id}",
                "request_id": run_id,
                "params_hash": "h",
                "status": "admitted",
                "question": "q",
                "model": "extractive",
                "goal_version": 1,
                "goal_text": "g",
                "catalog": {"items": [], "complete": True, "omitted": 0},
                "limits": {"max_steps": 10, "max_chars": 10, "max_seconds": 10},
            }
            | values,
        )
    return run_id


async def test_expired_lease_is_taken_over_and_the_stale_worker_is_fenced(db: Database, infra: Infra) -> None:
    repo = WorkerRuns()
    run_id = await admitted_run(db)
    async with db.transaction() as conn:
        first = await repo.claim_run(conn, owner="worker-a", lease_seconds=30)
        assert first is not None and first.id == run_id and first.lease_epoch == 1
        assert await repo.claim_run(conn, owner="worker-b", lease_seconds=30) is None, "a live lease is not taken"
        assert await repo.append_ledger(conn, run_id=run_id, epoch=1, stage="read", ref=REF)

    async with db.transaction() as conn:
        # worker-a stops heartbeating; its lease runs out.
        await conn.execute("UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", run_id)
    async with db.transaction() as conn:
        second = await repo.claim_run(conn, owner="worker-b", lease_seconds=30)
    assert second is not None and second.id == run_id and second.lease_epoch == 2 and second.lease_owner == "worker-b"

    async with db.transaction() as conn:
        assert not await repo.append_ledger(conn, run_id=run_id, epoch=1, stage="read", ref=REF)
        assert not await repo.heartbeat(conn, run_id=run_id, epoch=1, lease_seconds=30)
        assert not await repo.fenced_update(conn, run_id=run_id, epoch=1, values={"status": "completed"})
        generation, _ = await StorageRepository().touch_content(conn, sha256="x", size=1)
        indexed = await repo.index_file(
            conn, run_id=run_id, path="draft.md", size=1, sha256="x", generation=generation, epoch=1
        )
        assert indexed == "fenced"
        assert await repo.add_counters(conn, run_id=run_id, epoch=1, work=WorkDone(steps=1, requests=1)) is None
        assert await repo.append_ledger(conn, run_id=run_id, epoch=2, stage="read", ref=REF | {"id": "pub_b"})
        # The same row again (a concurrent call under the same lease) is held, and recorded once.
        assert await repo.append_ledger(conn, run_id=run_id, epoch=2, stage="read", ref=REF | {"id": "pub_b"})

    blobs = Blobs(settings_from(infra.settings_env("runhost"), CommonSettings))
    await blobs.ensure_bucket()
    with pytest.raises(StaleLease):
        await RunFiles(blobs, db, repo, run_id, 1).write("notes/x.md", "stale note")
    with pytest.raises(StaleLease):
        await RunLedger(db, repo, run_id, 1).unavailable(Ref.model_validate(REF), reason="withdrawn")
    await RunFiles(blobs, db, repo, run_id, 2).write("notes/x.md", "current note")
    assert await RunFiles(blobs, db, repo, run_id, None).read("notes/x.md") == "current note"
    # A stale worker that wakes after the current one wrote must not change the file's bytes either.
    with pytest.raises(StaleLease):
        await RunFiles(blobs, db, repo, run_id, 1).write("notes/x.md", "stale note, late")
    assert await RunFiles(blobs, db, repo, run_id, None).read("notes/x.md") == "current note"

    async with db.pool.acquire() as conn:
        rows = await repo.list_ledger(conn, run_id=run_id)
    assert [r["seq"] for r in rows] == [1, 2]


async def test_finished_runs_are_never_claimed(db: Database) -> None:
    repo = WorkerRuns()
    run_id = await admitted_run(db)
    async with db.transaction() as conn:
        claimed = await repo.claim_run(conn, owner="w", lease_seconds=30)
        assert claimed is not None
        assert await repo.fenced_update(conn, run_id=run_id, epoch=1, values={"status": "completed"})
        await conn.execute("UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1", run_id)
        assert await repo.claim_run(conn, owner="w2", lease_seconds=30) is None


async def test_a_read_row_and_its_source_file_commit_together(db: Database, infra: Infra) -> None:
    """A crash between recording a read and indexing its file must leave neither (or the resumed run reads twice)."""
    repo = WorkerRuns()
    run_id = await admitted_run(db)
    async with db.transaction() as conn:
        claimed = await repo.claim_run(conn, owner="w", lease_seconds=30)
    assert claimed is not None
    blobs = Blobs(settings_from(infra.settings_env("runhost"), CommonSettings))
    await blobs.ensure_bucket()
    files, ledger = RunFiles(blobs, db, repo, run_id, 1), RunLedger(db, repo, run_id, 1)
    ref = Ref.model_validate(REF)

    async def row_then_crash(conn: object) -> bool:
        await ledger.append_in(conn, "read", ref, content_hash="h")  # type: ignore[arg-type]
        raise RuntimeError("the worker died here")

    with pytest.raises(RuntimeError):
        await files.write("sources/pub_a@v1.txt", "body", with_record=row_then_crash)
    async with db.pool.acquire() as conn:
        assert await repo.list_ledger(conn, run_id=run_id) == []
    assert "sources/pub_a@v1.txt" not in await files.listing()

    async def row(conn: object) -> bool:
        return await ledger.append_in(conn, "read", ref, content_hash="h")  # type: ignore[arg-type]

    await files.write("sources/pub_a@v1.txt", "body", with_record=row)
    async with db.pool.acquire() as conn:
        assert [r["stage"] for r in await repo.list_ledger(conn, run_id=run_id)] == ["read"]
    assert "sources/pub_a@v1.txt" in await files.listing()


async def test_a_runs_end_is_won_once_on_its_row(db: Database) -> None:
    """A kept answer is the run's end: a second finish and a later cancel request lose to it; a cancel asked for
    before it wins, and the worker's finish then ends the run cancelled, keeping no answer."""
    repo = WorkerRuns()

    async def running() -> AdmittedRun:
        await admitted_run(db)
        async with db.transaction() as conn:
            run = await repo.claim_run(conn, owner="w", lease_seconds=30)
        assert run is not None
        return run

    def finisher(run: AdmittedRun) -> Finisher:
        # Neither the owners nor the object store is reached before the run's end is won.
        epoch = run.lease_epoch
        return Finisher(
            db=db,
            repo=repo,
            owners=None,  # type: ignore[arg-type]
            blobs=None,  # type: ignore[arg-type]
            run=run,
            epoch=epoch,
            files=RunFiles(None, db, repo, run.id, epoch),  # type: ignore[arg-type]
            ledger=RunLedger(db, repo, run.id, epoch),
        )

    run = await running()
    assert await finisher(run).win({"final_answer": "first"})
    assert not await finisher(run).win({"final_answer": "second"})
    async with db.transaction() as conn:
        assert await ActorRuns(OWNER).request_cancel(conn, id=run.id) is None
        kept = await repo.get_run(conn, id=run.id)
    assert kept is not None and (kept.final_answer, kept.cancel_requested) == ("first", False)

    run = await running()
    async with db.transaction() as conn:
        assert await ActorRuns(OWNER).request_cancel(conn, id=run.id) is not None
    await finisher(run).complete("too late", None)
    async with db.pool.acquire() as conn:
        ended = await repo.get_run(conn, id=run.id)
    assert ended is not None and (ended.status, ended.final_answer) == ("cancelled", None)
