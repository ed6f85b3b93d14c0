"""Runs through the gateway on the whole stack: the running example (README) and the admission rules."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import re
import subprocess
import sys
import uuid

import nats
import pytest

from tests.support.api import Api
from tests.support.documents import ANNOUNCEMENT, QUESTION, pdf
from tests.support.stack import ROOT, RunningStack
from tests.support.subscribers import ext_subscription, read_until_quiet


@pytest.fixture
def api(stack: RunningStack) -> Api:
    return Api(stack)


def refs_of(ledger: list[dict], stage: str) -> list[tuple[str, str, int | None]]:
    return [(r["ref"]["kind"], r["ref"]["id"], r["ref"]["version"]) for r in ledger if r["stage"] == stage]


def test_running_example(api: Api, stack: RunningStack) -> None:
    ws = api.workspace()
    a1 = api.publish(
        "Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days. Its liquidity is adequate.", ws["id"]
    )
    a2 = api.revise(a1["id"], "Fund X liquidity is now weaker; redemptions may take 90 days.", 1)
    b1 = api.publish(
        "Report B: Fund X disagrees", "Report B finds Fund X redemption liquidity inadequate under stress.", ws["id"]
    )
    source = api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])
    assert source["status"] == "active"

    run = api.start_run(
        ws["id"],
        QUESTION,
        history=[{"publication_id": a1["id"], "version": 1}, {"publication_id": b1["id"], "version": 1}],
    )
    assert run["status"] in ("admitted", "running") and run["goal_version"] == 1
    run = api.wait_run(run["id"])
    assert run["status"] == "completed", run["error"]

    ledger = api.ledger(run["id"])
    reads = refs_of(ledger, "read")
    assert ("publication", a1["id"], 1) in reads and ("publication", b1["id"], 1) in reads
    assert ("publication", a1["id"], 2) not in reads, "the run read A@2 although A@1 was selected"
    assert ("source", "announcement", 1) in reads
    evidence = [r for r in ledger if r["stage"] == "read" and r["ref"]["kind"] == "source"]
    assert all(re.fullmatch(r"page:\d+", r["locator"]) for r in evidence)
    included = [r for r in ledger if r["stage"] == "included"]
    assert all(r["model_request"] and r["model_request"].startswith(run["id"]) for r in included)

    answer = api.read(run["publication"])
    body = answer["body"]
    assert f"{a1['id']}@1" in body and f"{b1['id']}@1" in body
    assert f"{a1['id']}@2" not in body
    assert "## What earlier reports concluded" in body and "## What the new evidence says" in body
    assert "## Not resolved or not read" in body and "announcement@v1 page:" in body
    assert a2["version"] == 2
    consumed = {(k, i, v) for k, i, v in refs_of(ledger, "included")}
    assert {(s["kind"], s["id"], s["version"]) for s in answer["sources"]} == consumed
    assert answer["run_id"] == run["id"]
    assert run["workspace_association"] == "confirmed"
    assert run["checkpoint_proposal"]["status"] == "applied"

    files = api.files(run["id"])
    assert {"plan.md", "draft.md"} <= set(files)
    notes = {p for p in files if p.startswith("notes/")}
    sources = {p for p in files if p.startswith("sources/")}
    assert len(notes) == len(sources) >= 3
    plan = api.ok("GET", f"/v1/runs/{run['id']}/files/plan.md")
    assert "## Sources" in plan and f"{a1['id']}@v1" in plan

    catalog = api.ok("GET", f"/v1/workspaces/{ws['id']}/catalog")
    produced = [i for i in catalog["items"] if i["run_id"] == run["id"]]
    assert {i["kind"] for i in produced} >= {"publication"}
    checkpoint = api.ok("GET", f"/v1/workspaces/{ws['id']}/checkpoint")
    assert checkpoint["status"] == "valid" and checkpoint["derived_from"]["run_id"] == run["id"]
    conversation = api.items(f"/v1/conversations/{run['conversation_id']}", key="runs")
    assert [r["id"] for r in conversation] == [run["id"]]

    # The answer is also retained as an HTML report, pinned to the workspace and named by the run; it is no
    # catalog item of its own (the run's publication is).
    assert not [i for i in catalog["items"] if i["kind"] == "artifact"]
    report = api.ok("GET", f"/v1/artifacts/{run['report_artifact_id']}")
    assert report["title"].startswith(f"Report of {run['id']}: ")
    html = api.http.get(f"/v1/artifacts/{report['id']}/content")
    assert html.status_code == 200 and "What earlier reports concluded" in html.text
    assert html.headers["content-security-policy"] == "sandbox"
    assert [e["type"] for e in run_events(stack.events_options(), run["id"])] == [
        "run.admitted",
        "run.started",
        "run.completed",
    ]


def run_events(options: dict, run_id: str) -> list[dict]:
    """The run's events as they are on the stream (an `ext-` consumer from the first message)."""

    async def read() -> list[dict]:
        # As an outside subscriber would: the read-only credentials of $DOSSIER_HOME/nats/events.json.
        nc = await nats.connect(**options)
        try:
            sub = await ext_subscription(nc, "dossier.evt.run.>")
            return [e for e in await read_until_quiet(sub) if e["data"]["run_id"] == run_id]
        finally:
            await nc.close()

    return asyncio.run(read())


