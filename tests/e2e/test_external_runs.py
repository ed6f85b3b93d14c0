"""Runs driven by an outside agent over HTTP (`driver: "external"`): the same ledger, files, fencing and
publication as a run the run host drives, with the agent's calls as the run's steps."""

from __future__ import annotations

import re
import uuid
from typing import Any

import httpx
import pytest

from tests.support.agent import Agent
from tests.support.api import Api, gateway_client, probe
from tests.support.citation_forms import CITED, shown_as_text, written
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.gateway import sign_in
from tests.support.stack import RunningStack


@pytest.fixture
def api(stack: RunningStack) -> Api:
    return Api(stack)


def setting(api: Api) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    ws = api.workspace()
    a = api.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws["id"])
    b = api.publish("Report B: Fund X stress", "Report B finds Fund X liquidity inadequate under stress.", ws["id"])
    assert api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])["status"] == "active"
    api.wait_catalog(ws["id"], 3)
    return ws, a, b


def admit(api: Api, ws: dict[str, Any], a: dict[str, Any], **extra: Any) -> dict[str, Any]:
    body = {"driver": "external", "history": [{"publication_id": a["id"], "version": 1}]} | extra
    return api.start_run(ws["id"], "Does the announcement change Report A's view?", **body)


def stages(api: Api, run_id: str) -> list[tuple[str, str, str, int | None, str | None]]:
    return [
        (r["stage"], r["ref"]["kind"], r["ref"]["id"], r["ref"]["version"], r["locator"])
        for r in api.ledger(run_id)
        if r["ref"] is not None
    ]


