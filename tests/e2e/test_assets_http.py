"""Sources, assets and evidence through the gateway's HTTP API on the whole local stack."""

from __future__ import annotations

import hashlib
import os
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support import documents
from tests.support.api import Api, error_of, scoped_client
from tests.support.stack import ROOT_SCOPE, RunningStack


@pytest.fixture
def api(stack: RunningStack) -> httpx.Client:
    with scoped_client(stack, timeout=120) as c:
        yield c


def upload(api: httpx.Client, source_id: str, data: bytes, name: str = "file.pdf", **fields: str) -> httpx.Response:
    return api.post("/v1/assets", data={"source_id": source_id, **fields}, files={"file": (name, data)})


def test_health_includes_assets(stack: RunningStack) -> None:
    r = httpx.get(f"{stack.url}/v1/health")
    assert r.status_code == 200 and r.json()["services"]["assets"] == "ok"


def test_whole_lifecycle(api: httpx.Client) -> None:
    first = documents.pdf(["Fund X meets redemptions from cash."])
    r = upload(api, "fund-x", first, workspace_id="ws_1")
    assert r.status_code == 201
    v1 = r.json()
    assert v1["version"] == 1 and v1["status"] == "active" and v1["reused"] is False
    assert v1["content_hash"] == hashlib.sha256(first).hexdigest() and v1["size"] == len(first)
    assert v1["extraction"] == {"status": "complete", "units_total": 1, "units_extracted": 1, "notes": []}

    r = upload(api, "fund-x", first)
    assert r.status_code == 200 and r.json()["reused"] is True and r.json()["asset_id"] == v1["asset_id"]

    r = upload(api, "fund-x", documents.pdf(["Fund X gated redemptions."]))
    assert r.status_code == 201
    v2 = r.json()
    assert v2["version"] == 2 and v2["status"] == "active"

    r = upload(api, "fund-x", b"%PDF-1.7\n" + documents.random_bytes(2000))
    assert r.status_code == 201
    v3 = r.json()
    assert v3["version"] == 3 and v3["status"] == "failed" and v3["error"]

    source = api.get("/v1/sources/fund-x").json()
    assert source["active_version"] == 2
    assert [(v["version"], v["status"]) for v in source["versions"]] == [
        (1, "superseded"),
        (2, "active"),
        (3, "failed"),
    ]
    assert api.get(f"/v1/assets/{v1['asset_id']}").json()["status"] == "superseded"

    hits = api.get("/v1/evidence/search", params={"q": "gated redemptions"}).json()["items"]
    assert [(h["source_id"], h["version"], h["locator"]) for h in hits] == [("fund-x", 2, "page:1")]
    passage = api.get(f"/v1/evidence/{hits[0]['evidence_id']}")
    assert passage.status_code == 200
    assert passage.json()["text"] == "Fund X gated redemptions." and passage.json()["locator"] == "page:1"

    r = api.post("/v1/sources/fund-x/retire")
    assert r.status_code == 200 and r.json()["active_version"] is None
    assert {v["status"] for v in r.json()["versions"]} == {"retired"}
    r = api.get(f"/v1/evidence/{hits[0]['evidence_id']}")
    assert r.status_code == 409 and error_of(r)["details"]["reason"] == "retired"
    assert api.get("/v1/evidence/search", params={"q": "gated"}).json()["items"] == []


def test_scope_isolation(stack: RunningStack) -> None:
    data = documents.pdf(["The same bytes in two scopes."])
    with scoped_client(stack, timeout=120) as alice, scoped_client(stack, timeout=120) as bob:
        a, b = upload(alice, "shared", data).json(), upload(bob, "shared", data).json()
        assert a["asset_id"] != b["asset_id"] and b["reused"] is False
        hit = alice.get("/v1/evidence/search", params={"q": "bytes"}).json()["items"][0]
        for path in [f"/v1/assets/{a['asset_id']}", f"/v1/evidence/{hit['evidence_id']}"]:
            r = bob.get(path)
            assert r.status_code == 404 and error_of(r)["code"] == "not_found"
        with scoped_client(stack, timeout=120) as carol:
            assert carol.get("/v1/sources/shared").status_code == 404
            assert carol.post("/v1/sources/shared/retire").status_code == 404