def test_withdrawn_selected_version_is_unavailable_and_the_run_completes(api: Api) -> None:
    ws = api.workspace()
    a1 = api.publish("Report A: Fund X liquidity", "Fund X redemption liquidity is adequate.", ws["id"])
    b1 = api.publish("Report B: Fund X liquidity", "Fund X redemption liquidity is inadequate.", ws["id"])
    api.ok("POST", f"/v1/publications/{b1['id']}/versions/1/withdraw", json={"reason": "wrong data"})
    run = api.start_run(
        ws["id"],
        QUESTION,
        history=[{"publication_id": a1["id"], "version": 1}, {"publication_id": b1["id"], "version": 1}],
    )
    run = api.wait_run(run["id"])
    assert run["status"] == "completed", run["error"]
    ledger = api.ledger(run["id"])
    gone = [r for r in ledger if r["stage"] == "unavailable"]
    assert [(r["ref"]["id"], r["ref"]["version"], r["reason"]) for r in gone] == [(b1["id"], 1, "withdrawn")]
    answer = api.read(run["publication"])
    assert f"{b1['id']}@1 was not read: withdrawn" in answer["body"]
    assert all(s["id"] != b1["id"] for s in answer["sources"])


def test_admission_is_idempotent_on_request_id(api: Api) -> None:
    ws = api.workspace()
    request_id = uuid.uuid4().hex
    first = api.http.post(f"/v1/workspaces/{ws['id']}/runs", json={"question": "q one", "request_id": request_id})
    again = api.http.post(f"/v1/workspaces/{ws['id']}/runs", json={"question": "q one", "request_id": request_id})
    other = api.http.post(f"/v1/workspaces/{ws['id']}/runs", json={"question": "q two", "request_id": request_id})
    assert (first.status_code, again.status_code, other.status_code) == (202, 200, 409)
    assert again.json()["id"] == first.json()["id"]
    assert other.json()["error"]["code"] == "conflict"

    burst = uuid.uuid4().hex
    with concurrent.futures.ThreadPoolExecutor(20) as pool:
        answers = list(
            pool.map(
                lambda _: api.http.post(
                    f"/v1/workspaces/{ws['id']}/runs", json={"question": "burst", "request_id": burst}
                ),
                range(20),
            )
        )
    assert sorted(r.status_code for r in answers).count(202) == 1
    assert {r.json()["id"] for r in answers if r.status_code in (200, 202)} == {answers[0].json()["id"]}
    runs = api.items(f"/v1/workspaces/{ws['id']}/runs")
    assert len([r for r in runs if r["request_id"] == burst]) == 1


def test_goal_change_after_admission_does_not_change_the_run(api: Api) -> None:
    ws = api.workspace(goal="Original goal about Fund X liquidity")
    run = api.start_run(ws["id"], "What holds?")
    api.ok("PUT", f"/v1/workspaces/{ws['id']}/goal", json={"text": "A different goal", "expected_version": 1})
    run = api.wait_run(run["id"])
    assert run["goal_version"] == 1
    plan = api.ok("GET", f"/v1/runs/{run['id']}/files/plan.md")
    assert "Original goal about Fund X liquidity" in plan and "A different goal" not in plan
    later = api.wait_run(api.start_run(ws["id"], "What holds now?")["id"])
    assert later["goal_version"] == 2