def test_an_outside_agent_researches_takes_over_and_publishes_exactly_what_it_read(api: Api) -> None:
    ws, a, b = setting(api)
    request_id = uuid.uuid4().hex
    run = admit(api, ws, a, request_id=request_id)
    assert run["driver"] == "external" and run["status"] == "running" and run["model"] == "external"
    lease = run["lease"]
    assert lease["epoch"] == 1 and lease["token"]
    again = admit(api, ws, a, request_id=request_id)
    assert again["id"] == run["id"] and again["lease"] is None, "an idempotent repeat shows no token"
    agent = Agent(api, run["id"], lease["token"])

    # No token, or another: forbidden.
    assert api.http.get(f"/v1/runs/{run['id']}/catalog").status_code == 403
    assert Agent(api, run["id"], "rl_not-a-token").call("GET", "/catalog").status_code == 403

    catalog = agent.ok("GET", "/catalog")
    assert len(catalog["items"]) == 3
    agent.ok("GET", "/catalog")
    listed = [s for s in stages(api, run["id"]) if s[0] == "listed"]
    assert len(listed) == len({s[1:] for s in listed}) >= 3, "each catalog item is listed once"

    hits = agent.ok("GET", "/search", params={"q": "redemption gates"})["items"]
    assert hits and hits[0]["ref"]["id"] == "announcement"
    # Passages first, then the workspace's earlier publications the search found, read by their ref.
    kinds = [h["ref"]["kind"] for h in hits]
    assert kinds == sorted(kinds, reverse=True) and kinds[-1] == "publication"
    found = hits[-1]
    assert (found["evidence_id"], found["ref"], found["locator"]) == (
        None,
        {"kind": "publication", "id": a["id"], "version": 1},
        None,
    )
    assert "redemptions" in found["snippet"]
    evidence = hits[0]
    read_a = agent.ok("POST", "/read", json={"ref": {"kind": "publication", "id": a["id"], "version": 1}})
    assert read_a["path"].startswith("sources/") and "30 days" in read_a["text"]
    read_e = agent.ok("POST", "/read", json={"ref": {"kind": "evidence", "id": evidence["evidence_id"]}})
    assert "redemption gates" in read_e["text"] and read_e["locator"] == evidence["locator"]
    # The same read again answers from the run's file, and is recorded once.
    assert agent.ok("POST", "/read", json={"ref": {"kind": "evidence", "id": evidence["evidence_id"]}}) == read_e
    reads = [s for s in stages(api, run["id"]) if s[0] == "read"]
    assert sorted(s[1:4] for s in reads) == sorted([("publication", a["id"], 1), ("source", "announcement", 1)])

    assert agent.write("plan.md", "# Plan\n- read A@1 and the announcement\n").status_code == 204
    assert agent.write("notes/announcement.md", "Gates of 10 percent per quarter.").status_code == 204
    refused = agent.write("sources/forged.txt", "not read")
    assert refused.status_code == 422, refused.text

    # Another session takes over by force: the first token is fenced from every writer.
    taken = api.ok("POST", f"/v1/runs/{run['id']}/lease/take", json={"force": True})
    assert taken["lease"]["epoch"] == 2
    assert "read A@1" in taken["resume"]["plan"]
    assert {r["path"] for r in taken["resume"]["reads"]} == {read_a["path"], read_e["path"]}
    stale = agent.write("draft.md", "from the old session")
    assert stale.status_code == 409 and stale.json()["error"]["details"]["current_epoch"] == 2
    assert "draft.md" not in api.files(run["id"])
    agent = Agent(api, run["id"], taken["lease"]["token"])
    renewed = agent.ok("POST", "/lease")
    assert renewed["epoch"] == 2 and renewed["token"] == taken["lease"]["token"]

    # Citing what the run did not read is refused, and nothing is published.
    bad = agent.call("POST", "/finish", json={"answer": f"- Report B disagrees ({b['id']}@v1)."})
    assert bad.status_code == 422
    assert bad.json()["error"]["details"]["refs"][0]["id"] == b["id"]
    assert api.run(run["id"])["publication"] is None

    answer = (
        "## What earlier reports concluded\n"
        f"- Fund X can meet redemptions within 30 days ({a['id']}@v1).\n\n"
        "## What the new evidence says\n"
        f"- The board introduces redemption gates of 10 percent per quarter (announcement@v1 {evidence['locator']}).\n"
    )
    done = agent.ok(
        "POST",
        "/finish",
        json={"answer": answer, "title": "Fund X after the gates", "checkpoint": {"summary": "Gated."}},
    )
    assert done["status"] == "completed" and done["publication"] is not None
    publication = api.ok("GET", f"/v1/publications/{done['publication']['id']}/versions/1")
    assert publication["title"] == "Fund X after the gates"
    included = [s for s in stages(api, run["id"]) if s[0] == "included"]
    assert {(s[1], s[2], s[3]) for s in included} == {
        (r["kind"], r["id"], r["version"]) for r in publication["sources"]
    }
    assert all(r["model_request"] == "answer" for r in api.ledger(run["id"]) if r["stage"] == "included")
    assert done["stats"]["claims_supported"] >= 1 and done["stats"]["steps"] >= 8
    assert done["checkpoint_proposal"]["status"] == "applied"
    prov = api.ok("GET", f"/v1/runs/{run['id']}/prov")
    used = " ".join(str(v) for v in prov["used"].values())
    assert a["id"] in used and "announcement" in used
    # A finished run takes no more steps.
    assert agent.call("GET", "/catalog").status_code == 409


@pytest.mark.waits
def test_an_expired_lease_is_refused_until_taken_over_and_no_worker_takes_the_run(api: Api) -> None:
    ws, a, _ = setting(api)
    run = admit(api, ws, a, lease_seconds=30)
    agent = Agent(api, run["id"], run["lease"]["token"])
    held = api.http.post(f"/v1/runs/{run['id']}/lease/take", json={})
    assert held.status_code == 409 and held.json()["error"]["details"]["lease"] == "held"

    def expired() -> httpx.Response | None:
        r = agent.call("GET", "/catalog")
        return r if r.status_code == 409 else None

    refused = probe(expired, timeout=60, interval=1.0)
    assert refused.json()["error"]["details"]["lease"] == "expired"
    # The run host's workers never claim an external run, even with its lease expired.
    assert api.run(run["id"])["status"] == "running" and api.run(run["id"])["stats"]["model_requests"] == 0
    taken = api.ok("POST", f"/v1/runs/{run['id']}/lease/take", json={})
    assert taken["lease"]["epoch"] == 2 and taken["resume"]["reads"] == []
    assert Agent(api, run["id"], taken["lease"]["token"]).call("GET", "/catalog").status_code == 200
    cancelled = api.ok("POST", f"/v1/runs/{run['id']}/cancel")
    assert cancelled["status"] == "cancelled"


