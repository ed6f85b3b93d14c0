"""What an outside agent's run records of its search and reads, over HTTP (issue 38): a search answers at most
`limit` hits and records exactly those as `listed`; a wrong id is `not_found` and records nothing; the
catalog.md it is given points it at the run's own search and read."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.agent import Agent
from tests.support.api import Api, error_of
from tests.support.documents import pdf
from tests.support.stack import RunningStack

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


def rows(api: Api, run_id: str, stage: str) -> list[tuple[str, str, int | None, str | None]]:
    return [
        (r["ref"]["kind"], r["ref"]["id"], r["ref"]["version"], r["locator"])
        for r in api.ledger(run_id)
        if r["stage"] == stage and r["ref"] is not None
    ]


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
