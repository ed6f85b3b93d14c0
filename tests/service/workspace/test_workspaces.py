"""Workspaces, goals and the lifecycle over real NATS and PostgreSQL."""

from __future__ import annotations

import asyncio
import json

import asyncpg
import pytest

from shared.bus import BusClient
from shared.contracts import workspace as w
from shared.contracts.common import Actor, BusReply
from shared.errors import Conflict, Invalid, NotFound, TooLarge
from shared.settings import WorkspaceSettings
from tests.service.workspace.conftest import create
from tests.support.owners import EventTap
from tests.support.probe import probe_until

# Every test here asks the workspace service.
pytestmark = pytest.mark.usefixtures("workspace")


async def test_create_get_list(bus: BusClient, who: Actor, stranger: Actor) -> None:
    ws = await create(bus, who, title="  Fund X  ", goal="Assess liquidity risk")
    assert ws["id"].startswith("ws_") and ws["title"] == "Fund X" and ws["status"] == "active"
    assert ws["goal"]["version"] == 1 and ws["goal"]["text"] == "Assess liquidity risk"
    assert await bus.call_raw(w.GET, {"workspace_id": ws["id"]}, actor=who) == ws
    second = await create(bus, who)
    listed = (await bus.call_raw(w.LIST, {}, actor=who))["items"]
    assert [x["id"] for x in listed] == [second["id"], ws["id"]]
    assert (await bus.call_raw(w.LIST, {}, actor=stranger))["items"] == []


async def test_goal_is_compare_and_swap(bus: BusClient, who: Actor) -> None:
    ws = await create(bus, who, goal="v1 goal")
    v2 = await bus.call_raw(
        w.REVISE_GOAL, {"workspace_id": ws["id"], "text": "v2 goal", "expected_version": 1}, actor=who
    )
    assert v2["goal"]["version"] == 2 and v2["goal"]["text"] == "v2 goal"
    with pytest.raises(Conflict) as err:
        await bus.call_raw(w.REVISE_GOAL, {"workspace_id": ws["id"], "text": "late", "expected_version": 1}, actor=who)
    assert err.value.details == {"current_version": 2}
    versions = (await bus.call_raw(w.GOAL_VERSIONS, {"workspace_id": ws["id"]}, actor=who))["items"]
    assert [(v["version"], v["text"]) for v in versions] == [(1, "v1 goal"), (2, "v2 goal")]


async def test_twenty_concurrent_goal_updates_exactly_one_wins(bus: BusClient, who: Actor) -> None:
    ws = await create(bus, who)
    attempts = [
        bus.call_raw(w.REVISE_GOAL, {"workspace_id": ws["id"], "text": f"goal {i}", "expected_version": 1}, actor=who)
        for i in range(20)
    ]
    results = await asyncio.gather(*attempts, return_exceptions=True)
    winners = [r for r in results if isinstance(r, dict)]
    assert len(winners) == 1
    assert all(isinstance(r, Conflict) and r.details == {"current_version": 2} for r in results if r not in winners)
    versions = (await bus.call_raw(w.GOAL_VERSIONS, {"workspace_id": ws["id"]}, actor=who))["items"]
    assert [v["version"] for v in versions] == [1, 2] and versions[1]["text"] == winners[0]["goal"]["text"]


async def test_goal_and_title_limits(workspace: WorkspaceSettings, bus: BusClient, who: Actor) -> None:
    megabyte = "x" * (1024 * 1024)
    with pytest.raises(TooLarge) as err:
        await create(bus, who, goal=megabyte)
    assert err.value.details == {"field": "goal", "limit": workspace.max_goal_bytes}
    ws = await create(bus, who)
    with pytest.raises(TooLarge):
        await bus.call_raw(
            w.REVISE_GOAL, {"workspace_id": ws["id"], "text": megabyte, "expected_version": 1}, actor=who
        )
    with pytest.raises(Invalid):
        await create(bus, who, goal="   ")
    with pytest.raises(Invalid):
        await create(bus, who, title="t" * 501)
    with pytest.raises(Invalid) as bad:
        await bus.call_raw(w.REVISE_GOAL, {"workspace_id": ws["id"], "text": "x", "expected_version": 0}, actor=who)
    assert bad.value.details["field"] == "expected_version"
    assert (await bus.call_raw(w.GET, {"workspace_id": ws["id"]}, actor=who))["goal"]["version"] == 1