def test_external_admission_refusals(api: Api, stack: RunningStack) -> None:
    ws = api.workspace()
    for extra, field in (({"lease_seconds": 5}, "lease_seconds"), ({"model": "extractive"}, "model")):
        body = {"question": "q?", "request_id": uuid.uuid4().hex, "driver": "external"} | extra
        r = api.http.post(f"/v1/workspaces/{ws['id']}/runs", json=body)
        assert r.status_code == 422, r.text
        assert field in r.text
    dossier_run = api.start_run(ws["id"], "q?", model="extractive")
    take = api.http.post(f"/v1/runs/{dossier_run['id']}/lease/take", json={"force": True})
    assert take.status_code == 409
    other = Api(stack)
    assert other.http.post(f"/v1/runs/{dossier_run['id']}/lease/take", json={"force": True}).status_code == 404


def test_a_withdrawn_publication_and_a_retired_source_are_refused_even_from_the_runs_own_copy(api: Api) -> None:
    """The run's copy in `sources/` is no pass: a version withdrawn or retired after the run read it is refused
    when read again (an `unavailable` row), and an answer citing it publishes without it as a source."""
    ws, a, b = setting(api)
    run = admit(
        api, ws, a, history=[{"publication_id": a["id"], "version": 1}, {"publication_id": b["id"], "version": 1}]
    )
    agent = Agent(api, run["id"], run["lease"]["token"])
    pub_a = {"kind": "publication", "id": a["id"], "version": 1}
    pub_b = {"kind": "publication", "id": b["id"], "version": 1}
    assert "30 days" in agent.ok("POST", "/read", json={"ref": pub_a})["text"]
    assert "stress" in agent.ok("POST", "/read", json={"ref": pub_b})["text"]
    hit = agent.ok("GET", "/search", params={"q": "redemption gates"})["items"][0]
    passage = agent.ok("POST", "/read", json={"ref": {"kind": "evidence", "id": hit["evidence_id"]}})
    assert passage["ref"] == {"kind": "source", "id": "announcement", "version": 1}

    for pub in (a, b):
        api.ok("POST", f"/v1/publications/{pub['id']}/versions/1/withdraw", json={"reason": "retracted"})
    api.ok("POST", "/v1/sources/announcement/retire")

    # Read again: each answered from the run's own file before; now the owner is asked and refuses.
    again = agent.call("POST", "/read", json={"ref": pub_a})
    assert again.status_code == 409, again.text
    assert again.json()["error"]["details"]["reason"] == "withdrawn"
    again = agent.call("POST", "/read", json={"ref": {"kind": "evidence", "id": hit["evidence_id"]}})
    assert again.status_code == 409, again.text
    assert again.json()["error"]["details"]["reason"] == "retired"
    refused = {
        (r["ref"]["kind"], r["ref"]["id"], r["reason"]) for r in api.ledger(run["id"]) if r["stage"] == "unavailable"
    }
    assert refused == {("publication", a["id"], "withdrawn"), ("source", "announcement", "retired")}

    # An answer citing them (B was not read again) is published, but none of them is its source or supports it.
    answer = (
        "## What earlier reports concluded\n"
        f"- Fund X can meet redemptions within 30 days ({a['id']}@v1).\n"
        f"- Report B finds Fund X liquidity inadequate under stress ({b['id']}@v1).\n\n"
        "## What the new evidence says\n"
        f"- The board introduces redemption gates of 10 percent per quarter (announcement@v1 {passage['locator']}).\n"
    )
    done = agent.ok("POST", "/finish", json={"answer": answer})
    assert done["status"] == "completed" and done["publication"] is not None
    published = api.read(done["publication"])
    assert published["sources"] == []
    assert done["stats"]["claims_supported"] == 0 and done["stats"]["claims_unsupported"] == 3
    ledger = api.ledger(run["id"])
    assert not [r for r in ledger if r["stage"] == "included"]
    cited = {(r["ref"]["id"], r["reason"]) for r in ledger if r["stage"] == "unavailable" and r["model_request"]}
    assert cited == {(a["id"], "withdrawn"), (b["id"], "withdrawn"), ("announcement", "retired")}


