"""Checked claims on the whole stack: the running example's answer, a scripted answer that cites A@1 (read
and included) for what it says (supported) and for what it does not (unsupported); a finish citing what the run
never read (A@2) is answered back, in any escape a reader would see as a citation; and claims that go stale when
what they cite gets a new version, is withdrawn or is retired."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.api import Api, probe
from tests.support.citation_forms import CITED, written
from tests.support.cli import dossier
from tests.support.documents import ANNOUNCEMENT, QUESTION, pdf
from tests.support.stack import RunningStack, start_stack, stop_stack

# It runs on a stack of its own: the local stack only (make test-containers deselects it).
pytestmark = pytest.mark.local_stack

A1 = "Fund X can meet redemptions within 30 days. Its liquidity is adequate."


@pytest.fixture(scope="module")
def scripts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("claim-scripts")


@pytest.fixture(scope="module")
def scripted_stack(tmp_path_factory: pytest.TempPathFactory, scripts: Path) -> Iterator[RunningStack]:
    running = start_stack(tmp_path_factory.mktemp("claims-home"), extra_env={"DOSSIER_SCRIPTS_DIR": str(scripts)})
    try:
        yield running
    finally:
        stop_stack(running.proc)


def example(api: Api) -> tuple[dict, dict, dict]:
    ws = api.workspace()
    a1 = api.publish("Report A: Fund X liquidity", A1, ws["id"])
    api.revise(a1["id"], "Fund X liquidity is now weaker; redemptions may take 90 days.", 1)
    b1 = api.publish("Report B: Fund X disagrees", "Report B finds Fund X redemption liquidity inadequate.", ws["id"])
    api.upload(pdf(ANNOUNCEMENT), "announcement", "announcement.pdf", ws["id"])
    return ws, a1, b1


def claims_of(api: Api, run: dict) -> list[dict]:
    pub = run["publication"]
    return list(api.ok("GET", f"/v1/publications/{pub['id']}/versions/{pub['version']}/claims")["items"])


def test_claims_of_the_running_example_and_of_a_claim_its_source_does_not_back(
    scripted_stack: RunningStack, scripts: Path
) -> None:
    api = Api(scripted_stack)
    ws, a1, b1 = example(api)
    answer = (
        "## What earlier reports concluded\n"
        f"- Report A ({a1['id']}@1) found that Fund X can meet redemptions within 30 days.\n"
        "- {second}\n\n"
        "## Not resolved or not read\n"
        f"- {b1['id']}@1 was not read.\n"
    )
    steps = [
        {"name": "read_publication", "arguments": {"id": a1["id"], "version": 1}},
        # A@2 was never read: answered back, and the run goes on to a finish citing only A@1.
        {
            "name": "finish",
            "arguments": {
                "answer": answer.format(second=f"Liquidity is now weaker, redemptions take 90 days ({a1['id']}@2).")
            },
        },
        {"name": "finish", "arguments": {"answer": answer.format(second=f"Paris was sunny all week ({a1['id']}@1).")}},
    ]
    (scripts / "cite-a1-and-a2.json").write_text(json.dumps(steps))
    history = [{"publication_id": a1["id"], "version": 1}, {"publication_id": b1["id"], "version": 1}]
    runs = [
        api.start_run(ws["id"], "What holds?", model="scripted:cite-a1-and-a2", history=history),
        api.start_run(ws["id"], QUESTION, history=history),
    ]
    scripted, extractive = (api.wait_run(r["id"]) for r in runs)
    assert scripted["status"] == extractive["status"] == "completed", (scripted["error"], extractive["error"])

    assert scripted["stats"]["steps"] == 3
    claims = claims_of(api, scripted)
    a1_cited = [{"kind": "publication", "id": a1["id"], "version": 1}]
    assert [(c["refs"], c["support"]) for c in claims] == [(a1_cited, "supported"), (a1_cited, "unsupported")]
    assert claims[0]["score"] >= 0.5 and claims[1]["score"] == 0
    assert claims[0]["text"].startswith("Report A (")
    stats = scripted["stats"]
    assert (stats["claims_supported"], stats["claims_weak"], stats["claims_unsupported"]) == (1, 0, 1)

    # The extractive answer of the running example: every cited sentence is backed by what the run included.
    claims = claims_of(api, extractive)
    cited = {(r["kind"], r["id"], r["version"]) for c in claims for r in c["refs"]}
    assert {("publication", a1["id"], 1), ("publication", b1["id"], 1), ("source", "announcement", 1)} <= cited
    assert ("publication", a1["id"], 2) not in cited
    assert all(c["support"] == "supported" for c in claims), claims
    assert extractive["stats"]["claims_supported"] == len(claims) and extractive["stats"]["claims_unsupported"] == 0

    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    pub = scripted["publication"]
    printed = dossier(scripted_stack, token, "publication", "claims", pub["id"], str(pub["version"]))
    assert printed.returncode == 0 and "supported" in printed.stdout and "unsupported" in printed.stdout

    missing = api.http.get(f"/v1/publications/{a1['id']}/versions/9/claims")
    assert missing.status_code == 404
    api.ok("POST", f"/v1/publications/{a1['id']}/versions/1/withdraw", json={"reason": "wrong"})
    withdrawn = api.http.get(f"/v1/publications/{a1['id']}/versions/1/claims")
    assert withdrawn.status_code == 409 and withdrawn.json()["error"]["details"]["reason"] == "withdrawn"


def test_a_run_s_finish_citing_what_it_never_read_in_any_escape_is_answered_back(
    scripted_stack: RunningStack, scripts: Path
) -> None:
    """The run host's own finish, as an outside agent's: every way of writing a citation that the page links,
    of something the run never read at that version, is answered back (each finish in turn), until a finish
    citing only what it read is published."""
    api = Api(scripted_stack)
    ws, a1, b1 = example(api)
    good = f"Fund X can meet redemptions within 30 days ({a1['id']}@1).\n"
    steps = [
        {"name": "read_publication", "arguments": {"id": a1["id"], "version": 1}},
        *({"name": "finish", "arguments": {"answer": good + written(form, b1["id"])}} for form in CITED.values()),
        {"name": "finish", "arguments": {"answer": good}},
    ]
    (scripts / "cite-b1-escaped.json").write_text(json.dumps(steps))
    run = api.start_run(
        ws["id"], "What holds?", model="scripted:cite-b1-escaped", history=[{"publication_id": a1["id"], "version": 1}]
    )
    run = api.wait_run(run["id"])
    assert run["status"] == "completed", run["error"]
    assert run["stats"]["steps"] == len(steps)
    assert api.read(run["publication"])["body"] == good.strip()
    claims = claims_of(api, run)
    assert [(c["refs"], c["support"]) for c in claims] == [
        ([{"kind": "publication", "id": a1["id"], "version": 1}], "supported")
    ]
    assert api.read(run["publication"])["sources"] == [{"kind": "publication", "id": a1["id"], "version": 1}]


ANNOUNCED = "Fund X announced that redemption gates apply for thirty days from 20 November."
BUFFERS = "Fund X holds ample cash buffers across its bond portfolio."
# Version 2 has one page: the claim on page 1 is checked against the new page 1; page 2 is gone, so the
# claim on it is checked against the passage of version 2 that matches it best.
CORRECTED = f"{BUFFERS} Correction: the redemption gates were lifted in January."


def stale_of(api: Api, run: dict, count: int) -> list[dict | None]:
    """The claims' `stale`, once `count` of them show one."""

    def marked() -> list[dict | None] | None:
        stale = [c["stale"] for c in claims_of(api, run)]
        return stale if sum(s is not None for s in stale) >= count else None

    return list(probe(marked, timeout=60))


