"""The Python client (clients/python) against the stack, in the suite's own environment (beside mcp 2.x):
the API typed, a run session's calls under its lease, a take-over fencing the old session, a session left
without finishing, and the async session. The install as a user does it: test_client_install.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from dossier_client import AsyncDossier, Dossier, Invalid, LeaseLost, NotFound
from dossier_client.models import Passage

from tests.support.api import Api, probe
from tests.support.documents import ANNOUNCEMENT, pdf
from tests.support.stack import RunningStack

QUESTION = "Does the announcement change Report A's view?"


@pytest.fixture
def api(stack: RunningStack) -> Api:
    return Api(stack)


@pytest.fixture
def dossier(api: Api, stack: RunningStack) -> Iterator[Dossier]:
    token = api.http.headers["Authorization"].removeprefix("Bearer ")
    with Dossier(stack.url, token) as client:
        yield client


def setting(dossier: Dossier) -> tuple[str, Any]:
    """A workspace with Report A and the announcement, through the client."""
    ws = dossier.create_workspace("Fund X", "Assess the liquidity risk of Fund X")
    a = dossier.publish("Report A: Fund X liquidity", "Fund X can meet redemptions within 30 days.", ws.id)
    assert dossier.upload(pdf(ANNOUNCEMENT), "announcement", ws.id, filename="a.pdf").status == "active"
    return ws.id, a


def wait_catalog(dossier: Dossier, workspace_id: str, count: int) -> None:
    probe(lambda: len(dossier.catalog(workspace_id).items) >= count, timeout=30)


def answer_of(passages: list[Passage]) -> str:
    lines = []
    for p in passages:
        sentence = p.text.split("\n\n", 1)[-1].strip().split("\n")[0].split(". ")[0].rstrip(".")
        lines.append(f"- {sentence} ({p.cite()}).")
    return "\n".join(lines)


def test_a_session_researches_and_publishes_what_it_read(dossier: Dossier, api: Api) -> None:
    ws, a = setting(dossier)
    wait_catalog(dossier, ws, 2)
    with dossier.external_run(ws, QUESTION, history=[a]) as run:
        assert run.admitted is not None and run.admitted.driver == "external" and run.lease.epoch == 1
        assert {item.id for item in run.catalog().items} == {a.id, "announcement"}
        hits = run.search("redemption gates")
        assert hits[0].evidence_id and hits[0].key == hits[0].evidence_id
        passage = run.read(hits[0])
        assert passage.cite() == f"announcement@v1 {passage.locator}" and "redemption gates" in passage.text
        report = run.read(f"{a.id}@v1")
        assert report.cite() == f"{a.id}@v1" and "30 days" in report.text
        run.write("notes/gates.md", passage.text[:200])
        with pytest.raises(NotFound):
            dossier.evidence("ev_missing")
        with pytest.raises(Invalid) as refused:
            run.finish(f"- Unread ({a.id}@v9).")
        assert refused.value.details["refs"][0]["id"] == a.id
        done = run.finish(answer_of([report, passage]), {"summary": "Gated."}, title="Fund X after the gates")
    assert done.status == "completed" and done.publication is not None
    assert done.checkpoint_proposal.status == "applied"
    published = dossier.publication_version(done.publication.id, done.publication.version)
    assert {(s.kind, s.id, s.version) for s in published.sources} == {
        ("publication", a.id, 1),
        ("source", "announcement", 1),
    }
    assert [row.stage for row in dossier.ledger(done.id) if row.stage == "read"] == ["read", "read"]
    assert "notes/gates.md" in {f.path for f in dossier.run_files(done.id)}


def test_a_take_over_fences_the_old_session_and_a_left_run_stays_running(dossier: Dossier) -> None:
    ws, a = setting(dossier)
    wait_catalog(dossier, ws, 2)
    with dossier.external_run(ws, QUESTION, history=[a]) as first:
        read = first.read(first.search("redemption gates")[0])
    # Left without finishing: still running, and the lease still held.
    assert dossier.run(first.run_id).status == "running"
    with dossier.take_over(first.run_id, force=True) as second:
        assert second.lease.epoch == 2 and second.resume is not None
        assert [r.path for r in second.resume.reads] == [read.path]
        with pytest.raises(LeaseLost) as lost:
            first.catalog()
        assert lost.value.details["current_epoch"] == 2
        # Lost once, lost for good: the next call is refused before it is sent.
        with pytest.raises(LeaseLost):
            first.search("anything")
        assert read.path in {f.path for f in dossier.run_files(first.run_id)}
        done = second.finish(answer_of([read]))
    assert done.status == "completed"


@pytest.mark.waits
def test_a_session_whose_lease_ran_out_takes_the_run_back_itself(dossier: Dossier) -> None:
    """Its renewals stopped (as when a laptop sleeps), the lease runs out; nobody else took the run, so
    the next call takes it over (a new epoch, no force) and is answered."""
    ws, _ = setting(dossier)
    wait_catalog(dossier, ws, 1)
    with dossier.external_run(ws, QUESTION, lease_seconds=30) as run:
        run.close()  # no more renewals
        first = run.lease
        time.sleep(max((first.expires_at + timedelta(seconds=2) - datetime.now(UTC)).total_seconds(), 0))
        hits = run.search("redemption gates")
        assert hits and run.lease.epoch == first.epoch + 1
        assert dossier.run(run.run_id).status == "running"
        assert dossier.cancel_run(run.run_id).status == "cancelled"


def test_an_admission_repeated_with_its_request_id_takes_the_run_over(dossier: Dossier) -> None:
    ws, _ = setting(dossier)
    with dossier.external_run(ws, QUESTION, request_id="client-repeat-1") as first:
        with dossier.external_run(ws, QUESTION, request_id="client-repeat-1") as again:
            assert again.run_id == first.run_id and again.lease.epoch == 2
            with pytest.raises(LeaseLost):
                first.catalog()
            assert dossier.cancel_run(again.run_id).status == "cancelled"


def test_the_async_session(api: Api, stack: RunningStack, dossier: Dossier) -> None:
    ws, a = setting(dossier)
    wait_catalog(dossier, ws, 2)

    async def research() -> Any:
        async with AsyncDossier(stack.url, dossier.http.headers["Authorization"].removeprefix("Bearer ")) as client:
            async with client.external_run(ws, QUESTION, history=[a]) as run:
                hits = await run.search("redemption gates")
                passage = await run.read(hits[0])
                await run.write("plan.md", "# Plan\n- read the gates\n")
                assert (await client.run(run.run_id)).stats.steps >= 3
                return await run.finish(answer_of([passage]))

    done = asyncio.run(research())
    assert done.status == "completed" and done.publication is not None
    assert "plan.md" in api.files(done.id)
