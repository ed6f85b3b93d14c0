"""The ledger's rows are unique per (run, stage, ref, locator) on real PostgreSQL: the migration keeps the first
of the rows concurrent calls wrote twice, and a later write of the same row adds nothing."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from services.runhost.app import MIGRATIONS
from services.runhost.leases import StaleLease
from services.runhost.ledger import Inclusion, RunLedger
from services.runhost.repository import WorkerRuns
from shared.contracts.common import Ref
from shared.db import Database
from tests.service.runhost.test_leases import admitted_run
from tests.support.infra import Infra

ONCE = "0008_ledger_once.sql"
A = {"kind": "publication", "id": "pub_a", "version": 1}
PAGE = {"kind": "source", "id": "announcement", "version": 1}


async def test_the_migration_keeps_the_first_row_and_later_writes_add_none(infra: Infra, tmp_path: Path) -> None:
    # The migrations before this one, under the same names (`runhost/NNNN_name.sql`), then all of them.
    before = tmp_path / "runhost" / "migrations"
    before.mkdir(parents=True)
    for path in MIGRATIONS.glob("*.sql"):
        if path.name < ONCE:
            shutil.copy(path, before / path.name)
    db = Database(infra.dsn(f"runhost_{uuid.uuid4().hex[:10]}"))
    await db.connect(before)
    try:
        repo = WorkerRuns()
        run_id = await admitted_run(db)
        rows = [
            ("read", A, None),
            ("read", A, None),
            ("read", PAGE, "page:1"),
            ("read", PAGE, "page:1"),
            ("read", PAGE, "page:2"),
            ("included", A, None),
            ("included", A, None),
            ("included", A, None),
            ("replayed", None, None),
            ("replayed", None, None),
        ]
        async with db.transaction() as conn:
            for stage, ref, locator in rows:
                await conn.execute(
                    "INSERT INTO ledger (run_id, epoch, stage, ref, locator) VALUES ($1, 1, $2, $3, $4)",
                    run_id,
                    stage,
                    ref,
                    locator,
                )
        await db.close()
        db = Database(db.dsn)
        await db.connect(MIGRATIONS)

        async with db.transaction() as conn:
            kept = await repo.list_ledger(conn, run_id=run_id)
            assert [(r["stage"], r["locator"]) for r in kept] == [
                ("read", None),
                ("read", "page:1"),
                ("read", "page:2"),
                ("included", None),
                ("replayed", None),
                ("replayed", None),
            ]
            await conn.execute("UPDATE runs SET status = 'running', lease_epoch = 1 WHERE id = $1", run_id)
            for stage, ref, locator in rows[:8]:
                assert ref is not None
                assert await repo.append_ledger(conn, run_id=run_id, epoch=1, stage=stage, ref=ref, locator=locator)
            assert len(await repo.list_ledger(conn, run_id=run_id)) == len(kept)
    finally:
        await db.close()


async def test_one_listing_is_one_statement_in_its_order_under_the_fence(db: Database) -> None:
    """What a catalog page or a search showed is listed in one statement, in the order shown; what the run
    already listed adds nothing; a stale lease writes none of it."""
    repo = WorkerRuns()
    run_id = await admitted_run(db)
    refs = [{"kind": "source", "id": f"s{i}", "version": 1} for i in range(5)]
    locators = [None, "page:1", None, "page:2", None]
    async with db.transaction() as conn:
        await conn.execute("UPDATE runs SET status = 'running', lease_epoch = 2 WHERE id = $1", run_id)
        assert not await repo.append_listed(conn, run_id=run_id, epoch=1, refs=refs, locators=locators)
        assert await repo.list_ledger(conn, run_id=run_id) == []
        assert await repo.append_listed(conn, run_id=run_id, epoch=2, refs=refs[:3], locators=locators[:3])
        assert await repo.append_listed(conn, run_id=run_id, epoch=2, refs=refs, locators=locators)
        rows = await repo.list_ledger(conn, run_id=run_id)
    assert [(r["stage"], r["ref"]["id"], r["locator"]) for r in rows] == [
        ("listed", f"s{i}", locators[i]) for i in range(5)
    ]
    assert [r["seq"] for r in rows] == [1, 2, 3, 4, 5]


async def test_the_digest_tells_rows_apart_as_the_columns_did(db: Database) -> None:
    """The once-rule is kept on a digest of stage, ref and locator (0018): a NULL locator and an empty one
    are two rows, another stage is another row, and a ref with its keys in another order is the same row."""
    repo = WorkerRuns()
    run_id = await admitted_run(db)
    reordered = {"version": 1, "id": "pub_a", "kind": "publication"}
    async with db.transaction() as conn:
        await conn.execute("UPDATE runs SET status = 'running', lease_epoch = 1 WHERE id = $1", run_id)
        for stage, ref, locator in [
            ("read", A, None),
            ("read", A, ""),
            ("included", A, None),
            ("read", reordered, None),
            ("read", A, "page:1"),
            ("read", reordered, "page:1"),
        ]:
            assert await repo.append_ledger(conn, run_id=run_id, epoch=1, stage=stage, ref=ref, locator=locator)
        rows = await repo.list_ledger(conn, run_id=run_id)
        assert [(r["stage"], r["locator"]) for r in rows] == [
            ("read", None),
            ("read", ""),
            ("included", None),
            ("read", "page:1"),
        ]
        indexes = await conn.fetchval(
            "SELECT count(*) FROM pg_indexes WHERE tablename = 'ledger' AND indexdef LIKE '%ledger_key%'"
        )
        assert indexes == 1


async def test_what_one_model_input_included_is_one_statement_in_its_order_under_the_fence(db: Database) -> None:
    """The inclusions of one model request: in the order given, a material at one locator once (the first),
    a row an earlier request wrote kept with its request, and nothing at all under a stale lease."""
    repo = WorkerRuns()
    run_id = await admitted_run(db)
    async with db.transaction() as conn:
        await conn.execute("UPDATE runs SET status = 'running', lease_epoch = 2 WHERE id = $1", run_id)

    def inclusion(ref: dict[str, object], locator: str | None, content_hash: str) -> Inclusion:
        return Inclusion(Ref.model_validate(ref), content_hash, locator)

    with pytest.raises(StaleLease):
        await RunLedger(db, repo, run_id, 1).included([inclusion(A, None, "h0")], model_request="r0")
    ledger = RunLedger(db, repo, run_id, 2)
    await ledger.included([inclusion(A, None, "h1")], model_request="r1")
    await ledger.included(
        [
            inclusion(PAGE, "page:2", "h2"),
            inclusion(A, None, "h1"),
            inclusion(PAGE, "page:1", "h3"),
            inclusion(PAGE, "page:2", "h4"),
        ],
        model_request="r2",
    )
    await ledger.included([], model_request="r3")
    async with db.pool.acquire() as conn:
        rows = await repo.list_ledger(conn, run_id=run_id)
    assert [(r["stage"], r["ref"]["id"], r["locator"], r["content_hash"], r["model_request"]) for r in rows] == [
        ("included", "pub_a", None, "h1", "r1"),
        ("included", "announcement", "page:2", "h2", "r2"),
        ("included", "announcement", "page:1", "h3", "r2"),
    ]