def test_claims_go_stale_when_what_they_cite_gets_a_new_version_is_withdrawn_or_retired(
    scripted_stack: RunningStack, scripts: Path
) -> None:
    api = Api(scripted_stack)
    ws = api.workspace()
    a1 = api.publish("Report A: Fund X liquidity", A1, ws["id"])
    api.upload(pdf([ANNOUNCED, BUFFERS]), "announcement", "announcement.pdf", ws["id"])
    api.wait_catalog(ws["id"], 2)
    hits = api.ok("GET", "/v1/evidence/search", params={"q": "announced buffers", "source_id": "announcement"})
    evidence = {h["locator"]: h["evidence_id"] for h in hits["items"]}
    answer = (
        "## What earlier reports concluded\n"
        f"- Report A found that Fund X can meet redemptions within 30 days ({a1['id']}@1).\n\n"
        "## What the new evidence says\n"
        f"- {ANNOUNCED[:-1]} (announcement@v1 page:1).\n"
        f"- {BUFFERS[:-1]} (announcement@v1 page:2).\n"
    )
    steps = [
        {"name": "read_publication", "arguments": {"id": a1["id"], "version": 1}},
        {"name": "read_evidence", "arguments": {"evidence_id": evidence["page:1"]}},
        {"name": "read_evidence", "arguments": {"evidence_id": evidence["page:2"]}},
        {"name": "finish", "arguments": {"answer": answer}},
    ]
    (scripts / "cite-then-change.json").write_text(json.dumps(steps))
    run = api.start_run(ws["id"], "What holds?", model="scripted:cite-then-change")
    run = api.wait_run(run["id"])
    assert run["status"] == "completed", run["error"]
    claims = claims_of(api, run)
    assert [(c["support"], c["stale"]) for c in claims] == [("supported", None)] * 3
    assert [c["locators"] for c in claims] == [[None], ["page:1"], ["page:2"]]

    # A new version of the source: both source claims say so, each checked again against version 2.
    api.upload(pdf([CORRECTED]), "announcement", "announcement-v2.pdf")
    v1, v2 = ({"kind": "source", "id": "announcement", "version": v} for v in (1, 2))
    stale = stale_of(api, run, 2)
    assert stale == [
        None,
        {"ref": v1, "reason": "new_version", "now": v2, "support_now": "weak"},  # the new page 1
        {"ref": v1, "reason": "new_version", "now": v2, "support_now": "supported"},  # the best matching passage
    ]

    # A new version of the report the run read: checked again against its body.
    api.revise(a1["id"], "Fund X can still meet redemptions within 30 days, although its liquidity is weaker.", 1)
    a_v1, a_v2 = ({"kind": "publication", "id": a1["id"], "version": v} for v in (1, 2))
    stale = stale_of(api, run, 3)
    assert stale[0] == {"ref": a_v1, "reason": "new_version", "now": a_v2, "support_now": "supported"}

    # The report's version the run read is withdrawn; the source is retired. A later version never hides either.
    api.ok("POST", f"/v1/publications/{a1['id']}/versions/1/withdraw", json={"reason": "wrong figures"})
    api.ok("POST", "/v1/sources/announcement/retire")
    final = probe(
        lambda: (s := [c["stale"] for c in claims_of(api, run)]) and all(x["reason"] != "new_version" for x in s) and s,
        timeout=60,
    )
    assert final == [
        {"ref": a_v1, "reason": "withdrawn", "now": None, "support_now": None},
        {"ref": v1, "reason": "retired", "now": None, "support_now": None},
        {"ref": v1, "reason": "retired", "now": None, "support_now": None},
    ]
    # What the claims said when they were checked stays as it was.
    assert [c["support"] for c in claims_of(api, run)] == ["supported"] * 3
