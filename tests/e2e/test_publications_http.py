"""Publications through the gateway's HTTP API on the whole local stack."""

from __future__ import annotations

import hashlib
import uuid

import httpx
import pytest

from tests.support.api import error_of, gateway_client, scoped_client
from tests.support.stack import RunningStack


@pytest.fixture
def api(stack: RunningStack) -> httpx.Client:
    with scoped_client(stack, timeout=10) as client:
        yield client


def test_health_lists_services(stack: RunningStack) -> None:
    r = httpx.get(f"{stack.url}/v1/health")
    assert r.status_code == 200
    assert r.json()["status"] == "ok" and r.json()["services"]["publication"] == "ok"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer dsk_unknownunknownunknownunknown"},
        {"Authorization": "Basic abc"},
        {"Authorization": "Bearer"},
    ],
)
def test_unauthenticated_requests_get_401(stack: RunningStack, headers: dict[str, str]) -> None:
    r = httpx.get(f"{stack.url}/v1/publications/pub_x", headers=headers)
    assert r.status_code == 401 and error_of(r)["code"] == "unauthenticated"


def test_admin_token_only_on_admin_routes(stack: RunningStack, api: httpx.Client) -> None:
    admin = {"Authorization": f"Bearer {stack.admin_token}"}
    assert httpx.get(f"{stack.url}/v1/publications/pub_x", headers=admin).status_code == 401
    r = api.post("/v1/admin/tokens", json={"scope": "acme", "principal": "mallory"})
    assert r.status_code == 401
    r = httpx.post(f"{stack.url}/v1/admin/tokens", json={"scope": "bad scope!", "principal": "x"}, headers=admin)
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "scope"


def test_create_read_revise_withdraw(api: httpx.Client) -> None:
    r = api.post("/v1/publications", json={"title": "Report A", "body": "Fund X can meet redemptions."})
    assert r.status_code == 201
    v1 = r.json()
    assert v1["version"] == 1 and v1["content_hash"] == hashlib.sha256(b"Fund X can meet redemptions.").hexdigest()
    assert v1["sources"] == [] and v1["run_id"] is None and v1["status"] == "active"

    r = api.post(f"/v1/publications/{v1['id']}/versions", json={"body": "Fund X cannot.", "expected_latest_version": 1})
    assert r.status_code == 201 and r.json()["version"] == 2

    # Exact v1 after v2: the old conclusion stays readable as it was.
    r = api.get(f"/v1/publications/{v1['id']}/versions/1")
    assert r.status_code == 200 and r.json()["body"] == "Fund X can meet redemptions."
    summary = api.get(f"/v1/publications/{v1['id']}").json()
    assert summary["latest_version"] == 2 and len(summary["versions"]) == 2

    r = api.post(f"/v1/publications/{v1['id']}/versions", json={"body": "late", "expected_latest_version": 1})
    assert r.status_code == 409
    err = error_of(r)
    assert err["code"] == "conflict" and err["details"]["current_latest_version"] == 2

    r = api.post(f"/v1/publications/{v1['id']}/versions/1/withdraw", json={"reason": "superseded by facts"})
    assert r.status_code == 200 and r.json()["status"] == "withdrawn"
    r = api.get(f"/v1/publications/{v1['id']}/versions/1")
    assert r.status_code == 409
    err = error_of(r)
    assert err["code"] == "unavailable" and err["details"]["reason"] == "withdrawn"
    assert api.get(f"/v1/publications/{v1['id']}/versions/2").status_code == 200


