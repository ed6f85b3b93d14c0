"""Migration 0004 on a workspace that lived under the earlier schema: its catalog takes the new order at once."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from services.workspace import app as workspace_app
from shared.db import Database, ensure_database, migrate
from tests.support.infra import Infra

MIGRATIONS = Path(workspace_app.__file__).parent / "migrations"
BEFORE = ("0001_init.sql", "0002_drift.sql", "0003_catalog_kinds.sql")


async def test_earlier_rows_get_their_part_supersessions_counters_and_flags(infra: Infra, tmp_path: Path) -> None:
    dsn = infra.dsn(f"workspace_{uuid.uuid4().hex[:10]}")
    await ensure_database(dsn)
    old = tmp_path / "workspace" / "migrations"
    old.mkdir(parents=True)
    for name in BEFORE:
        shutil.copy(MIGRATIONS / name, old / name)
    db = Database(dsn)
    await db.connect()
    try:
        await migrate(db.pool, old)
        async with db.pool.acquire() as conn:
            await conn.execute("INSERT INTO workspaces (id, scope, title, status) VALUES ('ws_1', 's', 'W', 'active')")
            rows = [
                ("source", "S1", None, "Source one"),
                ("publication", "pub_mine", None, "Memo"),
                ("publication", "pub_r1", "run_1", "What holds?"),
                ("artifact", "art_report", None, None),
                ("publication", "pub_r2", "run_2", None),  # its title lost to the association race
                ("publication", "pub_r3", "run_3", "What holds?"),  # the same question again: supersedes pub_r1
                ("publication", "pub_r4", "run_4", "Another"),  # cites pub_r2: supersedes it
                ("conversation", "conv_1", "run_1", None),
            ]
            for kind, ref_id, run_id, title in rows:
                await conn.execute(
                    "INSERT INTO associations (workspace_id, kind, ref_id, version, run_id, title)"
                    " VALUES ('ws_1', $1, $2, 1, $3, $4)",
                    kind,
                    ref_id,
                    run_id,
                    title,
                )
            await conn.execute(
                "INSERT INTO citations VALUES ('s', 'pub_r4', 1, 'publication', 'pub_r2', 1),"
                " ('s', 'pub_r4', 1, 'publication', 'pub_mine', 1)"
            )
        assert await migrate(db.pool, MIGRATIONS) == [
            "workspace/0004_catalog_life.sql",
            "workspace/0005_drift_questions.sql",
            "workspace/0006_ref_changes.sql",
        ]
        async with db.pool.acquire() as conn:
            found = {
                r["ref_id"]: r
                for r in await conn.fetch("SELECT ref_id, catalog_class, superseded_seq, backfill FROM associations")
            }
            seq = {r["ref_id"]: r["seq"] for r in await conn.fetch("SELECT ref_id, seq FROM associations")}
            state = await conn.fetchrow("SELECT catalog_count, pinned_count, catalog_mark FROM workspaces")
    finally:
        await db.close()
    assert {ref: r["catalog_class"] for ref, r in found.items()} == {
        "S1": 0,
        "pub_mine": 0,
        "art_report": 0,  # until its owner tells it is a run's report (services/workspace/backfill.py)
        "pub_r1": 1,
        "pub_r2": 1,
        "pub_r3": 1,
        "pub_r4": 1,
        "conv_1": None,
    }
    assert found["pub_r1"]["superseded_seq"] == seq["pub_r3"]
    assert found["pub_r2"]["superseded_seq"] == seq["pub_r4"]
    assert {ref for ref, r in found.items() if r["superseded_seq"] is not None} == {"pub_r1", "pub_r2"}
    assert {ref for ref, r in found.items() if r["backfill"]} == {"pub_r2", "art_report"}
    assert dict(state) == {"catalog_count": 6, "pinned_count": 1, "catalog_mark": max(seq.values())}
