"""Workspaces, catalog, pin and checkpoint through the gateway's HTTP API on the whole local stack.

The assets service is not on this branch; the rules that need it are covered by the service tests.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import httpx
import nats
import pytest

from shared.contracts import workspace as w
from shared.contracts.common import Event
from tests.support.api import all_items, error_of, gateway_client
from tests.support.probe import probe_until
from tests.support.stack import RunningStack


@pytest.fixture
def scope() -> str:
    return f"s{uuid.uuid4().hex[:8]}"


@pytest.fixture
def token(stack: RunningStack, scope: str) -> str:
    return stack.token(scope)


@pytest.fixture
def api(stack: RunningStack, token: str) -> Iterator[httpx.Client]:
    with gateway_client(base_url=stack.url, headers={"Authorization": f"Bearer {token}"}, timeout=30) as client:
        yield client


def new_workspace(api: httpx.Client, goal: str = "Assess Fund X's liquidity risk") -> dict[str, Any]:
    r = api.post("/v1/workspaces", json={"title": "Fund X", "goal": goal})
    assert r.status_code == 201
    return dict(r.json())


def test_workspace_goal_and_lifecycle(api: httpx.Client) -> None:
    ws = new_workspace(api)
    assert set(ws) == {"id", "title", "status", "goal", "created_at", "updated_at"}
    assert set(ws["goal"]) == {"version", "text", "created_at"} and ws["goal"]["version"] == 1
    assert api.get(f"/v1/workspaces/{ws['id']}").json() == ws
    assert ws["id"] in [x["id"] for x in all_items(api, "/v1/workspaces")]

    r = api.put(f"/v1/workspaces/{ws['id']}/goal", json={"text": "Which judgements still hold?", "expected_version": 1})
    assert r.status_code == 200 and r.json()["goal"]["version"] == 2
    r = api.put(f"/v1/workspaces/{ws['id']}/goal", json={"text": "late", "expected_version": 1})
    assert r.status_code == 409
    assert error_of(r)["code"] == "conflict" and error_of(r)["details"]["current_version"] == 2
    versions = all_items(api, f"/v1/workspaces/{ws['id']}/goal/versions")
    assert [v["version"] for v in versions] == [1, 2] and versions[0]["text"] == ws["goal"]["text"]

    r = api.put(f"/v1/workspaces/{ws['id']}/goal", json={"text": "x" * (1024 * 1024), "expected_version": 2})
    assert r.status_code == 413 and error_of(r)["code"] == "too_large"
    r = api.post("/v1/workspaces", json={"title": "big", "goal": "x" * (1024 * 1024)})
    assert r.status_code == 413

    assert api.post(f"/v1/workspaces/{ws['id']}/archive").json()["status"] == "archived"
    assert api.post(f"/v1/workspaces/{ws['id']}/unarchive").json()["status"] == "active"
    r = api.post("/v1/workspaces", json={"title": "t"})
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "goal"


async def test_twenty_concurrent_goal_updates_one_wins(stack: RunningStack, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60) as client:
        ws = (await client.post("/v1/workspaces", json={"title": "race", "goal": "g1"})).json()
        responses = await asyncio.gather(
            *(
                client.put(f"/v1/workspaces/{ws['id']}/goal", json={"text": f"goal {i}", "expected_version": 1})
                for i in range(20)
            )
        )
    assert sorted(r.status_code for r in responses) == [200] + [409] * 19


async def test_twenty_concurrent_checkpoint_puts_one_wins(stack: RunningStack, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60) as client:
        ws = (await client.post("/v1/workspaces", json={"title": "race", "goal": "g1"})).json()
        path = f"/v1/workspaces/{ws['id']}/checkpoint"
        responses = await asyncio.gather(
            *(client.put(path, json={"expected_revision": 0, "summary": f"writer {i}"}) for i in range(20))
        )
        assert sorted(r.status_code for r in responses) == [200] + [409] * 19
        assert all(error_of(r)["details"] == {"current_revision": 1} for r in responses if r.status_code == 409)
        revisions = (await client.get(f"{path}/revisions")).json()["items"]
    assert [r["revision"] for r in revisions] == [1]


def test_checkpoint_over_http(api: httpx.Client) -> None:
    ws = new_workspace(api)
    path = f"/v1/workspaces/{ws['id']}/checkpoint"
    r = api.get(path)
    assert r.status_code == 404 and error_of(r)["code"] == "not_found"
    first = api.put(path, json={"expected_revision": 0, "summary": "A holds.", "add_questions": ["Q1", "Q2"]}).json()
    assert first["revision"] == 1 and first["advisory"] is True and first["status"] == "valid"
    assert set(first) == {
        "revision",
        "status",
        "advisory",
        "summary",
        "open_questions",
        "derived_from",
        "unavailable_sources",
        "author",
        "created_at",
    }
    q1 = first["open_questions"][0]["id"]
    second = api.put(path, json={"expected_revision": 1, "add_questions": ["Q3"]}).json()
    assert second["summary"] == "A holds." and [q["status"] for q in second["open_questions"]] == ["open"] * 3
    third = api.put(path, json={"expected_revision": 2, "resolve_questions": [q1]}).json()
    assert [q["status"] for q in third["open_questions"]] == ["resolved", "open", "open"]
    r = api.put(path, json={"expected_revision": 3, "resolve_questions": ["q_nope"]})
    assert r.status_code == 409 and error_of(r)["details"]["field"] == "resolve_questions"
    r = api.put(path, json={"expected_revision": 1, "summary": "stale"})
    assert r.status_code == 409 and error_of(r)["details"]["current_revision"] == 3
    assert [c["revision"] for c in all_items(api, f"{path}/revisions")] == [1, 2, 3]


async def _workspace_events(options: dict[str, Any], scope: str, seen: list[Event]) -> nats.NATS:
    nc = await nats.connect(**options)

    async def record(msg: Any) -> None:
        event = Event.model_validate_json(msg.data)
        if event.scope == scope:
            seen.append(event)

    await nc.subscribe("dossier.evt.workspace.>", cb=record)
    await nc.flush()
    return nc


async def _associations(stack: RunningStack, workspace_id: str) -> int:
    conn = await asyncpg.connect(stack.dsn("workspace"))
    try:
        return int(await conn.fetchval("SELECT count(*) FROM associations WHERE workspace_id = $1", workspace_id))
    finally:
        await conn.close()


async def test_catalog_pin_and_delete_leave_other_records_readable(stack: RunningStack, token: str, scope: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=30) as api:
        ws = (await api.post("/v1/workspaces", json={"title": "Fund X", "goal": "g"})).json()
        wid = ws["id"]
        pub = (await api.post("/v1/publications", json={"title": "Report A", "body": "A", "workspace_id": wid})).json()

        async def catalogued() -> dict[str, Any] | None:
            page = (await api.get(f"/v1/workspaces/{wid}/catalog")).json()
            return page if page["items"] else None

        page = await probe_until(catalogued)
        assert page == {
            "items": [
                {
                    "kind": "publication",
                    "id": pub["id"],
                    "version": 1,
                    "title": "Report A",
                    "created_at": page["items"][0]["created_at"],
                    "run_id": None,
                    "available": True,
                    "reason": None,
                }
            ],
            "complete": True,
            "omitted": 0,
            "next_cursor": None,
        }

        files = {"file": ("chart.html", b"<!doctype html><p>chart</p>", "text/html")}
        art = (await api.post("/v1/artifacts", files=files, data={"title": "Chart"})).json()
        r = await api.post(f"/v1/workspaces/{wid}/artifacts", json={"artifact_id": art["id"]})
        assert r.status_code == 201
        assert r.json() == {
            "artifact_id": art["id"],
            "retention": "retained",
            "association": "confirmed",
            "reason": None,
        }
        r = await api.post(f"/v1/workspaces/{wid}/artifacts", json={"artifact_id": "art_missing"})
        assert r.status_code == 404

        top = (await api.get(f"/v1/workspaces/{wid}/catalog", params={"limit": 1})).json()
        assert [i["id"] for i in top["items"]] == [art["id"]] and top["complete"] is False and top["omitted"] == 1
        # The omitted item is a page away: the cursor names it.
        rest = (await api.get(f"/v1/workspaces/{wid}/catalog", params={"cursor": top["next_cursor"]})).json()
        assert [i["id"] for i in rest["items"]] == [pub["id"]] and rest["complete"] is True
        assert rest["next_cursor"] is None and rest["omitted"] == 0
        r = await api.get(f"/v1/workspaces/{wid}/catalog", params={"cursor": "not-a-cursor"})
        assert r.status_code == 422 and error_of(r)["details"]["field"] == "cursor"
        for bad in ("0", "201", "many"):
            r = await api.get(f"/v1/workspaces/{wid}/catalog", params={"limit": bad})
            assert r.status_code == 422 and error_of(r)["details"]["field"] == "limit"

        seen: list[Event] = []
        nc = await _workspace_events(stack.events_options(), scope, seen)
        try:
            assert (await api.delete(f"/v1/workspaces/{wid}")).status_code == 204
            # Records other services own stay readable, exactly as they were.
            r = await api.get(f"/v1/publications/{pub['id']}/versions/1")
            assert r.status_code == 200 and r.json()["body"] == "A"
            r = await api.get(f"/v1/artifacts/{art['id']}/content")
            assert r.status_code == 200 and r.content == b"<!doctype html><p>chart</p>"
            # A late publication for the deleted workspace: published, never associated, refusal announced.
            late = (
                await api.post("/v1/publications", json={"title": "Late", "body": "late", "workspace_id": wid})
            ).json()

            async def refused() -> Event | None:
                found = [e for e in seen if e.type == w.EVT_ASSOCIATION_REFUSED and e.data["ref_id"] == late["id"]]
                return found[0] if found else None

            event = await probe_until(refused)
            assert event.data["workspace_id"] == wid and event.data["reason"] == "workspace_deleted"
            assert next(e.type for e in seen if e.data.get("workspace_id") == wid) == w.EVT_DELETED
        finally:
            await nc.close()
        assert await _associations(stack, wid) == 0
        assert (await api.get(f"/v1/workspaces/{wid}")).status_code == 404
        assert (await api.get(f"/v1/publications/{late['id']}/versions/1")).status_code == 200


def test_other_scope_gets_404_on_every_workspace_route(stack: RunningStack, api: httpx.Client) -> None:
    ws = new_workspace(api)
    wid = ws["id"]
    api.put(f"/v1/workspaces/{wid}/checkpoint", json={"expected_revision": 0, "summary": "mine"})
    routes: list[tuple[str, str, dict[str, Any] | None]] = [
        ("GET", f"/v1/workspaces/{wid}", None),
        ("PUT", f"/v1/workspaces/{wid}/goal", {"text": "theirs", "expected_version": 1}),
        ("GET", f"/v1/workspaces/{wid}/goal/versions", None),
        ("POST", f"/v1/workspaces/{wid}/archive", None),
        ("POST", f"/v1/workspaces/{wid}/unarchive", None),
        ("GET", f"/v1/workspaces/{wid}/catalog", None),
        ("POST", f"/v1/workspaces/{wid}/sources", {"source_id": "S1"}),
        ("POST", f"/v1/workspaces/{wid}/artifacts", {"artifact_id": "art_1"}),
        ("GET", f"/v1/workspaces/{wid}/checkpoint", None),
        ("PUT", f"/v1/workspaces/{wid}/checkpoint", {"expected_revision": 1, "summary": "theirs"}),
        ("GET", f"/v1/workspaces/{wid}/checkpoint/revisions", None),
        ("DELETE", f"/v1/workspaces/{wid}", None),
    ]
    other = {"Authorization": f"Bearer {stack.token(f'x{uuid.uuid4().hex[:8]}')}"}
    with gateway_client(base_url=stack.url, headers=other, timeout=30) as stranger:
        for method, path, body in routes:
            foreign = stranger.request(method, path, json=body)
            missing = api.request(method, path.replace(wid, "ws_missing"), json=body)
            assert foreign.status_code == 404 and missing.status_code == 404, (method, path)
            assert error_of(foreign)["code"] == "not_found", (method, path)
            assert error_of(foreign)["message"] == error_of(missing)["message"], (method, path)
        assert wid not in [x["id"] for x in all_items(stranger, "/v1/workspaces")]
    assert api.get(f"/v1/workspaces/{wid}").json() == ws
    assert api.get(f"/v1/workspaces/{wid}/checkpoint").json()["summary"] == "mine"

    # After a delete, every route answers 404 for the owner too.
    assert api.delete(f"/v1/workspaces/{wid}").status_code == 204
    for method, path, body in routes:
        assert api.request(method, path, json=body).status_code == 404, (method, path)