def _cite_links(page: httpx.Response, element: str) -> list[str]:
    """The workbench links in one element of a page (`#pub-body`, `#answer`): every link into the
    workbench an answer shows is a citation the check counted."""
    assert page.status_code == 200, page.text[:300]
    body = re.search(rf'id="{element}">(.*?)</div>', page.text, re.S)
    assert body, page.text[:500]
    return [h for h in re.findall(r'<a href="([^"]*)"', body[1]) if not h.startswith("https://example.com/")]


def test_a_citation_is_read_as_the_reader_reads_it_whatever_its_escape_or_heading(
    api: Api, stack: RunningStack
) -> None:
    ws, a, b = setting(api)
    run = admit(api, ws, a)
    agent = Agent(api, run["id"], run["lease"]["token"])
    agent.ok("POST", "/read", json={"ref": {"kind": "publication", "id": a["id"], "version": 1}})

    # Each way of writing a citation of B@1 (never read) that the page would show as a link is refused,
    # naming what it cites; so is a passage of a source version never read.
    for name, form in CITED.items():
        r = agent.call("POST", "/finish", json={"answer": written(form, b["id"])})
        assert r.status_code == 422, (name, r.status_code, r.text[:300])
        [ref] = r.json()["error"]["details"]["refs"]
        expected = (
            {"kind": "source", "id": "announcement", "version": 9, "locator": "page:1"}
            if "{src}" in form
            else {"kind": "publication", "id": b["id"], "version": 1, "locator": None}
        )
        assert ref == expected, name
    assert api.run(run["id"])["publication"] is None

    # What the page shows as text (code, a document's own links, split or look-alike ids, a section about
    # what was not read) cites nothing; A@1 written with an escape is the one citation, read and included.
    escaped = written(CITED["backslash-escaped underscore"], a["id"])  # "pub\\_…@1 found it."
    answer = f"Fund X can meet redemptions within 30 days: {escaped}\n\n"
    done = agent.ok("POST", "/finish", json={"answer": answer + shown_as_text(b["id"])})
    assert done["status"] == "completed"
    pub = done["publication"]
    published = api.read(pub)
    assert published["sources"] == [{"kind": "publication", "id": a["id"], "version": 1}]
    claims = api.ok("GET", f"/v1/publications/{pub['id']}/versions/{pub['version']}/claims")["items"]
    assert [c["refs"] for c in claims] == [[{"kind": "publication", "id": a["id"], "version": 1}]]
    assert [s[1:4] for s in stages(api, run["id"]) if s[0] == "included"] == [("publication", a["id"], 1)]

    # The workbench links exactly that: on the publication's page and on the run's.
    with gateway_client(base_url=stack.url, timeout=30) as browser:
        sign_in(browser, api.http.headers["Authorization"].removeprefix("Bearer "))
        page = browser.get(f"/publications/{pub['id']}/versions/{pub['version']}")
        assert _cite_links(page, "pub-body") == [f"/publications/{a['id']}/versions/1"]
        assert _cite_links(browser.get(f"/runs/{run['id']}"), "answer") == [f"/publications/{a['id']}/versions/1"]
    # B@1 is on the page as text, and nothing on it leads to B.
    assert f"<li>{b['id']}@1 found it.</li>" in page.text
    assert f'href="/publications/{b["id"]}/' not in page.text
