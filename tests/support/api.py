"""A small HTTP client of the gateway for e2e tests, with probes that poll until a deadline."""

from __future__ import annotations

import time
import uuid
from typing import Any

import httpx

from tests.support.stack import RunningStack

FINAL = ("completed", "failed", "cancelled")


class ReadsAgain(httpx.HTTPTransport):
    """Asks a GET or HEAD once more when the connection closed as the request went out: the gateway closes a
    kept-alive connection idle past its deadline, or sheds one to make room when one address holds too many
    (services/gateway/transport/connections.py), and a request sent at that moment meets the close, as a
    browser's would; a browser asks again on a new connection, and so does this."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return super().handle_request(request)
        except httpx.RemoteProtocolError:
            if request.method not in ("GET", "HEAD"):
                raise
            return super().handle_request(request)


def gateway_client(**options: Any) -> httpx.Client:
    """An HTTP client of a gateway (`options` as httpx.Client takes them) that asks a read again as a browser
    does (ReadsAgain)."""
    return httpx.Client(transport=ReadsAgain(), **options)


def scoped_client(stack: RunningStack, scope: str | None = None, *, timeout: float = 30) -> httpx.Client:
    """An HTTP client of the gateway holding a token of `scope` (by default a scope of its own)."""
    token = stack.token(scope or f"s{uuid.uuid4().hex[:8]}")
    headers = {"Authorization": f"Bearer {token}"}
    return gateway_client(base_url=stack.url, headers=headers, timeout=timeout)


def error_of(r: httpx.Response) -> dict[str, Any]:
    """The error of an answer, which is the envelope and nothing else (docs/api.md)."""
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}, body
    return dict(body["error"])


class Api:
    def __init__(self, stack: RunningStack, scope: str | None = None):
        self.scope = scope or f"s{uuid.uuid4().hex[:10]}"
        self.http = scoped_client(stack, self.scope)

    def ok(self, method: str, path: str, expect: tuple[int, ...] = (200, 201, 202, 204), **kwargs: Any) -> Any:
        r = self.http.request(method, path, **kwargs)
        assert r.status_code in expect, f"{method} {path} → {r.status_code} {r.text[:500]}"
        if r.status_code == 204 or not r.content:
            return None
        return r.json() if r.headers.get("content-type", "").startswith("application/json") else r.text

    def items(self, path: str, *, key: str = "items", limit: int | None = None) -> list[Any]:
        return all_items(self.http, path, key=key, limit=limit)

    def workspace(self, goal: str = "Assess the liquidity risk of Fund X", title: str = "Fund X") -> dict[str, Any]:
        return dict(self.ok("POST", "/v1/workspaces", json={"title": title, "goal": goal}))

    def publish(self, title: str, body: str, workspace_id: str | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {"title": title, "body": body}
        if workspace_id:
            payload["workspace_id"] = workspace_id
        return dict(self.ok("POST", "/v1/publications", json=payload))

    def revise(self, pub_id: str, body: str, expected: int) -> dict[str, Any]:
        return dict(
            self.ok(
                "POST", f"/v1/publications/{pub_id}/versions", json={"body": body, "expected_latest_version": expected}
            )
        )

    def upload(self, data: bytes, source_id: str, filename: str, workspace_id: str | None = None) -> dict[str, Any]:
        fields = {"source_id": source_id} | ({"workspace_id": workspace_id} if workspace_id else {})
        return dict(self.ok("POST", "/v1/assets", data=fields, files={"file": (filename, data)}))

    def wait_catalog(self, workspace_id: str, count: int, timeout: float = 30) -> dict[str, Any]:
        """Associations arrive through events: wait until the catalog shows `count` items."""
        path = f"/v1/workspaces/{workspace_id}/catalog?limit=200"

        def ready() -> dict[str, Any] | None:
            catalog = self.ok("GET", path)
            return catalog if len(catalog["items"]) >= count else None

        return dict(probe(ready, timeout=timeout))

    def start_run(self, workspace_id: str, question: str, **extra: Any) -> dict[str, Any]:
        body = {"question": question, "request_id": extra.pop("request_id", uuid.uuid4().hex)} | extra
        return dict(self.ok("POST", f"/v1/workspaces/{workspace_id}/runs", json=body))

    def run(self, run_id: str) -> dict[str, Any]:
        return dict(self.ok("GET", f"/v1/runs/{run_id}"))

    def wait_run(self, run_id: str, timeout: float = 90) -> dict[str, Any]:
        def finished() -> dict[str, Any] | None:
            r = self.http.get(f"/v1/runs/{run_id}")
            if r.status_code == 504:  # runhost is restarting (crash tests); keep polling
                return None
            assert r.status_code == 200, r.text
            return r.json() if r.json()["status"] in FINAL else None

        return dict(probe(finished, timeout=timeout))

    def ledger(self, run_id: str) -> list[dict[str, Any]]:
        return self.items(f"/v1/runs/{run_id}/ledger")

    def files(self, run_id: str) -> dict[str, int]:
        return {f["path"]: f["size"] for f in self.items(f"/v1/runs/{run_id}/files")}

    def read(self, pub: dict[str, Any]) -> dict[str, Any]:
        return dict(self.ok("GET", f"/v1/publications/{pub['id']}/versions/{pub['version']}"))


def all_items(http: httpx.Client, path: str, *, key: str = "items", limit: int | None = None) -> list[Any]:
    """Every item of a paged list (docs/api.md), following `next_cursor` to the last page."""
    found: list[Any] = []
    params: dict[str, Any] = {} if limit is None else {"limit": limit}
    while True:
        r = http.get(path, params=params)
        assert r.status_code == 200, f"GET {path} → {r.status_code} {r.text[:500]}"
        page = r.json()
        found.extend(page[key])
        if page["next_cursor"] is None:
            return found
        params = {**params, "cursor": page["next_cursor"]}


def probe(check: Any, *, timeout: float = 30, interval: float = 0.1) -> Any:
    """Poll `check()` until it returns something truthy; fail at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)
