"""Associations: from events (effectively once), after delete and archive, and sources checked with their owner."""

from __future__ import annotations

import asyncpg
import pytest

from shared.bus import BusClient
from shared.contracts import publication as p
from shared.contracts import workspace as w
from shared.contracts.common import Actor, Event
from shared.errors import Conflict, NotFound, Timeout, Unavailable
from tests.service.workspace.conftest import catalog, create
from tests.support.owners import AssetsStandIn, EventTap, publish_event
from tests.support.probe import probe_until

# Every test here asks the workspace service.
pytestmark = pytest.mark.usefixtures("workspace")


async def associations_of(ws_db: asyncpg.Connection, workspace_id: str) -> list[tuple[str, str]]:
    rows = await ws_db.fetch("SELECT kind, ref_id FROM associations WHERE workspace_id = $1 ORDER BY seq", workspace_id)
    return [(r["kind"], r["ref_id"]) for r in rows]


async def refusal_for(events: EventTap, ref_id: str) -> Event:
    async def seen() -> Event | None:
        found = [e for e in events.of(w.EVT_ASSOCIATION_REFUSED) if e.data["ref_id"] == ref_id]
        return found[0] if found else None

    return await probe_until(seen)


@pytest.mark.usefixtures("publication")
async def test_publication_committed_is_associated_once(
    bus: BusClient, who: Actor, events: EventTap, ws_db: asyncpg.Connection
) -> None:
    ws = await create(bus, who)
    pub = await bus.call_raw(
        p.COMMIT, {"title": "Report A", "body": "A", "workspace_id": ws["id"], "run_id": "run_7"}, actor=who
    )

    async def associated() -> bool:
        return await associations_of(ws_db, ws["id"]) == [("publication", pub["id"])]

    await probe_until(associated)
    committed = await probe_until(lambda: _first(events, p.EVT_COMMITTED))
    # At-least-once delivery: the same event arrives again (another message id); the inbox absorbs it.
    await publish_event(bus._nc, type=committed.type, scope=committed.scope, data=committed.data, id=committed.id)
    marker = await create(bus, who)  # a later event on the same stream, to know the redelivery was consumed
    await publish_event(
        bus._nc, type=p.EVT_COMMITTED, scope=who.scope, data=committed.data | {"workspace_id": marker["id"]}
    )
    await probe_until(lambda: _has_rows(ws_db, marker["id"]))
    assert await associations_of(ws_db, ws["id"]) == [("publication", pub["id"])]
    page = await catalog(bus, who, ws["id"])
    assert page["omitted"] == 0 and [i["run_id"] for i in page["items"]] == ["run_7"]


async def _first(events: EventTap, type: str) -> Event | None:
    found = events.of(type)
    return found[0] if found else None


async def _has_rows(ws_db: asyncpg.Connection, workspace_id: str) -> bool:
    return bool(await ws_db.fetchval("SELECT count(*) FROM associations WHERE workspace_id = $1", workspace_id))


@pytest.mark.usefixtures("publication")
async def test_late_publication_after_delete_recreates_nothing(
    bus: BusClient, who: Actor, events: EventTap, ws_db: asyncpg.Connection
) -> None:
    ws = await create(bus, who)
    await bus.call_raw(w.ADMISSION, {"workspace_id": ws["id"], "run_id": "run_late"}, actor=who)
    await bus.call_raw(w.DELETE, {"workspace_id": ws["id"]}, actor=who)
    # The run finishes after the delete: it still publishes; the association is refused.
    pub = await bus.call_raw(
        p.COMMIT, {"title": "Late", "body": "late", "workspace_id": ws["id"], "run_id": "run_late"}, actor=who
    )
    refused = await refusal_for(events, pub["id"])
    assert refused.data == {
        "workspace_id": ws["id"],
        "kind": "publication",
        "ref_id": pub["id"],
        "version": 1,
        "run_id": "run_late",
        "reason": "workspace_deleted",
    }
    assert await associations_of(ws_db, ws["id"]) == []
    assert await ws_db.fetchval("SELECT status FROM workspaces WHERE id = $1", ws["id"]) == "deleted"
    with pytest.raises(NotFound):
        await bus.call_raw(w.GET, {"workspace_id": ws["id"]}, actor=who)
    # The publication itself is untouched and readable at its exact version.
    assert (await bus.call_raw(p.READ, {"id": pub["id"], "version": 1}, actor=who))["body"] == "late"