async def test_archive_and_unarchive(bus: BusClient, who: Actor, events: EventTap) -> None:
    ws = await create(bus, who)
    archived = await bus.call_raw(w.ARCHIVE, {"workspace_id": ws["id"]}, actor=who)
    assert archived["status"] == "archived"
    assert (await bus.call_raw(w.ARCHIVE, {"workspace_id": ws["id"]}, actor=who))["status"] == "archived"
    active = await bus.call_raw(w.UNARCHIVE, {"workspace_id": ws["id"]}, actor=who)
    assert active["status"] == "active" and active["goal"] == ws["goal"]

    async def seen() -> list[str]:
        types = [e.type for e in events.events if e.data.get("workspace_id") == ws["id"]]
        return types if w.EVT_UNARCHIVED in types else []

    # Archiving twice is one archive: one event, not two.
    assert await probe_until(seen) == [w.EVT_CREATED, w.EVT_ARCHIVED, w.EVT_UNARCHIVED]


async def test_delete_leaves_a_tombstone(bus: BusClient, who: Actor, ws_db: asyncpg.Connection) -> None:
    ws = await create(bus, who)
    wid = ws["id"]
    await bus.call_raw(w.REVISE_GOAL, {"workspace_id": wid, "text": "v2", "expected_version": 1}, actor=who)
    await bus.call_raw(w.CHECKPOINT_UPDATE, {"workspace_id": wid, "expected_revision": 0, "summary": "s"}, actor=who)
    await bus.call_raw(w.ASSOCIATE, {"workspace_id": wid, "kind": "conversation", "ref_id": "conv_1"}, actor=who)
    await bus.call_raw(w.ADMISSION, {"workspace_id": wid, "run_id": "run_1"}, actor=who)
    await bus.call_raw(w.DELETE, {"workspace_id": wid}, actor=who)

    row = await ws_db.fetchrow("SELECT status, title, deleted_at FROM workspaces WHERE id = $1", wid)
    assert row is not None and row["status"] == "deleted" and row["title"] == "" and row["deleted_at"] is not None
    for table in ("goal_versions", "checkpoint_revisions", "associations", "admissions"):
        assert await ws_db.fetchval(f"SELECT count(*) FROM {table} WHERE workspace_id = $1", wid) == 0, table

    # Never brought back: every request about the id answers as for a workspace that never existed.
    for subject in (w.GET, w.GOAL_VERSIONS, w.ARCHIVE, w.UNARCHIVE, w.DELETE, w.CHECKPOINT_GET):
        with pytest.raises(NotFound):
            await bus.call_raw(subject, {"workspace_id": wid}, actor=who)
    with pytest.raises(NotFound):
        await bus.call_raw(w.REVISE_GOAL, {"workspace_id": wid, "text": "again", "expected_version": 2}, actor=who)
    refused = await bus.call_raw(w.ASSOCIATE, {"workspace_id": wid, "kind": "run", "ref_id": "run_2"}, actor=who)
    assert refused == {"association": "refused", "reason": "workspace_deleted"}
    assert wid not in [x["id"] for x in (await bus.call_raw(w.LIST, {}, actor=who))["items"]]


async def test_every_change_emits_its_event(bus: BusClient, who: Actor, events: EventTap) -> None:
    ws = await create(bus, who)
    wid = ws["id"]
    await bus.call_raw(w.REVISE_GOAL, {"workspace_id": wid, "text": "v2", "expected_version": 1}, actor=who)
    await bus.call_raw(w.CHECKPOINT_UPDATE, {"workspace_id": wid, "expected_revision": 0, "summary": "s"}, actor=who)
    await bus.call_raw(w.ARCHIVE, {"workspace_id": wid}, actor=who)
    await bus.call_raw(w.UNARCHIVE, {"workspace_id": wid}, actor=who)
    await bus.call_raw(w.DELETE, {"workspace_id": wid}, actor=who)

    async def all_seen() -> list:
        mine = [e for e in events.events if e.data.get("workspace_id") == wid]
        return mine if any(e.type == w.EVT_DELETED for e in mine) else []

    mine = await probe_until(all_seen)
    assert [e.type for e in mine] == [
        w.EVT_CREATED,
        w.EVT_GOAL_REVISED,
        w.EVT_CHECKPOINT_REVISED,
        w.EVT_ARCHIVED,
        w.EVT_UNARCHIVED,
        w.EVT_DELETED,
    ]
    assert mine[1].data == {"workspace_id": wid, "version": 2}
    assert mine[2].data == {"workspace_id": wid, "revision": 1, "author": "user", "run_id": None}


