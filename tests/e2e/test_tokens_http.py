"""API tokens through the gateway (docs/api.md): expiry, listing with cursors, revocation, who may call what."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import httpx
import pytest

from tests.support.api import gateway_client, probe
from tests.support.stack import RunningStack


def admin(stack: RunningStack) -> httpx.Client:
    return gateway_client(base_url=stack.url, headers={"Authorization": f"Bearer {stack.admin_token}"}, timeout=30)


def as_user(stack: RunningStack, token: str, path: str = "/v1/workspaces") -> httpx.Response:
    return httpx.get(f"{stack.url}{path}", headers={"Authorization": f"Bearer {token}"}, timeout=30)


def scope() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


def test_issue_with_expiry_then_401_once_expired(stack: RunningStack) -> None:
    with admin(stack) as api:
        r = api.post("/v1/admin/tokens", json={"scope": scope(), "principal": "alice", "expires_in": 5})
    assert r.status_code == 201, r.text
    issued = r.json()
    assert set(issued) == {"id", "token", "scope", "principal", "expires_at"}
    assert issued["id"].startswith("tok_") and issued["token"].startswith("dsk_")
    assert datetime.fromisoformat(issued["expires_at"]).utcoffset() == timedelta(0)

    assert as_user(stack, issued["token"]).status_code == 200

    def refused() -> httpx.Response | None:
        r = as_user(stack, issued["token"])
        return r if r.status_code == 401 else None

    expired = probe(refused, timeout=30)
    assert expired.json()["error"]["code"] == "unauthenticated"
    assert "expired" in expired.json()["error"]["message"]


def test_a_token_without_expiry_says_null(stack: RunningStack) -> None:
    with admin(stack) as api:
        issued = api.post("/v1/admin/tokens", json={"scope": scope(), "principal": "bob"}).json()
    assert issued["expires_at"] is None


def test_revoke_refuses_the_token_within_five_seconds(stack: RunningStack) -> None:
    with admin(stack) as api:
        issued = api.post("/v1/admin/tokens", json={"scope": scope(), "principal": "carol"}).json()
        assert as_user(stack, issued["token"]).status_code == 200  # resolved, so now cached
        assert api.delete(f"/v1/admin/tokens/{issued['id']}").status_code == 204
        # The contract's bound: a revoked token answers 401 within 5 seconds.
        probe(lambda: as_user(stack, issued["token"]).status_code == 401, timeout=5)
        again = api.delete(f"/v1/admin/tokens/{issued['id']}")
        assert again.status_code == 404 and again.json()["error"]["code"] == "not_found"
        listed = api.get("/v1/admin/tokens", params={"scope": issued["scope"]}).json()
        assert listed == {"items": [], "next_cursor": None}


def test_list_pages_with_a_cursor_and_never_shows_the_secret(stack: RunningStack) -> None:
    tenant = scope()
    with admin(stack) as api:
        issued = [api.post("/v1/admin/tokens", json={"scope": tenant, "principal": f"p{i}"}).json() for i in range(5)]
        api.post("/v1/admin/tokens", json={"scope": scope(), "principal": "elsewhere"})
        seen: list[dict[str, object]] = []
        pages, cursor = 0, None
        while True:
            params: dict[str, object] = {"scope": tenant, "limit": 2} | ({"cursor": cursor} if cursor else {})
            page = api.get("/v1/admin/tokens", params=params).json()
            assert set(page) == {"items", "next_cursor"} and len(page["items"]) <= 2
            seen.extend(page["items"])
            pages += 1
            cursor = page["next_cursor"]
            if cursor is None:
                break
    assert pages == 3
    assert [t["id"] for t in seen] == [t["id"] for t in issued]  # oldest first, each exactly once
    for item in seen:
        assert set(item) == {"id", "scope", "principal", "expires_at", "created_at"}
        assert item["scope"] == tenant
    secrets = {t["token"] for t in issued}
    assert not any(s in str(seen) for s in secrets)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 501}, "limit"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"scope": "bad scope!"}, "scope"),
    ],
)
def test_list_rejects_bad_query(stack: RunningStack, params: dict[str, object], field: str) -> None:
    with admin(stack) as api:
        r = api.get("/v1/admin/tokens", params=params)
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == field


@pytest.mark.parametrize("expires_in", [0, -5, 10 * 365 * 24 * 3600 + 1, "soon", 1.5])
def test_issue_rejects_bad_expiry(stack: RunningStack, expires_in: object) -> None:
    with admin(stack) as api:
        r = api.post("/v1/admin/tokens", json={"scope": scope(), "principal": "x", "expires_in": expires_in})
    assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "expires_in"


def test_revoke_unknown_or_malformed_ids(stack: RunningStack) -> None:
    with admin(stack) as api:
        for token_id in ("tok_0123456789abcdef01234567", "nothing-like-an-id", "tok_%2E%2E"):
            r = api.delete(f"/v1/admin/tokens/{token_id}")
            assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", token_id
        r = api.delete("/v1/admin/tokens/tok_%00")
        assert r.status_code == 422 and r.json()["error"]["details"]["field"] == "token_id"


def test_admin_and_user_tokens_stay_on_their_own_routes(stack: RunningStack) -> None:
    with admin(stack) as api:
        issued = api.post("/v1/admin/tokens", json={"scope": scope(), "principal": "dave"}).json()
    user = {"Authorization": f"Bearer {issued['token']}"}
    for method, path in (
        ("POST", "/v1/admin/tokens"),
        ("GET", "/v1/admin/tokens"),
        ("DELETE", f"/v1/admin/tokens/{issued['id']}"),
    ):
        r = httpx.request(method, f"{stack.url}{path}", headers=user, json={"scope": "x", "principal": "y"})
        assert r.status_code == 401 and r.json()["error"]["code"] == "unauthenticated", path
    assert as_user(stack, issued["token"]).status_code == 200  # its failed revoke did nothing
    for path in ("/v1/workspaces", "/v1/publications/pub_x", "/v1/runs/run_x"):
        assert as_user(stack, stack.admin_token, path).status_code == 401, path