@pytest.mark.usefixtures("publication")
async def test_archived_workspace_takes_only_runs_admitted_before(
    bus: BusClient, who: Actor, events: EventTap, ws_db: asyncpg.Connection
) -> None:
    ws = await create(bus, who)
    wid = ws["id"]
    await bus.call_raw(w.ADMISSION, {"workspace_id": wid, "run_id": "run_before"}, actor=who)
    await bus.call_raw(w.ARCHIVE, {"workspace_id": wid}, actor=who)

    def commit(run_id: str | None) -> dict:
        return {"title": f"by {run_id}", "body": f"body {run_id}", "workspace_id": wid, "run_id": run_id}

    allowed = await bus.call_raw(p.COMMIT, commit("run_before"), actor=who)
    stranger_run = await bus.call_raw(p.COMMIT, commit("run_never_admitted"), actor=who)
    by_hand = await bus.call_raw(p.COMMIT, commit(None), actor=who)
    for pub in (stranger_run, by_hand):
        assert (await refusal_for(events, pub["id"])).data["reason"] == "workspace_archived"
    await probe_until(lambda: _has_rows(ws_db, wid))
    assert await associations_of(ws_db, wid) == [("publication", allowed["id"])]

    # The same rule for runhost's direct associations.
    run_ok = {"workspace_id": wid, "kind": "conversation", "ref_id": "conv_1", "run_id": "run_before"}
    assert (await bus.call_raw(w.ASSOCIATE, run_ok, actor=who))["association"] == "confirmed"
    run_no = {"workspace_id": wid, "kind": "conversation", "ref_id": "conv_2", "run_id": "run_after"}
    assert await bus.call_raw(w.ASSOCIATE, run_no, actor=who) == {
        "association": "refused",
        "reason": "workspace_archived",
    }
    # Confirmed once stays confirmed: asking again is idempotent.
    assert (await bus.call_raw(w.ASSOCIATE, run_ok | {"run_id": None}, actor=who))["association"] == "confirmed"


async def test_asset_association_requests_are_consumed(
    assets: AssetsStandIn, bus: BusClient, who: Actor, stranger: Actor, events: EventTap, ws_db: asyncpg.Connection
) -> None:
    ws = await create(bus, who)
    gone = await create(bus, who)
    await bus.call_raw(w.DELETE, {"workspace_id": gone["id"]}, actor=who)
    assets.put(who.scope, "S-upload", active=2, v1="superseded", v2=None)

    def request(workspace_id: str, source_id: str) -> dict:
        return {"workspace_id": workspace_id, "source_id": source_id, "asset_id": "ast_1", "version": 2}

    await publish_event(
        bus._nc, type=w.EVT_ASSET_ASSOCIATION_REQUESTED, scope=who.scope, data=request(ws["id"], "S-upload")
    )
    await publish_event(
        bus._nc, type=w.EVT_ASSET_ASSOCIATION_REQUESTED, scope=who.scope, data=request(gone["id"], "S-gone")
    )
    # An event of another scope naming this workspace must not reach it.
    await publish_event(
        bus._nc, type=w.EVT_ASSET_ASSOCIATION_REQUESTED, scope=stranger.scope, data=request(ws["id"], "S-x")
    )

    await probe_until(lambda: _has_rows(ws_db, ws["id"]))
    assert (await refusal_for(events, "S-gone")).data["reason"] == "workspace_deleted"
    page = await catalog(bus, who, ws["id"])
    assert [(i["kind"], i["id"], i["version"], i["available"]) for i in page["items"]] == [
        ("source", "S-upload", 2, True)
    ]
    assert await associations_of(ws_db, gone["id"]) == []


