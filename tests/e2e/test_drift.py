"""Drift alerts on the whole stack: a new announcement version after the running example's run."""

from __future__ import annotations

import asyncio
import json
import uuid

import nats
import pytest

from tests.support.agent import Agent
from tests.support.api import Api, probe
from tests.support.cli import dossier
from tests.support.documents import ANNOUNCEMENT, QUESTION, pdf
from tests.support.stack import RunningStack
from tests.support.subscribers import ext_subscription, read_until_quiet

NEW_ANNOUNCEMENT = [*ANNOUNCEMENT, "Correction, 27 November 2026. Redemption gates are lifted from January."]


@pytest.fixture
def api(stack: RunningStack) -> Api:
    return Api(stack)


def republish_activation(stack: RunningStack, scope: str, version: int) -> None:
    """Deliver the version's `asset.version_activated` event again, as the assets service's relay could after
    a crash: once as it was (same event id), once as a copy under a new event id."""

    async def run() -> None:
        reader, relay = await nats.connect(**stack.events_options()), await nats.connect(**stack.nats_options("assets"))
        try:
            subject = "dossier.evt.asset.version_activated"
            sub = await ext_subscription(reader, subject)
            [found] = [
                e for e in await read_until_quiet(sub) if e["scope"] == scope and e["data"]["version"] == version
            ]
            js = relay.jetstream()
            await js.publish(subject, json.dumps(found).encode())
            await js.publish(subject, json.dumps(found | {"id": f"evt_{uuid.uuid4().hex}"}).encode())
        finally:
            await reader.close()
            await relay.close()

    asyncio.run(run())


