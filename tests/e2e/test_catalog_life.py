"""A workspace after sixty runs (issue 37, "a catalog that ages well"), on the whole stack: run outputs never
push the analyst's own material off a new run's first catalog page; every publication item has its title; a
run's report is no item; the run's catalog as admitted pages with a cursor to every item, and every item of
any page can be read by the run."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_external_runs import Agent
from tests.support.api import Api, probe
from tests.support.stack import RunningStack

RUNS = 60
SAME_QUESTION = "What changed for Fund X?"


def pages(get: Any, first: dict[str, Any]) -> list[dict[str, Any]]:
    """Every item from `first` on, following `next_cursor` with `get(cursor)`."""
    items, page = list(first["items"]), first
    while page["next_cursor"] is not None:
        assert page["complete"] is False and page["omitted"] > 0, page
        page = get(page["next_cursor"])
        items.extend(page["items"])
    assert page["complete"] is True and page["omitted"] == 0
    return items


@pytest.fixture
def api(stack: RunningStack) -> Api:
    return Api(stack)


def question(n: int) -> str:
    # Every other run asks the same question again (a later answer supersedes the earlier); the others ask
    # one of their own.
    return SAME_QUESTION if n % 2 == 0 else f"Day {n}: did redemptions of Fund X change?"


def test_sixty_runs_later_the_analysts_material_leads_and_every_item_is_reachable(api: Api) -> None:
    ws = api.workspace()
    memo = api.publish("Analyst memo: Fund X gates", "Fund X may gate 10 percent of redemptions.", ws["id"])
    brief = api.publish("Analyst brief: Fund X buffer", "Fund X keeps a 30-day liquidity buffer.", ws["id"])
    sources = [f"fundx-{n}" for n in range(3)]
    for n, source_id in enumerate(sources):
        text = f"Fund X notice {n}: liquidity covers {30 + n} days of redemptions.\n".encode()
        assert api.upload(text, source_id, f"{source_id}.txt", ws["id"])["status"] == "active"
    api.wait_catalog(ws["id"], 5, timeout=60)

    # Sixty runs, each driven by an outside agent (fast, and the same admission, finish and association as any
    # run's). Every tenth reads and cites the answer of the run before it.
    published: list[dict[str, Any]] = []
    for n in range(RUNS):
        run = api.start_run(ws["id"], question(n), driver="external")
        agent = Agent(api, run["id"], run["lease"]["token"])
        answer = f"# {question(n)}\n\nNothing new on day {n}."
        if n % 10 == 9:
            before = published[-1]
            agent.ok("POST", "/read", json={"ref": {"kind": "publication", "id": before["id"], "version": 1}})
            answer += f" As concluded the day before ({before['id']}@1)."
        done = agent.ok("POST", "/finish", json={"answer": answer})
        assert done["status"] == "completed" and done["workspace_association"] == "confirmed", done
        published.append(done["publication"] | {"question": question(n), "run_id": run["id"]})
    # Superseded: every answer to the repeated question but the last (the same title), and the answers the
    # tenth runs cite (each an answer to the repeated question, the last one included).
    superseded = [p["id"] for p in published if p["question"] == SAME_QUESTION]
    current = [p["id"] for p in published if p["question"] != SAME_QUESTION]
    own = {memo["id"], brief["id"], *sources}

    def settled() -> list[dict[str, Any]] | None:
        path = f"/v1/workspaces/{ws['id']}/catalog"
        items = pages(lambda cursor: api.ok("GET", path, params={"cursor": cursor}), api.ok("GET", path))
        order = [i["id"] for i in items]
        return items if order[5:] == [*reversed(current), *reversed(superseded)] else None

    # A person's catalog: the analyst's own first, then the current answers, then the superseded, newest
    # first each; no run's report among them.
    workspace_items = probe(settled, timeout=60)
    assert {i["id"] for i in workspace_items[:5]} == own and len(workspace_items) == 5 + RUNS
    assert not [i for i in workspace_items if i["kind"] == "artifact"]

    # Run 61: its first page holds both analyst publications and all three sources, before any run output.
    run = api.start_run(ws["id"], "Which judgements on Fund X still hold?", driver="external")
    agent = Agent(api, run["id"], run["lease"]["token"])
    first = agent.ok("GET", "/catalog")
    assert first == run["catalog"] and first["omitted"] == 5 + RUNS - len(first["items"]) > 0
    assert {i["id"] for i in first["items"][:5]} == own
    items = pages(lambda cursor: agent.ok("GET", "/catalog", params={"cursor": cursor}), first)
    ids = [i["id"] for i in items]
    assert len(ids) == len(set(ids)) == 5 + RUNS, "every item once"
    assert set(ids) == own | {p["id"] for p in published}
    assert ids[5:] == [*reversed(current), *reversed(superseded)]
    # Every publication item has its title (the analyst's, or the question its run answered); no item is a
    # run's report.
    titles = {p["id"]: p["question"] for p in published} | {memo["id"]: memo["title"], brief["id"]: brief["title"]}
    assert {i["id"]: i["title"] for i in items if i["kind"] == "publication"} == titles
    assert all(i["kind"] in ("publication", "source") and not i["title"].startswith("Report of run_") for i in items)

    # An item of page 2, never in the run's grant at admission, is read by the run (and listed before).
    later = items[len(first["items"])]
    assert later["id"] not in {i["id"] for i in first["items"]}
    read = agent.ok("POST", "/read", json={"ref": {"kind": "publication", "id": later["id"], "version": 1}})
    assert read["ref"] == {"kind": "publication", "id": later["id"], "version": 1} and "Nothing new" in read["text"]
    listed = {r["ref"]["id"] for r in api.ledger(run["id"]) if r["stage"] == "listed"}
    assert listed == set(ids)
    # ... as is the oldest, which no search was asked for, and it can be cited.
    oldest = items[-1]
    agent.ok("POST", "/read", json={"ref": {"kind": "publication", "id": oldest["id"], "version": 1}})
    done = agent.ok("POST", "/finish", json={"answer": f"It holds ({later['id']}@1, {oldest['id']}@1)."})
    assert {s["id"] for s in api.read(done["publication"])["sources"]} == {later["id"], oldest["id"]}

    # The lease rule stays for an external run; a person reads the catalog of a run the run host drives.
    assert api.http.get(f"/v1/runs/{run['id']}/catalog").status_code == 403
    hosted = api.start_run(ws["id"], "Which judgements on Fund X still hold?")
    api.ok("POST", f"/v1/runs/{hosted['id']}/cancel")
    path = f"/v1/runs/{hosted['id']}/catalog"
    shown = pages(lambda cursor: api.ok("GET", path, params={"cursor": cursor}), api.ok("GET", path))
    assert [i["id"] for i in shown[:5]] == [i["id"] for i in items[:5]] and len(shown) == 5 + RUNS + 1
    bad = api.http.get(path, params={"cursor": first["next_cursor"]})
    assert bad.status_code == 422 and bad.json()["error"]["details"]["field"] == "cursor", "another run's cursor"


def test_a_runs_catalog_page_keeps_its_admitted_order_when_kinds_interleave(api: Api) -> None:
    """The catalog tool lists sources first in its text, but the page it answers is the page as admitted:
    a report, a source, then another report, newest first."""
    ws = api.workspace()
    first = api.publish("Analyst memo: Fund X gates", "Fund X may gate redemptions.", ws["id"])
    api.wait_catalog(ws["id"], 1, timeout=60)
    assert api.upload(b"Fund X notice: 30 days.\n", "notice", "notice.txt", ws["id"])["status"] == "active"
    api.wait_catalog(ws["id"], 2, timeout=60)
    last = api.publish("Analyst brief: Fund X buffer", "Fund X keeps a buffer.", ws["id"])
    api.wait_catalog(ws["id"], 3, timeout=60)
    run = api.start_run(ws["id"], "Is Fund X liquid?", driver="external")
    assert [i["id"] for i in run["catalog"]["items"]] == [last["id"], "notice", first["id"]]
    agent = Agent(api, run["id"], run["lease"]["token"])
    assert agent.ok("GET", "/catalog") == run["catalog"]