def test_other_scope_gets_404_everywhere(stack: RunningStack, api: httpx.Client) -> None:
    pub = api.post("/v1/publications", json={"title": "T", "body": "B"}).json()
    other = {"Authorization": f"Bearer {stack.token(f's{uuid.uuid4().hex[:8]}')}"}
    with gateway_client(base_url=stack.url, headers=other) as stranger:
        responses = [
            stranger.get(f"/v1/publications/{pub['id']}"),
            stranger.get(f"/v1/publications/{pub['id']}/versions/1"),
            stranger.post(f"/v1/publications/{pub['id']}/versions", json={"body": "x", "expected_latest_version": 1}),
            stranger.post(f"/v1/publications/{pub['id']}/versions/1/withdraw", json={"reason": "x"}),
        ]
    missing = api.get("/v1/publications/pub_does_not_exist")
    assert [r.status_code for r in responses] == [404] * 4
    assert all(error_of(r)["code"] == "not_found" for r in responses)
    assert error_of(responses[0])["message"] == error_of(missing)["message"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"{not json", "body"),
        (b'{"title": "t"}', "body"),
        (b'{"title": "", "body": "b"}', "title"),
        (b'{"title": "t", "body": "b", "surprise": 1}', "surprise"),
        (b"[]", "body"),
    ],
)
def test_malformed_requests_get_422(api: httpx.Client, body: bytes, field: str) -> None:
    r = api.post("/v1/publications", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422
    err = error_of(r)
    assert err["code"] == "invalid" and err["details"]["field"] == field


def test_limits_answer_413(api: httpx.Client) -> None:
    r = api.post("/v1/publications", json={"title": "big", "body": "x" * (1024 * 1024 + 1)})
    assert r.status_code == 413 and error_of(r)["details"]["limit"] == 1024 * 1024
    r = api.post("/v1/publications", content=b"x" * (3 * 1024 * 1024), headers={"content-type": "application/json"})
    assert r.status_code == 413 and error_of(r)["code"] == "too_large"


def test_bad_path_values(api: httpx.Client) -> None:
    r = api.get("/v1/publications/pub_x/versions/abc")
    assert r.status_code == 422 and error_of(r)["details"]["field"] == "version"
    r = api.get("/v1/no-such-route")
    assert r.status_code == 404 and error_of(r)["code"] == "not_found"


def test_the_hot_read_answers_exactly_as_the_router_does(stack: RunningStack, api: httpx.Client) -> None:
    """services/gateway/transport/hot.py answers plain exact-version reads beside FastAPI's router; a query string
    sends the same read through the router. Both must give the same status, headers and bytes."""
    pub = api.post("/v1/publications", json={"title": "Hot", "body": "Fund X can meet redemptions. é"}).json()
    gone = api.post("/v1/publications", json={"title": "Gone", "body": "withdrawn"}).json()
    assert api.post(f"/v1/publications/{gone['id']}/versions/1/withdraw", json={"reason": "wrong"}).status_code == 200
    stranger = gateway_client(base_url=stack.url, headers={"Authorization": f"Bearer {stack.token('other-scope')}"})
    cases = [
        (api, f"/v1/publications/{pub['id']}/versions/1", 200),
        (api, f"/v1/publications/{pub['id']}/versions/01", 200),
        (api, f"/v1/publications/{pub['id']}/versions/2", 404),
        (api, f"/v1/publications/{pub['id']}/versions/0", 422),
        (api, "/v1/publications/pub_missing/versions/1", 404),
        (api, f"/v1/publications/{'p' * 201}/versions/1", 422),
        (api, f"/v1/publications/{gone['id']}/versions/1", 409),
        (stranger, f"/v1/publications/{pub['id']}/versions/1", 404),
    ]
    with stranger:
        for client, path, status in cases:
            hot, routed = client.get(path), client.get(path, params={"via": "router"})
            assert hot.status_code == routed.status_code == status, path
            assert hot.content == routed.content, path
            for header in ("content-type", "content-length"):
                assert hot.headers[header] == routed.headers[header], (path, header)
            assert hot.headers["x-request-id"].startswith("req_")
    assert hot.json()["error"]["code"] == "not_found"
    first = api.get(f"/v1/publications/{pub['id']}/versions/1").json()
    assert first["body"] == "Fund X can meet redemptions. é" and first["version"] == 1
    metrics = httpx.get(f"{stack.url}/metrics", headers={"Authorization": f"Bearer {stack.admin_token}"}).text
    template = "/v1/publications/{pub_id}/versions/{version}"
    assert f'dossier_http_requests_total{{method="GET",route="{template}",status="200"}}' in metrics
    assert f'dossier_http_requests_total{{method="GET",route="{template}",status="409"}}' in metrics


def test_the_hot_read_still_needs_a_token(stack: RunningStack, api: httpx.Client) -> None:
    pub = api.post("/v1/publications", json={"title": "Hot", "body": "text"}).json()
    r = httpx.get(f"{stack.url}/v1/publications/{pub['id']}/versions/1")
    assert r.status_code == 401 and error_of(r)["code"] == "unauthenticated"
    admin = {"Authorization": f"Bearer {stack.admin_token}"}
    assert httpx.get(f"{stack.url}/v1/publications/{pub['id']}/versions/1", headers=admin).status_code == 401