async def test_other_scope_gets_not_found_on_every_request(bus: BusClient, who: Actor, stranger: Actor) -> None:
    ws = await create(bus, who)
    wid = ws["id"]
    await bus.call_raw(w.CHECKPOINT_UPDATE, {"workspace_id": wid, "expected_revision": 0, "summary": "s"}, actor=who)
    requests: list[tuple[str, dict]] = [
        (w.GET, {}),
        (w.REVISE_GOAL, {"text": "taken over", "expected_version": 1}),
        (w.GOAL_VERSIONS, {}),
        (w.ARCHIVE, {}),
        (w.UNARCHIVE, {}),
        (w.CATALOG, {}),
        (w.ADD_SOURCE, {"source_id": "S1"}),
        (w.PIN_ARTIFACT, {"artifact_id": "art_1"}),
        (w.ADMISSION, {"run_id": "run_x"}),
        (w.CHECKPOINT_GET, {}),
        (w.CHECKPOINT_UPDATE, {"expected_revision": 1, "summary": "taken over"}),
        (w.CHECKPOINT_REVISIONS, {}),
        (w.DELETE, {}),
    ]
    for subject, extra in requests:
        with pytest.raises(NotFound) as foreign:
            await bus.call_raw(subject, {"workspace_id": wid, **extra}, actor=stranger)
        with pytest.raises(NotFound) as missing:
            await bus.call_raw(subject, {"workspace_id": "ws_missing", **extra}, actor=who)
        assert foreign.value.message == missing.value.message, subject
        assert foreign.value.details == {"id": wid}, subject
    associate = {"workspace_id": wid, "kind": "conversation", "ref_id": "conv_x"}
    assert (await bus.call_raw(w.ASSOCIATE, associate, actor=stranger))["reason"] == "workspace_not_found"
    propose = {"workspace_id": wid, "expected_revision": 1, "summary": "taken over"}
    assert await bus.call_raw(w.CHECKPOINT_PROPOSE, propose, actor=stranger) == {
        "result": "invalid",
        "revision": None,
        "reason": "workspace_not_found",
    }
    # And the owner's workspace is exactly as it was.
    after = await bus.call_raw(w.GET, {"workspace_id": wid}, actor=who)
    assert after == ws
    assert (await bus.call_raw(w.CHECKPOINT_GET, {"workspace_id": wid}, actor=who))["revision"] == 1


async def test_malformed_requests_get_replies(bus: BusClient, who: Actor) -> None:
    with pytest.raises(Invalid) as err:
        await bus.call_raw(w.CREATE, {"title": "t"}, actor=who)
    assert err.value.details["field"] == "goal"
    with pytest.raises(Invalid):
        await bus.call_raw(w.GET, {"workspace_id": ""}, actor=who)
    raw = await bus._nc.request(w.CREATE, b"not json", timeout=5)
    assert b'"invalid"' in raw.data


async def test_unstorable_text_on_the_bus_is_invalid(bus: BusClient, who: Actor) -> None:
    """U+0000 (PostgreSQL refuses it) and a lone surrogate (no UTF-8 for it) answer `invalid` naming the field."""
    with pytest.raises(Invalid) as nul:
        await bus.call_raw(w.CREATE, {"title": "Fund\x00X", "goal": "g"}, actor=who)
    assert nul.value.details["field"] == "title"
    ws = await create(bus, who)
    with pytest.raises(Invalid) as nested:
        update = {"workspace_id": ws["id"], "expected_revision": 0, "add_questions": ["fine", "bad\x00"]}
        await bus.call_raw(w.CHECKPOINT_UPDATE, update, actor=who)
    assert nested.value.details["field"] == "add_questions.1"
    # A lone surrogate cannot even be encoded by a well-behaved sender; another one sends it escaped.
    envelope = {"actor": who.model_dump(), "data": {"title": "t", "goal": "half @ a pair"}}
    raw = json.dumps(envelope).replace("@", "\\ud800")
    reply = BusReply.model_validate_json((await bus._nc.request(w.CREATE, raw.encode(), timeout=5)).data)
    assert reply.error is not None and reply.error.code == "invalid" and reply.error.details["field"] == "goal"
    with pytest.raises(Invalid) as lone:
        await bus.call_raw(w.CREATE, {"title": "t", "goal": "half \ud800 a pair"}, actor=who)
    assert lone.value.details["field"] == "goal"


async def test_workspaces_page_by_cursor(bus: BusClient, who: Actor) -> None:
    made = [await create(bus, who, title=f"W{i}") for i in range(7)]
    seen: list[str] = []
    request: dict[str, object] = {"limit": 3}
    while True:
        page = await bus.call_raw(w.LIST, request, actor=who)
        assert len(page["items"]) <= 3
        seen += [x["id"] for x in page["items"]]
        if page["next_cursor"] is None:
            break
        request = {"limit": 3, "cursor": page["next_cursor"]}
    assert seen == [x["id"] for x in reversed(made)]
    for bad in ("not-a-cursor", "eyJhIjoxfQ", "W10"):
        with pytest.raises(Invalid) as err:
            await bus.call_raw(w.LIST, {"cursor": bad}, actor=who)
        assert err.value.details["field"] == "cursor"
    with pytest.raises(Invalid):
        await bus.call_raw(w.LIST, {"limit": 501}, actor=who)
