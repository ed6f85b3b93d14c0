"""An outside agent's session over HTTP, for e2e tests: the run it drives and the lease token it holds."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.api import Api


class Agent:
    """Run-bound calls of one session: `/v1/runs/{id}…` with the header `X-Run-Lease`."""

    def __init__(self, api: Api, run_id: str, token: str):
        self.api, self.run_id, self.token = api, run_id, token

    @classmethod
    def of(cls, api: Api, run: dict[str, Any]) -> Agent:
        """The session that admitted `run` (its answer holds the lease token)."""
        return cls(api, run["id"], run["lease"]["token"])

    def call(self, method: str, route: str, **kwargs: Any) -> httpx.Response:
        headers = {"X-Run-Lease": self.token} | kwargs.pop("headers", {})
        return self.api.http.request(method, f"/v1/runs/{self.run_id}{route}", headers=headers, **kwargs)

    def ok(self, method: str, route: str, **kwargs: Any) -> Any:
        r = self.call(method, route, **kwargs)
        assert r.status_code in (200, 204), f"{method} {route} → {r.status_code} {r.text[:500]}"
        return r.json() if r.content else None

    def write(self, path: str, text: str) -> httpx.Response:
        """A working file, sent as the route takes it: text/plain."""
        return self.call("PUT", f"/files/{path}", content=text.encode(), headers={"Content-Type": "text/plain"})

    def search(self, q: str, limit: int) -> list[dict[str, Any]]:
        return list(self.page(q, limit)["items"])

    def page(self, q: str, limit: int, cursor: str | None = None) -> dict[str, Any]:
        """One page of the run's search: `items` and the `next_cursor` of the page after it."""
        params: dict[str, Any] = {"q": q, "limit": limit} | ({"cursor": cursor} if cursor else {})
        return dict(self.ok("GET", "/search", params=params))
