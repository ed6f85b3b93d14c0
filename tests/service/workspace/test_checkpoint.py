"""The checkpoint: CAS revisions, questions, proposals from runs, and re-validation of sources on read."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from shared.bus import BusClient
from shared.contracts import publication as p
from shared.contracts import workspace as w
from shared.contracts.common import Actor
from shared.errors import Conflict, NotFound, TooLarge
from shared.settings import WorkspaceSettings
from tests.service.workspace.conftest import create
from tests.support.owners import AssetsStandIn, RequestTap

# Every test here asks the workspace service.
pytestmark = pytest.mark.usefixtures("workspace")


async def put(bus: BusClient, who: Actor, workspace_id: str, expected: int, **fields: Any) -> dict[str, Any]:
    body = {"workspace_id": workspace_id, "expected_revision": expected, **fields}
    return dict(await bus.call_raw(w.CHECKPOINT_UPDATE, body, actor=who))


async def get(bus: BusClient, who: Actor, workspace_id: str) -> dict[str, Any]:
    return dict(await bus.call_raw(w.CHECKPOINT_GET, {"workspace_id": workspace_id}, actor=who))


async def propose(bus: BusClient, who: Actor, workspace_id: str, expected: int, **fields: Any) -> dict[str, Any]:
    body = {"workspace_id": workspace_id, "expected_revision": expected, **fields}
    return dict(await bus.call_raw(w.CHECKPOINT_PROPOSE, body, actor=who))


async def derived_from_run(bus: BusClient, who: Actor, assets: AssetsStandIn, run_id: str) -> dict[str, Any]:
    """A run's provenance: its published answer, and the one source it read (S1 v1)."""
    pub = await bus.call_raw(p.COMMIT, {"title": "Report A", "body": "A"}, actor=who)
    assets.put(who.scope, "S1")
    return {
        "run_id": run_id,
        "publication": {"id": pub["id"], "version": 1},
        "sources": [{"kind": "source", "id": "S1", "version": 1}],
    }


async def test_revisions_are_compare_and_swap_from_zero(bus: BusClient, who: Actor) -> None:
    ws = await create(bus, who)
    with pytest.raises(NotFound) as none_yet:
        await get(bus, who, ws["id"])
    assert "no checkpoint" in none_yet.value.message
    with pytest.raises(Conflict) as err:
        await put(bus, who, ws["id"], 1, summary="too early")
    assert err.value.details == {"current_revision": 0}
    first = await put(bus, who, ws["id"], 0, summary="Fund X looks liquid.")
    assert first["revision"] == 1 and first["status"] == "valid" and first["advisory"] is True
    assert first["author"] == "user" and first["summary"] == "Fund X looks liquid."
    assert first["derived_from"] == {"run_id": None, "publication": None, "sources": []}
    with pytest.raises(Conflict) as again:
        await put(bus, who, ws["id"], 0, summary="lost")
    assert again.value.details == {"current_revision": 1}
    assert await get(bus, who, ws["id"]) == first


async def test_twenty_concurrent_updates_exactly_one_wins(bus: BusClient, who: Actor) -> None:
    ws = await create(bus, who)
    await put(bus, who, ws["id"], 0, summary="base")
    results = await asyncio.gather(
        *(put(bus, who, ws["id"], 1, summary=f"writer {i}") for i in range(20)), return_exceptions=True
    )
    winners = [r for r in results if isinstance(r, dict)]
    assert len(winners) == 1 and winners[0]["revision"] == 2
    assert all(isinstance(r, Conflict) for r in results if r not in winners)
    revisions = (await bus.call_raw(w.CHECKPOINT_REVISIONS, {"workspace_id": ws["id"]}, actor=who))["items"]
    assert [r["revision"] for r in revisions] == [1, 2]


