"""Batch eligibility for other services, and the events the outbox records with each change."""

from __future__ import annotations

import asyncio
import json

from shared.contracts import assets as c
from tests.service.assets.conftest import AssetsUnderTest, actor
from tests.support import documents


async def test_batch_check_in_request_order(assets: AssetsUnderTest) -> None:
    who = actor()
    await assets.upload(who, "S", documents.pdf(["one"]))
    v2 = await assets.upload(who, "S", documents.pdf(["two"]), filename="two.pdf")
    await assets.upload(who, "S", b"%PDF-1.5\n" + documents.random_bytes(500))
    await assets.upload(who, "R", documents.pdf(["retired"]))
    await assets.bus.call_raw(c.RETIRE, {"source_id": "R"}, actor=who)
    await assets.upload(who, "F", b"%PDF-1.5\n" + documents.random_bytes(600))
    refs = [
        {"kind": "source", "id": "S", "version": 1},
        {"kind": "publication", "id": "S", "version": 1},
        {"kind": "source", "id": "S", "version": None},
        {"kind": "source", "id": "S", "version": 3},
        {"kind": "source", "id": "R", "version": None},
        {"kind": "source", "id": "F", "version": None},
        {"kind": "source", "id": "S", "version": 9},
        {"kind": "source", "id": "nope", "version": None},
    ]
    items = (await assets.bus.call_raw(c.CHECK, {"refs": refs}, actor=who))["items"]
    got = [(i["ref"]["kind"], i["ref"]["id"], i["ref"]["version"], i["available"], i["reason"]) for i in items]
    assert got == [
        ("source", "S", 1, False, "superseded"),
        ("publication", "S", 1, False, "not_found"),
        ("source", "S", 2, True, None),
        ("source", "S", 3, False, "failed"),
        ("source", "R", 1, False, "retired"),
        ("source", "F", 1, False, "failed"),
        ("source", "S", 9, False, "not_found"),
        ("source", "nope", None, False, "not_found"),
    ]
    active = items[2]
    assert active["content_hash"] == v2["content_hash"] and active["title"] == "two.pdf" and active["created_at"]
    stranger = (await assets.bus.call_raw(c.CHECK, {"refs": refs[:1]}, actor=actor()))["items"]
    assert stranger[0]["available"] is False and stranger[0]["reason"] == "not_found"


async def events(assets: AssetsUnderTest, scope: str) -> list[tuple[str, dict]]:
    async with assets.db() as conn:
        rows = await conn.fetch("SELECT type, payload FROM outbox WHERE scope = $1 ORDER BY seq", scope)
    return [(r["type"], json.loads(r["payload"])["data"]) for r in rows]


async def test_events_commit_with_each_change(assets: AssetsUnderTest) -> None:
    who = actor()
    data = documents.pdf(["v1"])
    v1 = await assets.upload(who, "S", data, workspace_id="ws_1")
    await assets.upload(who, "S", data, workspace_id="ws_2")
    v2 = await assets.upload(who, "S", documents.pdf(["v2"]))
    bad = await assets.upload(who, "S", b"%PDF-1.5\n" + documents.random_bytes(700))
    await assets.bus.call_raw(c.RETIRE, {"source_id": "S"}, actor=who)
    await assets.bus.call_raw(c.RETIRE, {"source_id": "S"}, actor=who)  # idempotent: no second event
    got = await events(assets, who.scope)
    assert [t for t, _ in got] == [
        c.EVT_ASSOCIATION_REQUESTED,
        c.EVT_VERSION_ACTIVATED,
        c.EVT_ASSOCIATION_REQUESTED,
        c.EVT_VERSION_ACTIVATED,
        c.EVT_VERSION_FAILED,
        c.EVT_SOURCE_RETIRED,
    ]
    association = {"source_id": "S", "asset_id": v1["asset_id"], "version": 1}
    assert got[0][1] == {"workspace_id": "ws_1", **association}
    assert got[2][1] == {"workspace_id": "ws_2", **association}
    assert got[1][1]["superseded"] is None and got[1][1]["extraction"]["status"] == "complete"
    assert got[3][1]["asset_id"] == v2["asset_id"] and got[3][1]["superseded"] == {
        "kind": "source",
        "id": "S",
        "version": 1,
    }
    assert got[4][1]["asset_id"] == bad["asset_id"] and got[4][1]["error"] == bad["error"]
    assert got[5][1] == {"source_id": "S", "versions": [1, 2, 3]}

    async def relayed() -> bool:
        async with assets.db() as conn:
            pending = await conn.fetchval(
                "SELECT count(*) FROM outbox WHERE scope = $1 AND published_at IS NULL", who.scope
            )
        return bool(pending == 0)

    for _ in range(100):
        if await relayed():
            break
        await asyncio.sleep(0.1)
    assert await relayed()
