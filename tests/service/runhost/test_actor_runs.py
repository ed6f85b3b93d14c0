"""An actor's repository carries its scope into every query: a run of another scope, and every row of it
(its ledger, files, journal and lease epochs), is not there for it, even asked by the run's id."""

from __future__ import annotations

from services.runhost.actor_runs import ActorRuns
from services.runhost.external_repository import ExternalRepository
from services.runhost.journal_repository import JournalRepository
from services.runhost.repository import WorkerRuns
from services.runhost.storage_repository import StorageRepository
from shared.contracts.common import Actor, PageRequest
from shared.db import Database
from tests.service.runhost.test_leases import OWNER, REF, admitted_run

STRANGER = Actor(scope="other", principal="p")


async def test_a_runs_rows_are_read_only_in_its_scope(db: Database) -> None:
    repo, journal = WorkerRuns(), JournalRepository()
    run_id = await admitted_run(db, model="external", driver="external")
    async with db.transaction() as conn:
        await ExternalRepository().start_lease(
            conn, run_id=run_id, token_hash=f"h-{run_id}", lease_seconds=60, holder="p"
        )
        assert await repo.append_ledger(conn, run_id=run_id, epoch=1, stage="read", ref=REF)
        generation, _ = await StorageRepository().touch_content(conn, sha256="x", size=1)
        indexed = await repo.index_file(
            conn, run_id=run_id, path="plan.md", size=1, sha256="x", generation=generation, epoch=1
        )
        assert indexed == "indexed"
        assert await journal.insert_request(
            conn, run_id=run_id, epoch=1, request_id="r1", input_hash="h" * 64, response={}
        )

    async def seen(runs: ActorRuns) -> tuple[object, ...]:
        async with db.pool.acquire() as conn:
            return (
                await runs.get_run(conn, id=run_id) is not None,
                len(await runs.list_ledger(conn, run_id=run_id)),
                len(await runs.page_ledger(conn, run_id=run_id, limit=10, after_id=0, after_seq=0)),
                await runs.ledger_totals(conn, run_id=run_id),
                len((await runs.page_files(conn, run_id=run_id, page=PageRequest(limit=10)))[0]),
                len(await runs.journal_rows(conn, run_id=run_id, request_id="r1")),
                len(await runs.lease_epochs(conn, run_id=run_id)),
                await runs.peek_run(conn, id=run_id) is not None,
            )

    assert await seen(ActorRuns(OWNER)) == (True, 1, 1, {"read": 1}, 1, 1, 1, True)
    assert await seen(ActorRuns(STRANGER)) == (False, 0, 0, {}, 0, 0, 0, False)
