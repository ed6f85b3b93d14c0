"""One tenant's 24 slow uploads never stall another tenant's reads, and the other tenant's file is
extracted in its turn, not behind the whole queue. A stack of its own, with every parse made slow."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import asyncpg
import httpx
import pytest

from tests.support.api import gateway_client, probe
from tests.support.stack import RunningStack, start_stack, stop_stack

# It runs on a stack of its own: the local stack only (make test-containers deselects it).
pytestmark = pytest.mark.local_stack

UPLOADS = 24


@pytest.fixture(scope="module")
def slow_parse_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    env = {"DOSSIER_ASSETS_PARSE_DELAY_SECONDS": "2", "DOSSIER_EXTRACT_CONCURRENCY": "2"}
    running = start_stack(tmp_path_factory.mktemp("slow-parse-home"), extra_env=env)
    try:
        yield running
    finally:
        stop_stack(running.proc)


def client(stack: RunningStack, scope: str) -> httpx.Client:
    token = stack.token(scope)
    return gateway_client(base_url=stack.url, headers={"Authorization": f"Bearer {token}"}, timeout=300)


def upload(api: httpx.Client, source_id: str, text: str, **fields: str) -> httpx.Response:
    data = {"source_id": source_id, **fields}
    return api.post("/v1/assets", data=data, files={"file": (f"{source_id}.txt", text.encode())})


def statuses(stack: RunningStack, scope: str) -> dict[str, int]:
    async def fetch() -> dict[str, int]:
        conn = await asyncpg.connect(stack.dsn("assets"))
        try:
            rows = await conn.fetch(
                "SELECT v.status, count(*) AS n FROM asset_versions v JOIN sources s ON s.pk = v.source_pk"
                " WHERE s.scope = $1 GROUP BY v.status",
                scope,
            )
        finally:
            await conn.close()
        return {r["status"]: int(r["n"]) for r in rows}

    return asyncio.run(fetch())


def unsettled(stack: RunningStack, scope: str) -> int:
    counts = statuses(stack, scope)
    return counts.get("registered", 0) + counts.get("extracting", 0)


@pytest.mark.timeout(300)
def test_a_tenants_slow_uploads_never_stall_another_tenants_reads(slow_parse_stack: RunningStack) -> None:
    busy, other = f"busy{uuid.uuid4().hex[:6]}", f"other{uuid.uuid4().hex[:6]}"
    with client(slow_parse_stack, busy) as a, client(slow_parse_stack, other) as b:
        ws = b.post("/v1/workspaces", json={"title": "B", "goal": "Fund Y"}).json()
        r = upload(b, "fund-y", "Fund Y keeps a liquidity buffer of twelve percent.", workspace_id=ws["id"])
        assert r.status_code == 201 and r.json()["status"] == "active"
        probe(lambda: len(b.get(f"/v1/workspaces/{ws['id']}/catalog").json()["items"]) == 1)

        with ThreadPoolExecutor(UPLOADS) as pool:
            texts = [f"Fund X note {i}: redemptions were met from cash on day {i}." for i in range(UPLOADS)]
            pending: list[Future[httpx.Response]] = [
                pool.submit(upload, a, f"note-{i}", text) for i, text in enumerate(texts)
            ]
            # Every upload of the busy tenant is registered: two are being parsed, the rest wait their turn.
            probe(lambda: statuses(slow_parse_stack, busy) == {"extracting": 2, "registered": UPLOADS - 2}, timeout=60)

            search = b.get("/v1/evidence/search", params={"q": "liquidity buffer"})
            catalog = b.get(f"/v1/workspaces/{ws['id']}/catalog")
            source = b.get("/v1/sources/fund-y")
            assert search.status_code == 200 and search.json()["items"], search.text
            evidence = b.get(f"/v1/evidence/{search.json()['items'][0]['evidence_id']}")
            assert evidence.status_code == 200 and "twelve percent" in evidence.json()["text"]
            assert catalog.status_code == 200 and catalog.json()["items"][0]["available"] is True, catalog.text
            assert source.status_code == 200 and source.json()["active_version"] == 1
            assert unsettled(slow_parse_stack, busy) >= UPLOADS - 4, "the reads waited for the busy tenant's queue"

            # The other tenant's new file takes the next turn, not the back of the busy tenant's queue.
            r = upload(b, "fund-y", "Fund Y raised its buffer to fifteen percent.")
            assert r.status_code == 201 and r.json()["status"] == "active" and r.json()["version"] == 2
            assert unsettled(slow_parse_stack, busy) >= UPLOADS - 8, "it waited behind the whole queue"

            replies = [f.result() for f in pending]
        assert [r.status_code for r in replies] == [201] * UPLOADS
        assert {r.json()["status"] for r in replies} == {"active"}