def test_admission_refusals(api: Api, stack: RunningStack) -> None:
    ws = api.workspace()
    pub = api.publish("P", "body", ws["id"])
    cases = [
        ("/v1/workspaces/ws_missing/runs", {"question": "q"}, 404),
        (
            f"/v1/workspaces/{ws['id']}/runs",
            {"question": "q", "history": [{"publication_id": "pub_missing", "version": 1}]},
            404,
        ),
        (
            f"/v1/workspaces/{ws['id']}/runs",
            {"question": "q", "history": [{"publication_id": pub["id"], "version": 9}]},
            404,
        ),
        (f"/v1/workspaces/{ws['id']}/runs", {"question": "q", "model": "gpt-unknown"}, 422),
        (f"/v1/workspaces/{ws['id']}/runs", {"question": ""}, 422),
        (f"/v1/workspaces/{ws['id']}/runs", {"question": "q", "conversation_id": "conv_missing"}, 404),
    ]
    for path, body, status in cases:
        r = api.http.post(path, json={"request_id": uuid.uuid4().hex} | body)
        assert r.status_code == status, (body, r.text)
    api.ok("POST", f"/v1/workspaces/{ws['id']}/archive")
    r = api.http.post(f"/v1/workspaces/{ws['id']}/runs", json={"question": "q", "request_id": uuid.uuid4().hex})
    assert r.status_code == 409 and r.json()["error"]["code"] == "conflict"


def test_runs_are_invisible_to_other_scopes(api: Api, stack: RunningStack) -> None:
    ws = api.workspace()
    run = api.wait_run(api.start_run(ws["id"], "Fund X liquidity?")["id"])
    stranger = Api(stack)
    for method, path in [
        ("GET", f"/v1/runs/{run['id']}"),
        ("POST", f"/v1/runs/{run['id']}/cancel"),
        ("GET", f"/v1/runs/{run['id']}/ledger"),
        ("GET", f"/v1/runs/{run['id']}/files"),
        ("GET", f"/v1/runs/{run['id']}/files/plan.md"),
        ("GET", f"/v1/conversations/{run['conversation_id']}"),
    ]:
        assert stranger.http.request(method, path).status_code == 404, path
    r = stranger.http.put(f"/v1/runs/{run['id']}/files/plan.md", content=b"x", headers={"content-type": "text/plain"})
    assert r.status_code == 404


def test_conversation_continues_across_runs(api: Api) -> None:
    ws = api.workspace()
    first = api.wait_run(api.start_run(ws["id"], "First question about Fund X?")["id"])
    second = api.wait_run(api.start_run(ws["id"], "Follow-up?", conversation_id=first["conversation_id"])["id"])
    assert second["conversation_id"] == first["conversation_id"]
    conversation = api.items(f"/v1/conversations/{first['conversation_id']}", key="runs", limit=1)
    assert [r["id"] for r in conversation] == [first["id"], second["id"]]


def test_cli_run_wait_and_ledger(api: Api, stack: RunningStack) -> None:
    ws = api.workspace()
    a1 = api.publish("Report A: Fund X liquidity", "Fund X redemption liquidity is adequate for 30 days.", ws["id"])
    env = os.environ | {"DOSSIER_URL": stack.url, "DOSSIER_TOKEN": api.http.headers["Authorization"].split()[1]}
    cli = [sys.executable, "-m", "dossier_cli"]
    done = subprocess.run(
        [*cli, "run", ws["id"], QUESTION, "--history", f"{a1['id']}@1", "--wait"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "## What earlier reports concluded" in done.stdout and "ledger:" in done.stdout
    run_id = done.stdout.split()[1]
    ledger = subprocess.run([*cli, "ledger", run_id], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert ledger.returncode == 0 and f"publication:{a1['id']}@1" in ledger.stdout
    bad = subprocess.run(
        [*cli, "run", ws["id"], "q", "--history", "nonsense"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode != 0 and "ID@VERSION" in bad.stderr
