"""Cursor paging on every list route (docs/api.md), on the whole stack.

`limit` is 1–500 (default 100); following `next_cursor` returns every item exactly once in the documented
order, even while rows are being inserted; `next_cursor` is null on the last page; a cursor the list did not
give out answers 422 `invalid` naming `cursor`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.support.api import Api
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.stack import RunningStack

WORKSPACES = 1000


async def create_workspaces(stack: RunningStack, token: str, count: int, prefix: str) -> list[str]:
    """`count` workspaces over HTTP, 16 requests in flight at a time."""
    limits = asyncio.Semaphore(16)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60) as client:

        async def one(i: int) -> str:
            async with limits:
                r = await client.post("/v1/workspaces", json={"title": f"{prefix}{i}", "goal": "g"})
                assert r.status_code == 201, r.text
                return str(r.json()["id"])

        return list(await asyncio.gather(*(one(i) for i in range(count))))


async def page_through(stack: RunningStack, token: str, limit: int) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"}
    seen: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": limit}
    async with httpx.AsyncClient(base_url=stack.url, headers=headers, timeout=60) as client:
        while True:
            r = await client.get("/v1/workspaces", params=params)
            assert r.status_code == 200, r.text
            page = r.json()
            assert set(page) == {"items", "next_cursor"} and len(page["items"]) <= limit
            seen += page["items"]
            if page["next_cursor"] is None:
                return seen
            assert len(page["items"]) == limit
            params = {"limit": limit, "cursor": page["next_cursor"]}


def test_a_thousand_workspaces_page_by_page(stack: RunningStack) -> None:
    api = Api(stack)
    token = stack.token(api.scope)
    made = asyncio.run(create_workspaces(stack, token, WORKSPACES, "W"))

    async def list_while_inserting() -> tuple[list[dict[str, Any]], list[str]]:
        # Newer workspaces arrive while the pages are read: none of them may duplicate or push out an older one.
        listed, late = await asyncio.gather(page_through(stack, token, 70), create_workspaces(stack, token, 50, "L"))
        return listed, late

    listed, late = asyncio.run(list_while_inserting())
    ids = [w["id"] for w in listed]
    assert len(ids) == len(set(ids)), "an item was listed twice"
    assert set(made) <= set(ids), "an item that existed before paging began was skipped"
    assert set(ids) <= set(made) | set(late)
    keys = [(w["created_at"], w["id"]) for w in listed]
    assert keys == sorted(keys, reverse=True), "not newest first"

    first = api.ok("GET", "/v1/workspaces")
    assert len(first["items"]) == 100 and first["next_cursor"] is not None
    widest = api.ok("GET", "/v1/workspaces", params={"limit": 500})
    assert len(widest["items"]) == 500
    everything = api.items("/v1/workspaces", limit=500)
    assert len(everything) == WORKSPACES + len(late)
    for bad in ("0", "501", "-1", "x"):
        r = api.http.get("/v1/workspaces", params={"limit": bad})
        assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "limit", r.text


@pytest.fixture(scope="module")
def finished_run(stack: RunningStack) -> tuple[Api, dict[str, Any]]:
    api = Api(stack)
    ws = api.workspace()
    history = []
    for i in range(4):
        pub = api.publish(f"Report {i}: Fund X liquidity", f"Fund X redemptions take {30 * (i + 1)} days.", ws["id"])
        history.append({"publication_id": pub["id"], "version": 1})
    api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])
    run = api.wait_run(api.start_run(ws["id"], "Does Fund X liquidity still hold?", history=history)["id"])
    assert run["status"] == "completed", run["error"]
    return api, run


@pytest.mark.parametrize(("route", "key"), [("ledger", "seq"), ("files", "path")])
def test_ledger_and_files_page_by_page(finished_run: tuple[Api, dict[str, Any]], route: str, key: str) -> None:
    api, run = finished_run
    path = f"/v1/runs/{run['id']}/{route}"
    whole = api.ok("GET", path, params={"limit": 500})
    assert whole["next_cursor"] is None and len(whole["items"]) >= 5
    for limit in (1, 2, 3):
        assert api.items(path, limit=limit) == whole["items"]
    order = [item[key] for item in whole["items"]]
    assert order == sorted(order) and len(set(order)) == len(order)
    if route == "ledger":
        assert order == list(range(1, len(order) + 1))
    first = api.ok("GET", path, params={"limit": 2})
    assert len(first["items"]) == 2 and first["next_cursor"] is not None


def test_bad_cursors_are_invalid_on_every_list(finished_run: tuple[Api, dict[str, Any]]) -> None:
    api, run = finished_run
    pub = run["publication"]["id"]
    lists = [
        "/v1/workspaces",
        f"/v1/workspaces/{run['workspace_id']}/goal/versions",
        f"/v1/workspaces/{run['workspace_id']}/checkpoint/revisions",
        f"/v1/workspaces/{run['workspace_id']}/runs",
        f"/v1/workspaces/{run['workspace_id']}/catalog",
        f"/v1/runs/{run['id']}/catalog",
        f"/v1/runs/{run['id']}/ledger",
        f"/v1/runs/{run['id']}/files",
        f"/v1/conversations/{run['conversation_id']}",
        f"/v1/publications/{pub}",
        "/v1/sources/announcement",
    ]
    for path in lists:
        for bad in ("garbage!", "eyJ4IjogMX0", "WyJub3QgYSB0aW1lIiwgMV0", "W10", "bnVsbA", "x" * 1001):
            r = api.http.get(path, params={"cursor": bad})
            assert r.status_code == 422, (path, bad, r.status_code, r.text[:300])
            assert r.json()["error"]["code"] == "invalid" and r.json()["error"]["details"]["field"] == "cursor"
        page = api.ok("GET", path, params={"limit": 1})
        assert "next_cursor" in page, path


def test_nested_version_lists_page_too(stack: RunningStack) -> None:
    api = Api(stack)
    pub = api.publish("Report", "v1 body")
    for version in range(1, 5):
        api.revise(pub["id"], f"v{version + 1} body", version)
    versions = api.items(f"/v1/publications/{pub['id']}", key="versions", limit=2)
    assert [v["version"] for v in versions] == [1, 2, 3, 4, 5]
    head = api.ok("GET", f"/v1/publications/{pub['id']}", params={"limit": 2})
    assert head["latest_version"] == 5 and len(head["versions"]) == 2 and head["next_cursor"] is not None

    for i in range(3):
        api.upload(f"Fund X note number {i}.".encode(), "notes", f"n{i}.txt")
    source = api.ok("GET", "/v1/sources/notes", params={"limit": 1})
    assert source["active_version"] == 3 and len(source["versions"]) == 1
    versions = api.items("/v1/sources/notes", key="versions", limit=1)
    assert [v["version"] for v in versions] == [1, 2, 3]
