"""Runhost's request rules served in memory (tests/support/eventbus.py), on its own PostgreSQL database, without
NATS: admission, conversations and cancels, each with the events it commits to the outbox.

What admission asks of other services (the workspace's snapshot and association, the publications' check of
a run's history) is answered by `Owners`, stand-ins for those rules: each knows only what a test gave it.
No worker runs here, so an admitted run stays admitted until a cancel ends it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from services.runhost.app import create_app
from shared.contracts import publication as p
from shared.contracts import runhost as c
from shared.contracts import workspace as w
from shared.contracts.common import Actor, CheckReply, CheckRequest, Eligibility, Event
from shared.errors import Conflict, DomainError, Forbidden, Invalid, NotFound, TooLarge, Unavailable
from shared.settings import RunhostSettings
from tests.support.eventbus import InMemoryEvents, in_memory
from tests.support.infra import Infra

PLAN_BYTES = 64


@dataclass
class Owners:
    """The workspaces and publications runhost's rules ask about: a workspace of a scope is there once `add`ed; a
    publication version is there unless its id is in `missing`; an association fails with `refusal`, if set."""

    workspaces: dict[tuple[str, str], w.Goal] = field(default_factory=dict)
    missing: set[str] = field(default_factory=set)
    refusal: DomainError | None = None
    associated: list[w.AssociateRequest] = field(default_factory=list)

    def add(self, who: Actor, goal: str = "Assess Fund X's liquidity") -> str:
        workspace_id = f"ws_{uuid.uuid4().hex[:8]}"
        self.workspaces[(who.scope, workspace_id)] = w.Goal(version=3, text=goal, created_at=datetime.now(UTC))
        return workspace_id

    async def admission(self, actor: Actor, req: w.AdmissionRequest) -> w.Admission:
        goal = self.workspaces.get((actor.scope, req.workspace_id))
        if goal is None:
            raise NotFound("workspace not found", {"id": req.workspace_id})
        catalog = w.Catalog(items=[], complete=True, omitted=0)
        return w.Admission(workspace_id=req.workspace_id, status="active", goal=goal, catalog=catalog, catalog_as_of=7)

    async def workspace(self, actor: Actor, req: w.WorkspaceIdRequest) -> w.Workspace:
        admission = await self.admission(actor, w.AdmissionRequest(workspace_id=req.workspace_id, run_id="run_x"))
        now = admission.goal.created_at
        return w.Workspace(
            id=req.workspace_id, title="Fund X", status="active", goal=admission.goal, created_at=now, updated_at=now
        )

    async def associate(self, actor: Actor, req: w.AssociateRequest) -> w.AssociateReply:
        if self.refusal is not None:
            raise self.refusal
        self.associated.append(req)
        return w.AssociateReply(association="confirmed")

    async def check(self, actor: Actor, req: CheckRequest) -> CheckReply:
        return CheckReply(
            items=[
                Eligibility(
                    ref=ref,
                    available=ref.id not in self.missing,
                    reason="not_found" if ref.id in self.missing else None,
                )
                for ref in req.refs
            ]
        )


@pytest.fixture
def owners() -> Owners:
    return Owners()


@pytest.fixture
async def events(infra: Infra, owners: Owners) -> AsyncIterator[InMemoryEvents]:
    outside = {
        w.ADMISSION: owners.admission,
        w.GET: owners.workspace,
        w.ASSOCIATE: owners.associate,
        p.CHECK: owners.check,
    }
    served = in_memory(infra, "runhost", create_app, RunhostSettings, outside, DOSSIER_MAX_PLAN_BYTES=str(PLAN_BYTES))
    async with served:
        yield served


def actor() -> Actor:
    return Actor(scope=f"s{uuid.uuid4().hex[:8]}", principal="alice")


def asked(workspace_id: str, **fields: object) -> c.AdmitRequest:
    values = {"workspace_id": workspace_id, "question": "Is Fund X liquid?", "request_id": uuid.uuid4().hex}
    return c.AdmitRequest.model_validate(values | fields)


def announced(published: list[Event]) -> list[tuple[str, str, str]]:
    """Each event's type, run and status."""
    runs = [c.RunEvent.model_validate(e.data) for e in published]
    return [(e.type, r.run_id, r.status) for e, r in zip(published, runs, strict=True)]


async def runs_recorded(events: InMemoryEvents) -> int:
    async with events.runtime.db.transaction() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM runs"))