def test_a_new_announcement_version_drifts_once_with_one_checkpoint_question(api: Api, stack: RunningStack) -> None:
    ws, archived = api.workspace(), api.workspace(title="Fund X (archived)")
    a1 = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    b1 = api.publish("Report B: Fund X disagrees", "Report B finds Fund X redemption liquidity inadequate.", ws["id"])
    source = api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])
    api.ok("POST", f"/v1/workspaces/{archived['id']}/sources", json={"source_id": "announcement"})
    history = [{"publication_id": a1["id"], "version": 1}, {"publication_id": b1["id"], "version": 1}]
    runs = [api.start_run(ws["id"], QUESTION, history=history), api.start_run(archived["id"], QUESTION)]
    run, other = (api.wait_run(r["id"]) for r in runs)
    assert run["status"] == other["status"] == "completed", (run["error"], other["error"])
    cited = api.ok("GET", f"/v1/workspaces/{archived['id']}/checkpoint")["derived_from"]["sources"]
    assert {"kind": "source", "id": "announcement", "version": 1} in cited
    api.ok("POST", f"/v1/workspaces/{archived['id']}/archive")
    before = api.ok("GET", f"/v1/workspaces/{ws['id']}/checkpoint")
    assert {"kind": "source", "id": "announcement", "version": source["version"]} in before["derived_from"]["sources"]

    v2 = api.upload(pdf(NEW_ANNOUNCEMENT), "announcement", "announcement-v2.pdf")
    assert (v2["version"], v2["status"]) == (2, "active")
    drift_path = f"/v1/workspaces/{ws['id']}/drift"
    [drift] = probe(lambda: api.ok("GET", drift_path)["items"], timeout=60)
    report = {"kind": "publication", "id": run["publication"]["id"], "version": run["publication"]["version"]}
    assert drift["ref"] == {"kind": "source", "id": "announcement", "version": 1}
    assert (drift["new_version"], drift["reason"]) == (2, "new_version")
    assert drift["cited_by"] == [report]

    checkpoint = api.ok("GET", f"/v1/workspaces/{ws['id']}/checkpoint")
    # Named as a person knows them: the source by its name, the report by its title (the run's question).
    asked = [q for q in checkpoint["open_questions"] if q["text"].startswith("“announcement” v1, cited by")]
    assert [q["text"] for q in asked] == [
        f"“announcement” v1, cited by “{QUESTION}” v1, now has version 2: does what was concluded from it still hold?"
    ]
    assert checkpoint["revision"] == before["revision"] + 1 and checkpoint["author"] == "system"
    assert checkpoint["derived_from"] == before["derived_from"]
    # The revision keeps the run's summary; the read withholds it, since announcement@1 is superseded now.
    assert checkpoint["status"] == "unavailable" and checkpoint["summary"] is None
    assert [u["ref"]["id"] for u in checkpoint["unavailable_sources"]] == ["announcement"]

    # Redelivered (same event id) and duplicated (new event id): neither adds a drift or a question. The
    # consumer handles its events in order, so once version 3's drift is there, both were handled.
    republish_activation(stack, api.scope, 2)
    api.upload(pdf([*NEW_ANNOUNCEMENT, "Second correction."]), "announcement", "announcement-v3.pdf")
    items = probe(lambda: (d := api.ok("GET", drift_path)["items"]) and len(d) >= 2 and d, timeout=60)
    assert [(d["ref"]["version"], d["new_version"]) for d in items] == [(1, 2), (1, 3)]
    questions = api.ok("GET", f"/v1/workspaces/{ws['id']}/checkpoint")["open_questions"]
    assert sum("now has version 2" in q["text"] for q in questions) == 1
    assert sum("now has version 3" in q["text"] for q in questions) == 1

    page = api.ok("GET", f"{drift_path}?limit=1")
    assert len(page["items"]) == 1 and page["next_cursor"]
    rest = api.ok("GET", f"{drift_path}?limit=1&cursor={page['next_cursor']}")
    assert rest["items"] == items[1:] and rest["next_cursor"] is None

    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    listed = dossier(stack, token, "workspace", "drift", ws["id"], "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)["items"] == items
    shown = dossier(stack, token, "workspace", "drift", ws["id"])
    assert shown.returncode == 0 and "source:announcement@1" in shown.stdout and "new_version" in shown.stdout

    # A retired source and a withdrawn publication version drift too, with no new version.
    api.ok("POST", "/v1/sources/announcement/retire")
    api.ok("POST", f"/v1/publications/{report['id']}/versions/1/withdraw", json={"reason": "superseded"})
    items = probe(lambda: (d := api.ok("GET", drift_path)["items"]) and len(d) >= 4 and d, timeout=60)
    assert sorted((d["ref"]["kind"], d["ref"]["version"], d["reason"], d["new_version"]) for d in items[2:]) == [
        ("publication", 1, "withdrawn", None),
        ("source", 1, "retired", None),
    ]
    questions = [q["text"] for q in api.ok("GET", f"/v1/workspaces/{ws['id']}/checkpoint")["open_questions"]]
    assert f"“{QUESTION}” v1, cited by the checkpoint, has been withdrawn" in " ".join(questions)
    assert f"“announcement” v1, cited by “{QUESTION}” v1, has been retired" in " ".join(questions)
    assert not any("pub_" in q for q in questions)

    # The archived workspace's checkpoint cites announcement@1 too, but it is not followed any more.
    assert api.ok("GET", f"/v1/workspaces/{archived['id']}/drift")["items"] == []
    api.ok("DELETE", f"/v1/workspaces/{ws['id']}")
    assert api.http.get(drift_path).status_code == 404


def test_a_version_that_comes_out_while_a_run_reads_the_one_before_drifts_its_answer(api: Api) -> None:
    """An outside agent reads version 1; version 2 comes out (and is handled) before the agent finishes: the
    answer, committed after the new version, still cites what changed under it, so it drifts and its claim
    goes stale."""
    ws = api.workspace()
    api.upload(pdf(ANNOUNCEMENT), "gates-notice", "gates-notice.pdf", ws["id"])
    api.wait_catalog(ws["id"], 1)
    run = api.start_run(ws["id"], "What did the board announce?", driver="external")
    agent = Agent(api, run["id"], run["lease"]["token"])
    [hit, *_] = agent.ok("GET", "/search", params={"q": "redemption gates"})["items"]
    assert hit["ref"] == {"kind": "source", "id": "gates-notice", "version": 1}
    agent.ok("POST", "/read", json={"ref": {"kind": "evidence", "id": hit["evidence_id"]}})

    v2 = api.upload(pdf(NEW_ANNOUNCEMENT), "gates-notice", "gates-notice-v2.pdf")
    assert (v2["version"], v2["status"]) == (2, "active")
    drift_path = f"/v1/workspaces/{ws['id']}/drift"
    assert api.ok("GET", drift_path)["items"] == []
    answer = f"- The board introduces redemption gates of 10 percent per quarter (gates-notice@v1 {hit['locator']}).\n"
    done = agent.ok("POST", "/finish", json={"answer": answer, "title": "The board's gates"})
    assert done["status"] == "completed" and done["publication"] is not None

    [drift] = probe(lambda: api.ok("GET", drift_path)["items"], timeout=60)
    assert (drift["ref"], drift["new_version"], drift["reason"]) == (
        {"kind": "source", "id": "gates-notice", "version": 1},
        2,
        "new_version",
    )
    assert drift["cited_by"] == [{"kind": "publication", "id": done["publication"]["id"], "version": 1}]
    # And its claim goes stale, naming the version that came out.
    claims = f"/v1/publications/{done['publication']['id']}/versions/1/claims"
    [stale] = probe(lambda: [c["stale"] for c in api.ok("GET", claims)["items"] if c["stale"]], timeout=60)
    assert (stale["reason"], stale["now"]) == ("new_version", {"kind": "source", "id": "gates-notice", "version": 2})


TWO_PART = "Are redemptions suspended since the announcement, and what did the regulator say about swing pricing?"
REGULATOR = "The regulator said Fund X must apply swing pricing to every redemption from March."


def open_questions(api: Api, workspace_id: str) -> list[str]:
    return [
        q["text"]
        for q in api.ok("GET", f"/v1/workspaces/{workspace_id}/checkpoint")["open_questions"]
        if q["status"] == "open"
    ]


def test_the_checkpoint_asks_whole_questions_once_and_later_runs_resolve_them(api: Api) -> None:
    ws = api.workspace()
    api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])
    api.wait_catalog(ws["id"], 1)

    # The announcement answers the first part of the question and says nothing of the second ("since" is
    # not in it either, but the part it is in is answered): the part left open is asked whole, once.
    first = api.wait_run(api.start_run(ws["id"], TWO_PART)["id"])
    assert first["status"] == "completed" and first["checkpoint_proposal"]["status"] == "applied", first
    assert open_questions(api, ws["id"]) == ["What did the regulator say about swing pricing?"]
    # The same question again leaves the same part open: it is not asked twice.
    second = api.wait_run(api.start_run(ws["id"], TWO_PART)["id"])
    assert second["checkpoint_proposal"]["status"] == "applied", second
    assert open_questions(api, ws["id"]) == ["What did the regulator say about swing pricing?"]

    # A new version of what both answers cite: the drift's question names things by their titles.
    api.upload(pdf(NEW_ANNOUNCEMENT), "announcement", "announcement-v2.pdf")
    drift = probe(lambda: [q for q in open_questions(api, ws["id"]) if "now has version 2" in q], timeout=60)
    assert drift == [
        f"“announcement” v1, cited by “{TWO_PART}” v1, “{TWO_PART}” v1, now has version 2:"
        " does what was concluded from it still hold?"
    ]

    # A run asked the open question, whose reading answers it, resolves it; having read and used the new
    # version of the announcement (the goal's words find it too), it resolves the drift's question as well.
    api.upload(pdf([REGULATOR]), "regulator", "regulator.pdf", ws["id"])
    api.wait_catalog(ws["id"], 2 + 2)  # two sources, and each run's answer (a report is no catalog item)
    third = api.wait_run(api.start_run(ws["id"], "What did the regulator say about swing pricing?")["id"])
    assert third["checkpoint_proposal"]["status"] == "applied", third
    sources = api.read(third["publication"])["sources"]
    assert {"kind": "source", "id": "regulator", "version": 1} in sources
    assert {"kind": "source", "id": "announcement", "version": 2} in sources
    assert open_questions(api, ws["id"]) == []
    questions = api.ok("GET", f"/v1/workspaces/{ws['id']}/checkpoint")["open_questions"]
    assert [q["text"] for q in questions] == ["What did the regulator say about swing pricing?", *drift]
    assert {q["status"] for q in questions} == {"resolved"}
