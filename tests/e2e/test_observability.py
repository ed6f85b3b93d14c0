"""What an operator sees: one request id across services' JSON logs, metrics of every process, run stats."""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from shared.contracts.common import ALL_PROCESSES
from tests.support.api import Api, probe
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.logs import lines_with
from tests.support.stack import RunningStack


@pytest.fixture
def api(stack: RunningStack) -> Api:
    return Api(stack)


def test_a_request_id_follows_the_request_through_the_gateway_and_a_service(api: Api, stack: RunningStack) -> None:
    request_id = f"obs-{uuid.uuid4().hex}"
    r = api.http.get("/v1/workspaces/ws_does_not_exist", headers={"X-Request-ID": request_id})
    assert r.status_code == 404
    assert r.headers["x-request-id"] == request_id

    gateway = probe(lambda: lines_with(stack, "gateway", request_id), timeout=10)
    workspace = probe(lambda: lines_with(stack, "workspace", request_id), timeout=10)
    for line in (*gateway, *workspace):
        assert {"service", "level", "msg", "request_id"} <= set(line)
    assert gateway[0]["service"] == "gateway" and "/v1/workspaces/ws_does_not_exist" in gateway[0]["msg"]
    assert workspace[0]["service"] == "workspace" and "not_found" in workspace[0]["msg"]
    assert workspace[0]["scope"] == api.scope


def handled(stack: RunningStack, process: str, request_id: str, **fields: str) -> list[dict[str, object]]:
    """The `dossier.handled` lines of `process` for this request id whose fields include `fields`."""
    return [
        line
        for line in lines_with(stack, process, request_id)
        if line["logger"] == "dossier.handled" and fields.items() <= line.items()
    ]


def test_a_successful_request_is_in_the_log_of_every_service_that_handled_it(api: Api, stack: RunningStack) -> None:
    created = f"obs-{uuid.uuid4().hex}"
    r = api.http.post("/v1/workspaces", json={"title": "Logs", "goal": "g"}, headers={"X-Request-ID": created})
    assert r.status_code == 201, r.text
    ws = r.json()["id"]
    assert probe(lambda: lines_with(stack, "gateway", created), timeout=10)
    line = probe(lambda: handled(stack, "workspace", created, outcome="ok"), timeout=10)[0]
    assert line["level"] == "info" and line["scope"] == api.scope
    assert line["subject"].startswith("dossier.workspace.") and isinstance(line["duration_ms"], float | int)

    uploaded = f"obs-{uuid.uuid4().hex}"
    r = api.http.post(
        "/v1/assets",
        data={"source_id": f"src-{uuid.uuid4().hex[:8]}"},
        files={"file": ("a.pdf", pdf(ANNOUNCEMENT))},
        headers={"X-Request-ID": uploaded},
    )
    assert r.status_code in (200, 201, 202), r.text
    assert probe(lambda: lines_with(stack, "gateway", uploaded), timeout=10)
    assert probe(lambda: handled(stack, "assets", uploaded, outcome="ok"), timeout=10)

    # The event the publication commits carries the request id to its consumer in the workspace service.
    published = f"obs-{uuid.uuid4().hex}"
    r = api.http.post(
        "/v1/publications",
        json={"title": "Note", "body": "A finding.", "workspace_id": ws},
        headers={"X-Request-ID": published},
    )
    assert r.status_code in (200, 201), r.text
    assert probe(lambda: handled(stack, "publication", published, outcome="ok"), timeout=10)
    consumed = probe(
        lambda: handled(stack, "workspace", published, event_type="publication.committed", outcome="handled"),
        timeout=20,
    )[0]
    assert consumed["event_id"].startswith("evt_") and consumed["scope"] == api.scope


def test_a_response_without_a_request_id_gets_a_new_one_and_a_bad_one_is_replaced(api: Api) -> None:
    first = api.http.get("/v1/workspaces").headers["x-request-id"]
    second = api.http.get("/v1/workspaces").headers["x-request-id"]
    assert first != second and first.startswith("req_")
    replaced = api.http.get("/v1/workspaces", headers={"X-Request-ID": "x" * 500}).headers["x-request-id"]
    assert replaced.startswith("req_")