def test_refused_uploads(api: httpx.Client) -> None:
    r = upload(api, "x", b"")
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "file"
    r = upload(api, "x", documents.random_bytes(), name="looks-like.pdf")
    assert r.status_code == 415 and error_of(r)["code"] == "unsupported"
    r = api.post("/v1/assets", files={"file": ("a.txt", b"hello")})
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "source_id"
    limit = 52_428_800
    r = upload(api, "x", b"a" * (limit + 1), name="big.txt")
    assert r.status_code == 413 and error_of(r)["details"]["limit"] == limit
    assert api.get("/v1/sources/x").status_code == 404  # nothing was recorded


def test_evidence_search_parameters(api: httpx.Client) -> None:
    for params in [{"q": ""}, {"q": "   "}, {"q": "x", "limit": 0}, {"q": "x", "limit": 101}, {}]:
        r = api.get("/v1/evidence/search", params=params)
        assert r.status_code == 422 and error_of(r)["code"] == "invalid", params
    upload(api, "many", documents.pdf([f"Collateral page {i}." for i in range(15)]))
    assert len(api.get("/v1/evidence/search", params={"q": "collateral"}).json()["items"]) == 10
    assert len(api.get("/v1/evidence/search", params={"q": "collateral", "limit": 3}).json()["items"]) == 3
    assert api.get("/v1/evidence/ev_missing").status_code == 404


def test_import_from_the_approved_root(stack: RunningStack, api: httpx.Client) -> None:
    docs = stack.approved_roots["docs"]
    name = f"{uuid.uuid4().hex[:8]}.html"
    (docs / name).write_bytes(b"<html><body><p>Imported memo.</p><script>alert(1)</script></body></html>")
    r = api.post("/v1/assets/import", json={"root": "docs", "path": name, "source_id": "memo"})
    assert r.status_code == 201 and r.json()["kind"] == "html" and r.json()["status"] == "active"
    r = api.post("/v1/assets/import", json={"root": "docs", "path": name, "source_id": "memo"})
    assert r.status_code == 200 and r.json()["reused"] is True

    outside = docs.parent / f"outside-{uuid.uuid4().hex[:8]}.txt"
    outside.write_text("secret")
    link = docs / f"link-{uuid.uuid4().hex[:8]}.txt"
    os.symlink(outside, link)
    for path in [f"../{outside.name}", str(outside), link.name]:
        r = api.post("/v1/assets/import", json={"root": "docs", "path": path, "source_id": "escape"})
        assert r.status_code == 422 and error_of(r)["details"]["field"] == "path", path
    r = api.post("/v1/assets/import", json={"root": "nope", "path": name, "source_id": "memo"})
    assert r.status_code == 422


def test_twenty_concurrent_identical_uploads(api: httpx.Client) -> None:
    data = documents.big_pdf(20, seed=11)
    with ThreadPoolExecutor(20) as pool:
        responses = list(pool.map(lambda _: upload(api, "race", data), range(20)))
    assert sorted(r.status_code for r in responses) == [200] * 19 + [201]
    assert len({r.json()["asset_id"] for r in responses}) == 1
    source = api.get("/v1/sources/race").json()
    assert [(v["version"], v["status"]) for v in source["versions"]] == [(1, "active")]


def test_a_scope_imports_from_its_own_roots_and_no_other_scopes(stack: RunningStack) -> None:
    private = stack.approved_roots["private"]
    name = f"{uuid.uuid4().hex[:8]}.txt"
    (private / name).write_text("Only the root scope may import this.\n")
    owner = Api(stack, scope=ROOT_SCOPE).http
    r = owner.post("/v1/assets/import", json={"root": "private", "path": name, "source_id": f"p{uuid.uuid4().hex[:6]}"})
    assert r.status_code == 201, r.text
    stranger = Api(stack).http
    r = stranger.post("/v1/assets/import", json={"root": "private", "path": name, "source_id": "p"})
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "root"
    assert error_of(r)["details"]["roots"] == ["docs"], "another scope's roots are not even named"
