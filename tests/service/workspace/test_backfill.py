"""What associations recorded by earlier releases lack is asked of their owners: a lost title, a run's report."""

from __future__ import annotations

import asyncpg
import pytest

from services.workspace.backfill import Backfill
from services.workspace.owners import Owners
from shared.bus import BusClient
from shared.contracts import publication as p
from shared.contracts.common import Actor
from shared.db import Database
from shared.settings import WorkspaceSettings
from tests.service.workspace.conftest import ArtifactOwner, catalog, create

pytestmark = pytest.mark.usefixtures("publication")


async def test_a_lost_title_is_filled_and_a_runs_report_leaves_the_catalog(
    artifact: ArtifactOwner, bus: BusClient, who: Actor, ws_db: asyncpg.Connection, workspace: WorkspaceSettings
) -> None:
    ws = await create(bus, who)
    # Committed without a workspace: no event associates it; the rows below are what an earlier release left.
    pub = await bus.call_raw(p.COMMIT, {"title": "What holds?", "body": "b", "run_id": "run_0123abcd"}, actor=who)
    report = await artifact.register(bus, who, title="Report of run_0123abcd: What holds?")
    chart = await artifact.register(bus, who)
    rows = [
        ("publication", pub["id"], "run_0123abcd"),
        ("artifact", report["id"], None),
        ("artifact", chart["id"], None),
    ]
    for kind, ref_id, run_id in rows:
        await ws_db.execute(
            "INSERT INTO associations (workspace_id, kind, ref_id, version, run_id, backfill)"
            " VALUES ($1, $2, $3, 1, $4, true)",
            ws["id"],
            kind,
            ref_id,
            run_id,
        )
    await ws_db.execute(
        "UPDATE workspaces SET catalog_count = 1, pinned_count = 2,"
        " catalog_mark = (SELECT max(seq) FROM associations WHERE workspace_id = $1) WHERE id = $1",
        ws["id"],
    )

    db = Database(workspace.database_url)
    await db.connect()
    try:
        owners = Owners(lambda: bus, check_timeout=5.0, retain_timeout=5.0)
        assert await Backfill(db, owners).settle_all() == 0
    finally:
        await db.close()

    settled = {
        r["ref_id"]: r
        for r in await ws_db.fetch(
            "SELECT ref_id, title, run_id, backfill FROM associations WHERE workspace_id = $1", ws["id"]
        )
    }
    assert settled[pub["id"]]["title"] == "What holds?"
    assert settled[report["id"]]["run_id"] == "run_0123abcd" and settled[chart["id"]]["run_id"] is None
    assert not any(r["backfill"] for r in settled.values())
    page = await catalog(bus, who, ws["id"])
    assert [i["id"] for i in page["items"]] == [chart["id"], pub["id"]] and page["omitted"] == 0
    assert await ws_db.fetchval("SELECT pinned_count FROM workspaces WHERE id = $1", ws["id"]) == 1
