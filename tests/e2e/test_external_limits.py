"""The limits of a run hold for an outside agent as for the run host's own policy (issue 38), over HTTP:
every run-bound call is a step, the characters the agent's calls move count against `max_chars`, its plan
is bounded as a person's is, and its lease never outlives the run's time limit. The call over a limit
answers 409 naming the limit, and the run ends `failed` with `limit_reached`. A search answers at most
`limit` hits and records exactly those as `listed`; a wrong id is `not_found` and records nothing; the
catalog.md an outside agent is given points it at the run's own search and read."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.support.agent import Agent
from tests.support.api import Api, error_of, probe
from tests.support.documents import pdf
from tests.support.fake_openai import GATED_MEMOS, GATED_PAGES, SEARCHED, gated_workspace
from tests.support.stack import RunningStack

MAX_PLAN_BYTES = 64 * 1024
PAGES = 25


@pytest.fixture
def api(stack: RunningStack) -> Api:
    return Api(stack)


def begin(api: Api, **extra: Any) -> tuple[dict[str, Any], Agent, dict[str, Any]]:
    """A workspace holding Report A, and an external run of it: the run and its agent, and Report A."""
    ws = api.workspace()
    a = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    api.wait_catalog(ws["id"], 1)
    run = api.start_run(ws["id"], "Does Report A hold?", driver="external", **extra)
    return run, Agent.of(api, run), a


def ended_at(agent: Agent, refused: httpx.Response, limit: str) -> dict[str, Any]:
    """The call over `limit` answered 409 naming it; the run failed with limit_reached and published nothing."""
    assert refused.status_code == 409, refused.text
    error = error_of(refused)
    assert (error["code"], error["details"]["limit"]) == ("conflict", limit), error
    run = agent.api.run(agent.run_id)
    assert (run["status"], run["error"], run["publication"]) == ("failed", "limit_reached", None), run
    assert run["error_details"]["limit"] == limit, run
    # Every later call says the run has ended, and why.
    later = agent.call("GET", "/catalog")
    assert later.status_code == 409 and error_of(later)["details"] == {"status": "failed", "limit": limit}
    return run


def rows(api: Api, run_id: str, stage: str) -> list[tuple[str, str, int | None, str | None]]:
    return [
        (r["ref"]["kind"], r["ref"]["id"], r["ref"]["version"], r["locator"])
        for r in api.ledger(run_id)
        if r["stage"] == stage and r["ref"] is not None
    ]


def test_the_call_over_the_step_limit_is_refused_and_fails_the_run(api: Api) -> None:
    run, agent, a = begin(api, limits={"max_steps": 3})
    agent.ok("GET", "/catalog")
    agent.ok("GET", "/search", params={"q": "redemptions"})
    agent.ok("POST", "/read", json={"ref": {"kind": "publication", "id": a["id"], "version": 1}})

    refused = agent.write("notes/report-a.md", "Report A holds.")
    done = ended_at(agent, refused, "max_steps")
    assert done["stats"]["steps"] == 3
    assert "notes/report-a.md" not in api.files(run["id"])


def test_a_finish_is_a_step_too(api: Api) -> None:
    run, agent, a = begin(api, limits={"max_steps": 1})
    agent.ok("POST", "/read", json={"ref": {"kind": "publication", "id": a["id"], "version": 1}})
    refused = agent.call("POST", "/finish", json={"answer": f"- Fund X meets redemptions ({a['id']}@v1)."})
    ended_at(agent, refused, "max_steps")
    assert not rows(api, run["id"], "included")


def test_what_an_agent_writes_and_reads_counts_against_max_chars(api: Api) -> None:
    run, agent, a = begin(api, limits={"max_chars": 50_000})
    assert agent.write("notes/one.md", "n" * 30_000).status_code == 204
    read = agent.ok("POST", "/read", json={"ref": {"kind": "publication", "id": a["id"], "version": 1}})
    assert "30 days" in read["text"]

    refused = agent.write("notes/two.md", "n" * 30_000)
    ended_at(agent, refused, "max_chars")
    assert "notes/two.md" not in api.files(run["id"])


def test_an_agents_plan_is_bounded_as_a_persons_is(api: Api) -> None:
    run, agent, _ = begin(api)
    refused = agent.write("plan.md", "p" * (MAX_PLAN_BYTES + 1))
    assert refused.status_code == 413, refused.text
    assert error_of(refused)["details"] == {"limit": MAX_PLAN_BYTES, "size": MAX_PLAN_BYTES + 1}
    assert "plan.md" not in api.files(run["id"])
    assert agent.write("plan.md", "p" * MAX_PLAN_BYTES).status_code == 204
    assert api.run(run["id"])["status"] == "running"


def test_renewals_never_carry_the_lease_past_the_runs_time_limit(api: Api) -> None:
    run, agent, _ = begin(api, lease_seconds=60, limits={"max_seconds": 4})
    deadline = datetime.fromisoformat(run["created_at"]) + timedelta(seconds=4)
    assert datetime.fromisoformat(run["lease"]["expires_at"]) <= deadline, (run["lease"], deadline)
    renewed = agent.ok("POST", "/lease")
    assert datetime.fromisoformat(renewed["expires_at"]) <= deadline, (renewed, deadline)

    def refused() -> httpx.Response | None:
        r = agent.call("POST", "/lease")
        return r if r.status_code != 200 else None

    ended_at(agent, probe(refused, timeout=60, interval=0.5), "max_seconds")
    # Taking the run over gives it no more time either.
    taken = api.http.post(f"/v1/runs/{run['id']}/lease/take", json={"force": True})
    assert taken.status_code == 409 and error_of(taken)["details"]["status"] == "failed", taken.text


def test_a_run_left_past_its_time_limit_fails_by_itself(api: Api) -> None:
    run, _, _ = begin(api, limits={"max_seconds": 2})

    def ended() -> dict[str, Any] | None:
        now = api.run(run["id"])
        return now if now["status"] != "running" else None

    done = probe(ended, timeout=60, interval=0.5)
    assert (done["status"], done["error"], done["error_details"]["limit"]) == ("failed", "limit_reached", "max_seconds")


def test_a_search_answers_and_lists_exactly_limit_hits(api: Api) -> None:
    ws = api.workspace()
    a = api.publish("Report A: Fund X gates", "Report A expects redemption gates at Fund X.", ws["id"])
    pages = [f"Page {i}. The board discusses redemption gates, note number {i}." for i in range(PAGES)]
    assert api.upload(pdf(pages), "minutes", "minutes.pdf", ws["id"])["status"] == "active"
    api.wait_catalog(ws["id"], 2)
    run = api.start_run(ws["id"], "What of the gates?", driver="external")
    agent = Agent.of(api, run)

    def key(hit: dict[str, Any]) -> tuple[str, str, int | None, str | None]:
        return (hit["ref"]["kind"], hit["ref"]["id"], hit["ref"]["version"], hit["locator"])

    one = agent.search("redemption gates", 1)
    assert len(one) == 1 and one[0]["evidence_id"] is not None, one
    assert rows(api, run["id"], "listed") == [key(one[0])]

    twenty = agent.search("redemption gates", 20)
    assert len(twenty) == 20, [key(h) for h in twenty]
    assert set(rows(api, run["id"], "listed")) == {key(h) for h in one + twenty}

    # With room to spare, the passages come first, then the workspace's publication that matches.
    every = agent.search("redemption gates", 50)
    assert 20 < len(every) <= 50 and every[-1]["ref"] == {"kind": "publication", "id": a["id"], "version": 1}
    listed = rows(api, run["id"], "listed")
    assert len(listed) == len(set(listed)) and set(listed) == {key(h) for h in one + twenty + every}


def test_publication_hits_page_as_passages_do_until_every_hit_was_shown(api: Api) -> None:
    ws, memos = gated_workspace(api)
    run = api.start_run(ws, "What of the gates?", driver="external")
    agent = Agent.of(api, run)

    def key(hit: dict[str, Any]) -> tuple[str, str, int | None, str | None]:
        return (hit["ref"]["kind"], hit["ref"]["id"], hit["ref"]["version"], hit["locator"])

    pages, cursor = [], None
    while len(pages) < 20:
        page = agent.page(SEARCHED, 5, cursor)
        pages.append(page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert cursor is None, "the pages end"
    for items in pages:
        kinds = [h["ref"]["kind"] for h in items]
        assert 0 < len(items) <= 5 and kinds == sorted(kinds, reverse=True), kinds
        assert "source" not in kinds or "publication" in kinds, "beside passages, publications keep a place"
    hits = [key(h) for items in pages for h in items]
    assert len(hits) == len(set(hits)) == GATED_PAGES + GATED_MEMOS, "every hit once"
    assert {h[1] for h in hits if h[0] == "publication"} == set(memos)
    listed = rows(api, run["id"], "listed")
    assert len(listed) == len(set(listed)) and set(listed) == set(hits)

    forged = agent.call("GET", "/search", params={"q": SEARCHED, "cursor": "not-a-cursor"})
    assert forged.status_code == 422 and error_of(forged)["details"]["field"] == "cursor", forged.text


def test_a_read_the_run_may_not_make_yet_says_how_and_the_search_opens_it(api: Api) -> None:
    run, agent, _ = begin(api)
    # Published after the run's admission: not in its catalog, but in its workspace, where its search looks.
    later = api.publish("Report C: Fund X gates", "Report C sees redemption gates at Fund X.", run["workspace_id"])
    ref = {"kind": "publication", "id": later["id"], "version": 1}
    refused = agent.call("POST", "/read", json={"ref": ref})
    assert refused.status_code == 404, refused.text
    message = error_of(refused)["message"]
    assert "neither in this run's catalog nor found by its search" in message, message
    assert "run_search" in message and f"/v1/runs/{run['id']}/search" in message, message
    assert api.ledger(run["id"]) == []

    def found() -> list[dict[str, Any]] | None:
        hits = [h for h in agent.search("redemption gates", 10) if h["ref"] == ref]
        return hits or None

    probe(found, timeout=30)
    assert "Report C sees" in agent.ok("POST", "/read", json={"ref": ref})["text"]


def test_a_wrong_id_is_not_found_and_records_nothing(api: Api) -> None:
    run, agent, a = begin(api)
    for ref in (
        {"kind": "evidence", "id": "ev_no_such_passage"},
        {"kind": "publication", "id": "pub_no_such", "version": 1},
        {"kind": "publication", "id": a["id"], "version": 7},
    ):
        r = agent.call("POST", "/read", json={"ref": ref})
        assert r.status_code == 404 and error_of(r)["code"] == "not_found", (ref, r.text)
    assert api.ledger(run["id"]) == []


def test_catalog_md_points_an_outside_agent_at_the_runs_own_search_and_read(api: Api) -> None:
    run, agent, _ = begin(api)
    agent.ok("GET", "/catalog")
    text = api.ok("GET", f"/v1/runs/{run['id']}/files/catalog.md")
    assert "run_search" in text and "run_read" in text and f"/v1/runs/{run['id']}/read" in text, text
    assert "search_evidence" not in text and "read_evidence" not in text, text
    taken = api.ok("POST", f"/v1/runs/{run['id']}/lease/take", json={"force": True})
    assert "catalog.md" in {f["path"] for f in taken["resume"]["files"]}


def test_a_held_lease_says_until_when(api: Api) -> None:
    run, _, _ = begin(api)
    held = api.http.post(f"/v1/runs/{run['id']}/lease/take", json={})
    assert held.status_code == 409, held.text
    details = error_of(held)["details"]
    assert details["lease"] == "held", details
    assert datetime.fromisoformat(details["expires_at"]) == datetime.fromisoformat(run["lease"]["expires_at"])