async def test_questions_survive_updates_that_do_not_resolve_them(
    workspace: WorkspaceSettings, bus: BusClient, who: Actor
) -> None:
    ws = await create(bus, who)
    r1 = await put(bus, who, ws["id"], 0, summary="s1", add_questions=["Is the gate enforceable?", "What is T+3?"])
    q1, q2 = (q["id"] for q in r1["open_questions"])
    r2 = await put(bus, who, ws["id"], 1, summary="s2")  # omits the questions entirely
    assert [(q["id"], q["status"]) for q in r2["open_questions"]] == [(q1, "open"), (q2, "open")]
    r3 = await put(bus, who, ws["id"], 2, resolve_questions=[q1])
    assert [(q["id"], q["status"]) for q in r3["open_questions"]] == [(q1, "resolved"), (q2, "open")]
    assert r3["summary"] == "s2"  # an omitted summary is kept
    r4 = await propose(bus, who, ws["id"], 3, summary="from a run", add_questions=["New doubt?"])
    assert r4["result"] == "applied"
    latest = await get(bus, who, ws["id"])
    assert [q["status"] for q in latest["open_questions"]] == ["resolved", "open", "open"]
    assert latest["open_questions"][2]["text"] == "New doubt?"

    with pytest.raises(Conflict) as err:
        await put(bus, who, ws["id"], 4, resolve_questions=["q_nope"])
    assert err.value.details["field"] == "resolve_questions"
    with pytest.raises(TooLarge):
        await put(bus, who, ws["id"], 4, summary="x" * (workspace.max_summary_bytes + 1))
    assert (await get(bus, who, ws["id"]))["revision"] == 4


@pytest.mark.usefixtures("publication")
async def test_proposals_answer_applied_stale_or_invalid(assets: AssetsStandIn, bus: BusClient, who: Actor) -> None:
    ws = await create(bus, who)
    derived = await derived_from_run(bus, who, assets, "run_9")
    applied = await propose(bus, who, ws["id"], 0, summary="A still holds.", add_questions=["Q?"], derived_from=derived)
    assert applied == {"result": "applied", "revision": 1, "reason": None}
    checkpoint = await get(bus, who, ws["id"])
    assert checkpoint["author"] == "model" and checkpoint["derived_from"] == derived
    assert checkpoint["status"] == "valid" and checkpoint["summary"] == "A still holds." and checkpoint["advisory"]

    stale = await propose(bus, who, ws["id"], 0, summary="a run that lost the race")
    assert stale["result"] == "stale" and stale["revision"] is None
    bad_proposals: list[dict[str, Any]] = [
        {"summary": "x", "resolve_questions": ["q_unknown"]},
        {"summary": 42},
        {"summary": "   "},
        {},
        {"summary": "x", "derived_from": {"sources": [{"kind": "evidence", "id": "ev_1", "version": 1}]}},
        {"summary": "x", "derived_from": {"sources": [{"kind": "source", "id": "S1", "version": None}]}},
        {"summary": "x", "derived_from": "not an object"},
        {"summary": "x", "add_questions": [""]},
    ]
    for fields in bad_proposals:
        answer = await propose(bus, who, ws["id"], 1, **fields)
        assert answer["result"] == "invalid" and answer["revision"] is None and answer["reason"], fields
    wrong_revision = await bus.call_raw(
        w.CHECKPOINT_PROPOSE, {"workspace_id": ws["id"], "expected_revision": "one", "summary": "x"}, actor=who
    )
    assert wrong_revision["result"] == "invalid"
    assert (await get(bus, who, ws["id"]))["revision"] == 1  # nothing changed
    await bus.call_raw(w.DELETE, {"workspace_id": ws["id"]}, actor=who)
    gone = await propose(bus, who, ws["id"], 1, summary="after delete")
    assert gone == {"result": "invalid", "revision": None, "reason": "workspace_not_found"}


@pytest.mark.usefixtures("publication")
async def test_a_runs_proposal_made_again_by_a_later_attempt_answers_what_the_first_was_given(
    assets: AssetsStandIn, bus: BusClient, who: Actor
) -> None:
    """A run's finishing steps are repeated from the start by a worker that takes the run over: its proposal
    comes again with the revision the run began with, after the first attempt's made the next revision."""
    ws = await create(bus, who)
    derived = await derived_from_run(bus, who, assets, "run_twice")
    first = await propose(bus, who, ws["id"], 0, summary="A holds.", derived_from=derived)
    assert first == {"result": "applied", "revision": 1, "reason": None}
    await put(bus, who, ws["id"], 1, summary="a person's edit after the run")
    again = await propose(bus, who, ws["id"], 0, summary="A holds.", derived_from=derived)
    assert again == first
    revisions = (await bus.call_raw(w.CHECKPOINT_REVISIONS, {"workspace_id": ws["id"]}, actor=who))["items"]
    assert [r["revision"] for r in revisions] == [1, 2]  # nothing written the second time

    # Another run (or none named) with the same stale revision is stale, and so is the same run's proposal to
    # another workspace.
    other = await propose(bus, who, ws["id"], 0, summary="x", derived_from=derived | {"run_id": "run_other"})
    assert other["result"] == "stale"
    assert (await propose(bus, who, ws["id"], 0, summary="x"))["result"] == "stale"
    elsewhere = await create(bus, who)
    await put(bus, who, elsewhere["id"], 0, summary="base")
    assert (await propose(bus, who, elsewhere["id"], 0, summary="x", derived_from=derived))["result"] == "stale"