async def test_add_source_checks_the_owner(assets: AssetsStandIn, bus: BusClient, who: Actor, stranger: Actor) -> None:
    ws = await create(bus, who)
    assets.put(who.scope, "S1")
    assets.put(who.scope, "S-retired", active=None, v1="retired")
    assets.put(stranger.scope, "S-theirs")
    first = await bus.call_raw(w.ADD_SOURCE, {"workspace_id": ws["id"], "source_id": "S1"}, actor=who)
    assert first["kind"] == "source" and first["ref_id"] == "S1" and first["version"] == 1
    again = await bus.call_raw(w.ADD_SOURCE, {"workspace_id": ws["id"], "source_id": "S1"}, actor=who)
    assert again == first
    with pytest.raises(NotFound):
        await bus.call_raw(w.ADD_SOURCE, {"workspace_id": ws["id"], "source_id": "S-unknown"}, actor=who)
    with pytest.raises(NotFound):  # exists, in another scope
        await bus.call_raw(w.ADD_SOURCE, {"workspace_id": ws["id"], "source_id": "S-theirs"}, actor=who)
    with pytest.raises(Unavailable) as err:
        await bus.call_raw(w.ADD_SOURCE, {"workspace_id": ws["id"], "source_id": "S-retired"}, actor=who)
    assert err.value.details["reason"] == "retired"
    await assets.stop()
    with pytest.raises(Timeout):
        await bus.call_raw(w.ADD_SOURCE, {"workspace_id": ws["id"], "source_id": "S2"}, actor=who)
    await bus.call_raw(w.ARCHIVE, {"workspace_id": ws["id"]}, actor=who)
    with pytest.raises(Conflict):
        await bus.call_raw(w.ADD_SOURCE, {"workspace_id": ws["id"], "source_id": "S1"}, actor=who)
    assert [i["id"] for i in (await catalog(bus, who, ws["id"]))["items"]] == ["S1"]


async def test_conversations_and_runs_are_associated_but_not_catalogued(
    bus: BusClient, who: Actor, ws_db: asyncpg.Connection
) -> None:
    ws = await create(bus, who)
    for kind, ref_id in (("conversation", "conv_1"), ("run", "run_1"), ("run", "run_1")):
        reply = await bus.call_raw(w.ASSOCIATE, {"workspace_id": ws["id"], "kind": kind, "ref_id": ref_id}, actor=who)
        assert reply == {"association": "confirmed", "reason": None}
    assert await associations_of(ws_db, ws["id"]) == [("conversation", "conv_1"), ("run", "run_1")]
    assert await catalog(bus, who, ws["id"]) == {"items": [], "complete": True, "omitted": 0, "next_cursor": None}


async def test_a_run_publication_associated_before_its_commit_event_gets_its_title(
    bus: BusClient, who: Actor, ws_db: asyncpg.Connection
) -> None:
    """A run's finish and `publication.committed` both associate its publication, in either order: the later
    one fills in the title the first lacked, and a title once given stays."""
    ws = await create(bus, who)

    def committed(pub_id: str, title: str) -> dict:
        return {
            "id": pub_id,
            "version": 1,
            "title": title,
            "content_hash": "0" * 64,
            "workspace_id": ws["id"],
            "run_id": "run_r",
            "sources": [],
            "created_at": "2025-01-01T00:00:00Z",
        }

    async def title_of(pub_id: str) -> str | None:
        return await ws_db.fetchval(
            "SELECT title FROM associations WHERE workspace_id = $1 AND ref_id = $2", ws["id"], pub_id
        )

    # As an earlier run host's finish did: no title, before the event.
    untitled = {"workspace_id": ws["id"], "kind": "publication", "ref_id": "pub_race", "version": 1, "run_id": "run_r"}
    assert (await bus.call_raw(w.ASSOCIATE, untitled, actor=who))["association"] == "confirmed"
    await publish_event(bus._nc, type=p.EVT_COMMITTED, scope=who.scope, data=committed("pub_race", "What holds?"))
    await probe_until(lambda: _titled(ws_db, ws["id"], "pub_race"))
    assert await title_of("pub_race") == "What holds?"

    # The finish now names the title itself; the event that follows changes nothing.
    titled = untitled | {"ref_id": "pub_named", "title": "Named by the finish"}
    assert (await bus.call_raw(w.ASSOCIATE, titled, actor=who))["association"] == "confirmed"
    assert await title_of("pub_named") == "Named by the finish"
    await publish_event(bus._nc, type=p.EVT_COMMITTED, scope=who.scope, data=committed("pub_named", "Other"))
    marker = await create(bus, who)  # a later event on the same stream, to know the one before was consumed
    await publish_event(
        bus._nc, type=p.EVT_COMMITTED, scope=who.scope, data=committed("pub_m", "m") | {"workspace_id": marker["id"]}
    )
    await probe_until(lambda: _has_rows(ws_db, marker["id"]))
    assert await title_of("pub_named") == "Named by the finish"


async def _titled(ws_db: asyncpg.Connection, workspace_id: str, ref_id: str) -> bool:
    title = await ws_db.fetchval(
        "SELECT title FROM associations WHERE workspace_id = $1 AND ref_id = $2", workspace_id, ref_id
    )
    return title is not None
