"""A smoke test of a whole stack through HTTP alone: health, a token, a workspace, an upload that becomes
active, a publication read back and a run that completes. It needs only the gateway's URL and the admin
token, so `make test-containers` runs it against docker compose, and `make test` against the local stack."""

from __future__ import annotations

import httpx

from tests.support.api import Api
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.stack import RunningStack


def test_health_reports_every_service(stack: RunningStack) -> None:
    r = httpx.get(f"{stack.url}/v1/health", timeout=30)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "status": "ok",
        "services": {name: "ok" for name in ("workspace", "runhost", "publication", "artifact", "assets")},
        "reasons": {},
    }


def test_workspace_upload_publication_and_run(stack: RunningStack) -> None:
    api = Api(stack)
    ws = api.workspace()
    source = api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])
    assert source["status"] == "active"
    report = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    assert api.read(report)["body"] == "Fund X can meet redemptions within 30 days."

    run = api.start_run(
        ws["id"],
        "Does Fund X still meet redemptions after the announcement?",
        history=[{"publication_id": report["id"], "version": 1}],
    )
    run = api.wait_run(run["id"])
    assert run["status"] == "completed", run["error"]
    answer = api.read(run["publication"])
    assert f"{report['id']}@1" in answer["body"] and answer["run_id"] == run["id"]
    assert api.files(run["id"]).keys() >= {"plan.md", "draft.md"}