def unmatched(metrics: str) -> float:
    """How many requests the gateway counted under no route (`route="unmatched"`), by status."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("dossier_http_requests_total{") and 'route="unmatched"' in line
    )


@pytest.mark.local_stack
def test_every_process_serves_metrics(api: Api, stack: RunningStack) -> None:
    api.workspace()
    urls = stack.state()["metrics"]
    assert isinstance(urls, dict) and set(urls) == set(ALL_PROCESSES)
    # Other tests on this stack may ask for a path no route has (counted as "unmatched", as it should be):
    # the requests below, each to a route, add none.
    unmatched_before = unmatched(
        httpx.get(str(urls["gateway"]), headers={"Authorization": f"Bearer {stack.admin_token}"}).text
    )

    # Answered before routing (a 401) or outside FastAPI's router (/mcp): still counted under their route.
    assert httpx.get(f"{stack.url}/v1/workspaces").status_code == 401
    assert httpx.post(f"{stack.url}/mcp", json={}).status_code == 401
    assert httpx.get(f"{stack.url}/openapi.json").status_code == 200
    unauthorised = httpx.get(str(urls["gateway"]), headers={"Authorization": f"Bearer {stack.token(api.scope)}"})
    assert unauthorised.status_code == 401
    token = (stack.home / "metrics-token").read_text().strip()
    # The scrapers' token opens the gateway's /metrics as it opens every other process's (so does the admin token).
    scraped = httpx.get(str(urls["gateway"]), headers={"Authorization": f"Bearer {token}"})
    assert scraped.status_code == 200 and "dossier_http_requests_total" in scraped.text
    gateway = httpx.get(str(urls["gateway"]), headers={"Authorization": f"Bearer {stack.admin_token}"})
    assert gateway.status_code == 200
    assert 'dossier_http_requests_total{method="POST",route="/v1/workspaces",status="201"}' in gateway.text
    assert "dossier_bus_calls_total" in gateway.text
    for series in (
        'route="/v1/workspaces",status="401"',
        'route="/mcp",status="401"',
        'route="/openapi.json",status="200"',
    ):
        assert series in gateway.text, series
    assert unmatched(gateway.text) == unmatched_before

    assert stack.state()["metrics_token_file"] == str(stack.home / "metrics-token")
    scrape = {"Authorization": f"Bearer {token}"}
    for name in ALL_PROCESSES:
        if name == "gateway":
            continue
        # A service's figures are the operator's: no token, or another, is refused.
        for headers in ({}, {"Authorization": f"Bearer {stack.admin_token}"}):
            refused = httpx.get(str(urls[name]), headers=headers)
            assert refused.status_code == 401 and "dossier_" not in refused.text, name
        text = httpx.get(str(urls[name]), headers=scrape).text
        assert "dossier_bus_requests_total" in text, name
        assert "faststream_received_messages_total" in text, name
        assert "dossier_outbox_lag_seconds" in text, name
    workspace = httpx.get(str(urls["workspace"]), headers=scrape).text
    assert 'dossier_bus_requests_total{code="ok",subject="dossier.workspace.create"}' in workspace
    runhost = httpx.get(str(urls["runhost"]), headers=scrape).text
    assert 'dossier_runs{status="completed"}' in runhost
    assert "dossier_lease_takeovers_total" in runhost
    assert "dossier_extraction_seconds" in httpx.get(str(urls["assets"]), headers=scrape).text


def test_a_run_reports_its_context_economy(api: Api, tmp_path: Path) -> None:
    ws = api.workspace()
    a1 = api.publish("Report A", "Fund X can meet redemptions within 30 days. " * 40, ws["id"])
    api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])
    api.wait_catalog(ws["id"], 2)
    run = api.start_run(
        ws["id"], "Does Fund X still meet redemptions?", history=[{"publication_id": a1["id"], "version": 1}]
    )
    assert run["stats"]["model_requests"] == 0
    run = api.wait_run(run["id"])
    assert run["status"] == "completed", run["error"]

    stats = run["stats"]
    # The extractive policy answers with several calls at once where it can (a source's reads, its notes).
    assert stats["steps"] > stats["model_requests"] >= 3
    assert stats["source_chars_read"] >= len(a1["body"])
    assert 0 < stats["model_input_chars_max"] <= stats["model_input_chars_total"]
    assert stats["tokens_in"] is None and stats["tokens_out"] is None  # the extractive policy reports no usage
    # Each source is counted once, whatever the pointers and re-reads cost.
    sources = {path: size for path, size in api.files(run["id"]).items() if path.startswith("sources/")}
    assert stats["source_chars_read"] <= sum(sources.values())
