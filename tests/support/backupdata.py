"""Data of every kind in one scope, and everything it shows through the API: what a backup must bring back as
it was (tests/e2e/test_backup.py, the local stack; tests/e2e/test_compose_backup.py, the compose stack)."""

from __future__ import annotations

import hashlib
from typing import Any

import httpx

from tests.support.api import Api, all_items, gateway_client
from tests.support.documents import ANNOUNCEMENT, QUESTION, pdf
from tests.support.stack import RunningStack

REPORT = b"<!doctype html><html><body><h1>Chart of redemptions</h1></body></html>"


def same_caller(api: Api, stack: RunningStack) -> httpx.Client:
    """The restored stack, asked with the very token `api` was issued by the backed-up one."""
    return gateway_client(base_url=stack.url, headers=dict(api.http.headers), timeout=30)


def seed(api: Api, stack: RunningStack) -> dict[str, Any]:
    """Data of every kind in one scope: what `look` reads back."""
    ws = api.workspace()
    api.ok("PUT", f"/v1/workspaces/{ws['id']}/goal", json={"text": "Assess Fund X again", "expected_version": 1})
    a1 = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    api.revise(a1["id"], "Fund X liquidity is now weaker; redemptions may take 90 days.", 1)
    b1 = api.publish("Report B: Fund X", "Report B finds Fund X redemption liquidity inadequate.", ws["id"])
    api.ok("POST", f"/v1/publications/{b1['id']}/versions/1/withdraw", json={"reason": "wrong data"})
    source = api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])
    assert source["status"] == "active"
    art = api.ok("POST", "/v1/artifacts", files={"file": ("chart.html", REPORT, "text/html")}, data={"title": "Chart"})
    api.ok("POST", f"/v1/workspaces/{ws['id']}/artifacts", json={"artifact_id": art["id"]})
    run = api.wait_run(api.start_run(ws["id"], QUESTION, history=[{"publication_id": a1["id"], "version": 1}])["id"])
    assert run["status"] == "completed", run["error"]
    checkpoint = api.ok("GET", f"/v1/workspaces/{ws['id']}/checkpoint")
    api.ok(
        "PUT",
        f"/v1/workspaces/{ws['id']}/checkpoint",
        json={"expected_revision": checkpoint["revision"], "summary": "A person's summary after the run."},
    )
    admin = {"Authorization": f"Bearer {stack.admin_token}"}
    issue = {"scope": api.scope, "principal": "revoked"}
    revoked = httpx.post(f"{stack.url}/v1/admin/tokens", json=issue, headers=admin).json()
    assert httpx.delete(f"{stack.url}/v1/admin/tokens/{revoked['id']}", headers=admin).status_code == 204
    publications = [a1["id"], b1["id"]]
    return {
        "workspace": ws["id"],
        "publications": publications,
        "artifact": art["id"],
        "run": run,
        "revoked": revoked["token"],
    }


def look(http: httpx.Client, seeded: dict[str, Any], admin: httpx.Client) -> dict[str, Any]:
    """Everything the seeded data shows through the API; equal before the backup and after the restore."""

    def get(path: str, **params: Any) -> Any:
        r = http.get(path, params=params)
        assert r.status_code == 200, f"GET {path} → {r.status_code} {r.text[:300]}"
        return r.json()

    ws, run = seeded["workspace"], seeded["run"]
    seen: dict[str, Any] = {
        path: get(path)
        for path in (
            f"/v1/workspaces/{ws}",
            f"/v1/workspaces/{ws}/goal/versions",
            f"/v1/workspaces/{ws}/catalog",
            f"/v1/workspaces/{ws}/checkpoint",
            f"/v1/workspaces/{ws}/checkpoint/revisions",
            f"/v1/workspaces/{ws}/drift",
            f"/v1/runs/{run['id']}",
            f"/v1/runs/{run['id']}/prov",
            f"/v1/conversations/{run['conversation_id']}",
            "/v1/sources/announcement",
            f"/v1/artifacts/{seeded['artifact']}",
        )
    }
    for pub in seeded["publications"]:
        latest = get(f"/v1/publications/{pub}")
        versions = range(1, latest["latest_version"] + 1)
        # A withdrawn version answers 409 with its reason: the same answer after the restore.
        answers = (http.get(f"/v1/publications/{pub}/versions/{v}") for v in versions)
        seen[pub] = [latest, *((r.status_code, r.json()) for r in answers)]
    seen["ledger"] = all_items(http, f"/v1/runs/{run['id']}/ledger")
    files = all_items(http, f"/v1/runs/{run['id']}/files")
    seen["files"] = {f["path"]: http.get(f"/v1/runs/{run['id']}/files/{f['path']}").text for f in files}
    seen["search"] = get("/v1/evidence/search", q="redemption gates")
    seen["report"] = hashlib.sha256(http.get(f"/v1/artifacts/{seeded['artifact']}/content").content).hexdigest()
    answer = run["publication"]
    seen["answer"] = get(f"/v1/publications/{answer['id']}/versions/{answer['version']}")
    seen["tokens"] = admin.get("/v1/admin/tokens", params={"scope": seeded["scope"]}).json()
    seen["revoked"] = http.get("/v1/workspaces", headers={"Authorization": f"Bearer {seeded['revoked']}"}).status_code
    return seen
