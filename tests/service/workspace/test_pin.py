"""Pinning an artifact: the artifact service retains, the workspace associates; both outcomes reported."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from shared.bus import BusClient
from shared.contracts import artifact as a
from shared.contracts import workspace as w
from shared.contracts.common import Actor
from shared.errors import Conflict, NotFound
from tests.service.workspace.conftest import ArtifactOwner, catalog, create
from tests.support.probe import probe_until

# Every test here asks the workspace service.
pytestmark = pytest.mark.usefixtures("workspace")


def pin(workspace_id: str, artifact_id: str) -> dict[str, str]:
    return {"workspace_id": workspace_id, "artifact_id": artifact_id}


async def test_pin_retains_then_associates(artifact: ArtifactOwner, bus: BusClient, who: Actor) -> None:
    ws = await create(bus, who)
    art = await artifact.register(bus, who, expires_at=(datetime.now(UTC) + timedelta(days=1)).isoformat())
    assert art["expires_at"] is not None
    reply = await bus.call_raw(w.PIN_ARTIFACT, pin(ws["id"], art["id"]), actor=who)
    assert reply == {"artifact_id": art["id"], "retention": "retained", "association": "confirmed", "reason": None}
    assert (await bus.call_raw(a.GET, {"artifact_id": art["id"]}, actor=who))["expires_at"] is None
    items = (await catalog(bus, who, ws["id"]))["items"]
    assert [(i["kind"], i["id"], i["version"], i["title"], i["available"]) for i in items] == [
        ("artifact", art["id"], 1, "Chart pack", True)
    ]
    assert (await bus.call_raw(w.PIN_ARTIFACT, pin(ws["id"], art["id"]), actor=who))["association"] == "confirmed"
    assert len((await catalog(bus, who, ws["id"]))["items"]) == 1


async def test_pin_reports_an_association_lost_to_a_delete_in_between(
    artifact: ArtifactOwner, bus: BusClient, who: Actor, ws_db: asyncpg.Connection
) -> None:
    ws = await create(bus, who)
    art = await artifact.register(bus, who)
    # Hold the artifact's row so that the retention waits inside the artifact service; meanwhile the
    # workspace is deleted. Then let the retention finish.
    holder = await asyncpg.connect(artifact.settings.database_url)
    watcher = await asyncpg.connect(artifact.settings.database_url)
    try:
        hold = holder.transaction()
        await hold.start()
        await holder.execute("SELECT 1 FROM artifacts WHERE id = $1 FOR UPDATE", art["id"])
        pinning = asyncio.create_task(bus.call_raw(w.PIN_ARTIFACT, pin(ws["id"], art["id"]), actor=who, timeout=90))

        async def retention_waits() -> bool:
            # Asked outside the holding transaction: pg_stat_activity is a snapshot within one.
            waiting = await watcher.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'"
            )
            return bool(waiting)

        await probe_until(retention_waits)
        await bus.call_raw(w.DELETE, {"workspace_id": ws["id"]}, actor=who)
        await hold.commit()
        reply = await pinning
    finally:
        await holder.close()
        await watcher.close()
    assert reply == {
        "artifact_id": art["id"],
        "retention": "retained",
        "association": "unconfirmed",
        "reason": "workspace_deleted",
    }
    assert await ws_db.fetchval("SELECT count(*) FROM associations WHERE workspace_id = $1", ws["id"]) == 0
    retained = await bus.call_raw(a.GET, {"artifact_id": art["id"]}, actor=who)
    assert retained["id"] == art["id"]
    check = await bus.call_raw(a.CHECK, {"refs": [{"kind": "artifact", "id": art["id"]}]}, actor=who)
    assert check["items"][0]["available"] is True


async def test_pin_refusals(artifact: ArtifactOwner, bus: BusClient, who: Actor, stranger: Actor) -> None:
    ws = await create(bus, who)
    theirs = await artifact.register(bus, stranger)
    with pytest.raises(NotFound):
        await bus.call_raw(w.PIN_ARTIFACT, pin(ws["id"], "art_missing"), actor=who)
    with pytest.raises(NotFound):  # exists, in another scope
        await bus.call_raw(w.PIN_ARTIFACT, pin(ws["id"], theirs["id"]), actor=who)
    mine = await artifact.register(bus, who)
    await bus.call_raw(w.ARCHIVE, {"workspace_id": ws["id"]}, actor=who)
    with pytest.raises(Conflict):
        await bus.call_raw(w.PIN_ARTIFACT, pin(ws["id"], mine["id"]), actor=who)
    assert (await catalog(bus, who, ws["id"]))["items"] == []


async def test_pin_with_the_artifact_service_down_reports_failed_retention(bus: BusClient, who: Actor) -> None:
    ws = await create(bus, who)
    reply = await bus.call_raw(w.PIN_ARTIFACT, pin(ws["id"], "art_somewhere"), actor=who)
    assert reply["retention"] == "failed" and reply["association"] == "unconfirmed" and reply["reason"]
    assert await catalog(bus, who, ws["id"]) == {"items": [], "complete": True, "omitted": 0, "next_cursor": None}