async def test_an_admission_freezes_the_workspaces_snapshot_and_is_announced_once(
    events: InMemoryEvents, owners: Owners
) -> None:
    who = actor()
    ws = owners.add(who)
    request = asked(ws)
    admitted = await events.call(c.ADMIT, request, actor=who)
    run = admitted.run
    assert admitted.created and (run.status, run.model, run.driver, run.goal_version) == (
        "admitted",
        "extractive",
        "dossier",
        3,
    )
    assert (run.workspace_id, run.request_id, run.workspace_association) == (ws, request.request_id, "pending")
    published = await events.relay()
    assert announced(published) == [(c.EVT_ADMITTED, run.id, "admitted")] and published[0].scope == who.scope
    [association] = owners.associated
    assert (association.kind, association.ref_id, association.run_id) == ("conversation", run.conversation_id, run.id)
    snapshots = [(by, req) for subject, by, req in events.outside.asked if subject == w.ADMISSION]
    assert [(by, req.workspace_id, req.run_id) for by, req in snapshots] == [(who, ws, run.id)]

    # The same request again answers the same run, asks no one and announces nothing; with other words, a conflict.
    again = await events.call(c.ADMIT, request, actor=who)
    assert (again.created, again.run.id) == (False, run.id)
    with pytest.raises(Conflict) as err:
        await events.call(c.ADMIT, request.model_copy(update={"question": "Is Fund Y liquid?"}), actor=who)
    assert err.value.details == {"run_id": run.id}
    assert await events.relay() == [] and len(owners.associated) == 1
    assert [subject for subject, _, _ in events.outside.asked].count(w.ADMISSION) == 1
    assert await events.call(c.GET_RUN, c.RunIdRequest(run_id=run.id), actor=who) == run.model_copy(
        update={"lease": None}
    )
    assert await runs_recorded(events) == 1


async def test_a_conversation_is_continued_only_in_its_workspace_and_scope(
    events: InMemoryEvents, owners: Owners
) -> None:
    who, stranger = actor(), actor()
    ws, other = owners.add(who), owners.add(who)
    first = (await events.call(c.ADMIT, asked(ws), actor=who)).run
    follow_up = asked(ws, question="And Fund Y?", conversation_id=first.conversation_id)
    second = (await events.call(c.ADMIT, follow_up, actor=who)).run
    assert second.conversation_id == first.conversation_id and second.id != first.id
    conversation = await events.call(
        c.GET_CONVERSATION, c.ConversationRequest(conversation_id=first.conversation_id), actor=who
    )
    assert (conversation.workspace_id, [r.id for r in conversation.runs]) == (ws, [first.id, second.id])

    await events.relay()
    elsewhere = asked(other, conversation_id=first.conversation_id)
    unknown = asked(ws, conversation_id="conv_missing")
    for request in (elsewhere, unknown):
        with pytest.raises(NotFound) as err:
            await events.call(c.ADMIT, request, actor=who)
        assert err.value.details == {"field": "conversation_id"}
    with pytest.raises(NotFound):
        await events.call(
            c.GET_CONVERSATION, c.ConversationRequest(conversation_id=first.conversation_id), actor=stranger
        )
    with pytest.raises(NotFound):
        await events.call(c.GET_RUN, c.RunIdRequest(run_id=first.id), actor=stranger)
    assert await events.relay() == [] and await runs_recorded(events) == 2


async def test_a_workspaces_runs_are_listed_newest_first_only_while_it_is_there(
    events: InMemoryEvents, owners: Owners
) -> None:
    who, stranger = actor(), actor()
    ws, other = owners.add(who), owners.add(who)
    runs = [(await events.call(c.ADMIT, asked(ws, question=f"Question {n}?"), actor=who)).run for n in range(3)]
    await events.call(c.ADMIT, asked(other), actor=who)
    first = await events.call(c.LIST_RUNS, c.ListRunsRequest(workspace_id=ws, limit=2), actor=who)
    assert first.next_cursor is not None
    rest = await events.call(c.LIST_RUNS, c.ListRunsRequest(workspace_id=ws, cursor=first.next_cursor), actor=who)
    assert [r.id for r in first.items + rest.items] == [r.id for r in reversed(runs)] and rest.next_cursor is None

    with pytest.raises(NotFound):  # the workspace is not the stranger's
        await events.call(c.LIST_RUNS, c.ListRunsRequest(workspace_id=ws), actor=stranger)
    del owners.workspaces[(who.scope, ws)]  # deleted: its runs live on, but its list answers not found
    with pytest.raises(NotFound):
        await events.call(c.LIST_RUNS, c.ListRunsRequest(workspace_id=ws), actor=who)
    assert (await events.call(c.GET_RUN, c.RunIdRequest(run_id=runs[0].id), actor=who)).workspace_id == ws