@pytest.mark.usefixtures("publication")
async def test_a_withdrawn_source_makes_the_checkpoint_unavailable(
    assets: AssetsStandIn, bus: BusClient, who: Actor
) -> None:
    ws = await create(bus, who)
    pub_a = await bus.call_raw(p.COMMIT, {"title": "Report A", "body": "A"}, actor=who)
    pub_b = await bus.call_raw(p.COMMIT, {"title": "Report B", "body": "B"}, actor=who)
    assets.put(who.scope, "S1", active=1, v1=None)
    assets.put(who.scope, "S2")
    sources = [
        {"kind": "publication", "id": pub_b["id"], "version": 1},
        {"kind": "source", "id": "S1", "version": 1},
        {"kind": "source", "id": "S2", "version": 1},
    ]
    derived = {"run_id": "run_1", "publication": {"id": pub_a["id"], "version": 1}, "sources": sources}
    await propose(bus, who, ws["id"], 0, summary="B contradicts A.", add_questions=["Q1"], derived_from=derived)
    assert (await get(bus, who, ws["id"]))["status"] == "valid"

    await bus.call_raw(p.WITHDRAW, {"id": pub_b["id"], "version": 1, "reason": "wrong numbers"}, actor=who)
    assets.put(who.scope, "S1", active=2, v1="superseded", v2=None)
    assets.batches.clear()
    tap = await RequestTap(bus._nc, p.CHECK).start()
    try:
        checkpoint = await get(bus, who, ws["id"])
    finally:
        await tap.stop()
    assert checkpoint["status"] == "unavailable" and checkpoint["summary"] is None
    assert checkpoint["unavailable_sources"] == [
        {"ref": sources[0], "reason": "withdrawn"},
        {"ref": sources[1], "reason": "superseded"},
    ]
    assert [q["text"] for q in checkpoint["open_questions"]] == ["Q1"]
    # Every source re-validated, in one batch per owner: two publications in one, two sources in one.
    assert [len(batch) for batch in tap.refs] == [2] and [len(b) for b in assets.batches] == [2]

    # An owner that does not answer is never taken as a yes.
    await assets.stop()
    blind = await get(bus, who, ws["id"])
    assert blind["status"] == "unavailable" and blind["summary"] is None
    assert {(u["ref"]["id"], u["reason"]) for u in blind["unavailable_sources"]} == {
        (pub_b["id"], "withdrawn"),
        ("S1", "owner_unreachable"),
        ("S2", "owner_unreachable"),
    }


@pytest.mark.usefixtures("publication")
async def test_revisions_are_listed_and_each_is_validated(bus: BusClient, who: Actor) -> None:
    ws = await create(bus, who)
    pub = await bus.call_raw(p.COMMIT, {"title": "Report A", "body": "A"}, actor=who)
    derived = {"run_id": "run_1", "publication": {"id": pub["id"], "version": 1}, "sources": []}
    await propose(bus, who, ws["id"], 0, summary="from run 1", derived_from=derived)
    await put(bus, who, ws["id"], 1, add_questions=["kept summary, new question"])
    await put(bus, who, ws["id"], 2, summary="the person's own words")
    await bus.call_raw(p.WITHDRAW, {"id": pub["id"], "version": 1, "reason": "retracted"}, actor=who)
    items = (await bus.call_raw(w.CHECKPOINT_REVISIONS, {"workspace_id": ws["id"]}, actor=who))["items"]
    assert [(r["revision"], r["author"], r["status"], r["summary"]) for r in items] == [
        (1, "model", "unavailable", None),
        (2, "user", "unavailable", None),  # the summary it kept still derives from the withdrawn report
        (3, "user", "valid", "the person's own words"),
    ]
    assert items[2]["derived_from"] == {"run_id": None, "publication": None, "sources": []}