async def test_an_admission_refused_records_and_announces_nothing(events: InMemoryEvents, owners: Owners) -> None:
    who = actor()
    ws = owners.add(who)
    owners.missing.add("pub_gone")
    history = [{"publication_id": "pub_kept", "version": 1}, {"publication_id": "pub_gone", "version": 2}]
    refusals: list[tuple[c.AdmitRequest, Actor, type[DomainError], str | None]] = [
        (asked("ws_nowhere"), who, NotFound, None),
        (asked(ws), actor(), NotFound, None),  # the workspace of another scope
        (asked(ws, history=history), who, NotFound, "history.1"),
        (asked(ws, lease_seconds=60), who, Invalid, "lease_seconds"),
        (asked(ws, agent={"name": "an agent"}), who, Invalid, "agent"),
        (asked(ws, driver="external", model="extractive"), who, Invalid, "model"),
        (asked(ws, model="scripted:nowhere"), who, NotFound, "model"),  # no such script here
    ]
    for request, by, error, field_name in refusals:
        with pytest.raises(error) as err:
            await events.call(c.ADMIT, request, actor=by)
        if field_name is not None:
            assert err.value.details["field"] == field_name, request
    assert await events.relay() == [] and await runs_recorded(events) == 0 and owners.associated == []


async def test_an_association_that_fails_never_undoes_the_admission(events: InMemoryEvents, owners: Owners) -> None:
    who = actor()
    owners.refusal = Unavailable("the workspace service is closing")
    run = (await events.call(c.ADMIT, asked(owners.add(who)), actor=who)).run
    assert announced(await events.relay()) == [(c.EVT_ADMITTED, run.id, "admitted")]
    assert (await events.call(c.GET_RUN, c.RunIdRequest(run_id=run.id), actor=who)).status == "admitted"


async def test_cancelling_an_unclaimed_run_ends_it_once_and_freezes_its_plan(
    events: InMemoryEvents, owners: Owners
) -> None:
    who, stranger = actor(), actor()
    run = (await events.call(c.ADMIT, asked(owners.add(who)), actor=who)).run
    await events.relay()
    with pytest.raises(TooLarge) as big:
        await events.call(c.WRITE_PLAN, c.WritePlanRequest(run_id=run.id, text="é" * (PLAN_BYTES // 2 + 1)), actor=who)
    assert big.value.details == {"limit": PLAN_BYTES, "size": PLAN_BYTES + 2}  # counted in UTF-8 bytes
    with pytest.raises(NotFound):
        await events.call(c.CANCEL, c.RunIdRequest(run_id=run.id), actor=stranger)
    assert await events.relay() == []

    cancelled = await events.call(c.CANCEL, c.RunIdRequest(run_id=run.id), actor=who)
    assert cancelled.status == "cancelled" and cancelled.finished_at is not None
    assert announced(await events.relay()) == [(c.EVT_CANCELLED, run.id, "cancelled")]
    assert (await events.call(c.CANCEL, c.RunIdRequest(run_id=run.id), actor=who)).status == "cancelled"
    assert await events.relay() == []
    with pytest.raises(Conflict) as err:
        await events.call(c.WRITE_PLAN, c.WritePlanRequest(run_id=run.id, text="1. Read the memo."), actor=who)
    assert err.value.details == {"status": "cancelled"}


async def test_an_external_run_starts_under_its_lease_and_a_cancel_ends_it_at_once(
    events: InMemoryEvents, owners: Owners
) -> None:
    who = actor()
    request = asked(owners.add(who), driver="external", lease_seconds=60, agent={"name": "an agent"})
    run = (await events.call(c.ADMIT, request, actor=who)).run
    assert (run.status, run.model) == ("running", "external") and run.lease is not None and run.lease.epoch == 1
    assert announced(await events.relay()) == [(c.EVT_ADMITTED, run.id, "admitted"), (c.EVT_STARTED, run.id, "running")]
    with pytest.raises(Forbidden):  # its catalog is its agent's, read with the lease
        await events.call(c.RUN_CATALOG, c.RunCatalogRequest(run_id=run.id), actor=who)

    cancelled = await events.call(c.CANCEL, c.RunIdRequest(run_id=run.id), actor=who)
    assert cancelled.status == "cancelled"
    assert announced(await events.relay()) == [(c.EVT_CANCELLED, run.id, "cancelled")]
    assert (await events.call(c.CANCEL, c.RunIdRequest(run_id=run.id), actor=who)).status == "cancelled"
    assert await events.relay() == []
