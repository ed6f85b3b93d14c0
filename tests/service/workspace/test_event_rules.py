"""The workspace's event rules with their typed payloads, served in memory (tests/support/eventbus.py).

No NATS connection is made: the service is built by its own `create_app`, and its marked rules run on its
own PostgreSQL database, each event's effect committed with its inbox row as the durable consumers do.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from services.workspace.app import create_app
from services.workspace.drift_repository import DriftRepository
from services.workspace.repository import WorkspaceRepository
from shared.contracts import assets as s
from shared.contracts import publication as p
from shared.contracts import workspace as w
from shared.contracts.common import Actor, EventType, Ref
from shared.outbox import new_event
from shared.settings import WorkspaceSettings
from tests.support.eventbus import InMemoryEvents, in_memory
from tests.support.infra import Infra


@pytest.fixture
async def events(infra: Infra) -> AsyncIterator[InMemoryEvents]:
    async with in_memory(infra, "workspace", create_app, WorkspaceSettings) as served:
        yield served


def committed(workspace_id: str, sources: list[Ref], **fields: object) -> p.VersionEvent:
    values: dict[str, object] = {
        "id": f"pub_{uuid.uuid4().hex[:8]}",
        "version": 1,
        "title": "Report A: Fund X liquidity",
        "content_hash": "0" * 64,
        "workspace_id": workspace_id,
        "run_id": None,
        "sources": sources,
        "created_at": datetime.now(UTC),
    }
    return p.VersionEvent.model_validate(values | fields)


def activated(source_id: str, version: int) -> s.VersionActivated:
    extraction = s.Extraction(status="complete", units_total=1, units_extracted=1, notes=[])
    superseded = Ref(kind="source", id=source_id, version=version - 1) if version > 1 else None
    return s.VersionActivated(
        source_id=source_id, asset_id=f"ast_{uuid.uuid4().hex[:8]}", version=version, content_hash="1" * 64,
        kind="pdf", filename=f"{source_id}.pdf", run_id=None, extraction=extraction, superseded=superseded,
        created_at=datetime.now(UTC),
    )  # fmt: skip


async def workspace_of(events: InMemoryEvents, who: Actor) -> str:
    created = await events.call(w.CREATE, w.CreateRequest(title="Fund X liquidity", goal="Assess it"), actor=who)
    await events.relay()  # its own `workspace.created`, which it does not follow
    return created.id


async def test_a_new_version_of_a_cited_source_drifts_once_and_its_citers_are_rechecked(
    events: InMemoryEvents, who: Actor
) -> None:
    ws = await workspace_of(events, who)
    cited = Ref(kind="source", id="announcement", version=1)
    report = committed(ws, [cited])
    await events.publish(p.EVT_COMMITTED, report, scope=who.scope)

    first = await events.publish(s.EVT_VERSION_ACTIVATED, activated("announcement", 2), scope=who.scope)
    # The re-check asks the publication service, which is not here: its event is left unfollowed.
    announced = await events.relay(follow=())
    drifts = await events.call(w.DRIFT, w.DriftRequest(workspace_id=ws), actor=who)
    [drift] = drifts.items
    report_ref = Ref(kind="publication", id=report.id, version=1)
    assert (drift.ref, drift.cited_by, drift.new_version, drift.reason) == (cited, [report_ref], 2, "new_version")
    assert [e.type for e in announced].count(w.EVT_DRIFT_DETECTED) == 1
    [changed] = [w.CitationChanged.model_validate(e.data) for e in announced if e.type == w.EVT_CITATION_CHANGED]
    assert (changed.publication, changed.ref, changed.now) == (report_ref, cited, Ref(kind="source", **{
        "id": "announcement", "version": 2}))  # fmt: skip

    # The same event again is a duplicate; the same change under a new event id records nothing more.
    assert await events.deliver(first) == "duplicate"
    await events.publish(s.EVT_VERSION_ACTIVATED, activated("announcement", 2), scope=who.scope)
    again = await events.relay(follow=())
    assert [e.type for e in again if e.type == w.EVT_DRIFT_DETECTED] == []
    assert len((await events.call(w.DRIFT, w.DriftRequest(workspace_id=ws), actor=who)).items) == 1


async def test_a_first_version_or_another_scope_drifts_nothing(events: InMemoryEvents, who: Actor) -> None:
    ws = await workspace_of(events, who)
    await events.publish(p.EVT_COMMITTED, committed(ws, [Ref(kind="source", id="memo", version=1)]), scope=who.scope)
    await events.publish(s.EVT_VERSION_ACTIVATED, activated("memo", 1), scope=who.scope)
    await events.publish(s.EVT_VERSION_ACTIVATED, activated("memo", 2), scope=f"x{uuid.uuid4().hex[:8]}")
    assert await events.relay(follow=()) == []
    assert (await events.call(w.DRIFT, w.DriftRequest(workspace_id=ws), actor=who)).items == []


async def test_an_association_asked_of_a_deleted_workspace_is_refused_by_an_event(
    events: InMemoryEvents, who: Actor
) -> None:
    ws = await workspace_of(events, who)
    await events.call(w.DELETE, w.WorkspaceIdRequest(workspace_id=ws), actor=who)
    await events.relay()
    requested = s.AssociationRequested(workspace_id=ws, source_id="S-upload", asset_id="ast_1", version=1)
    await events.publish(s.EVT_ASSOCIATION_REQUESTED, requested, scope=who.scope)
    [refused] = await events.relay()
    assert refused.type == w.EVT_ASSOCIATION_REFUSED and refused.scope == who.scope
    assert w.AssociationRefused.model_validate(refused.data).reason == "workspace_deleted"


async def test_a_withdrawn_citation_drifts_and_a_malformed_payload_is_skipped_once(
    events: InMemoryEvents, who: Actor
) -> None:
    ws = await workspace_of(events, who)
    cited = committed(ws, [], title="Report A")
    citing = committed(ws, [Ref(kind="publication", id=cited.id, version=1)], title="Report B")
    for version in (cited, citing):
        await events.publish(p.EVT_COMMITTED, version, scope=who.scope)
    await events.publish(p.EVT_WITHDRAWN, cited.model_copy(update={"reason": "wrong figures"}), scope=who.scope)
    await events.relay(follow=())
    [drift] = (await events.call(w.DRIFT, w.DriftRequest(workspace_id=ws), actor=who)).items
    assert (drift.ref.id, drift.reason, drift.new_version) == (cited.id, "withdrawn", None)

    malformed = await events.publish(p.EVT_REVISED, citing, scope=who.scope)
    bad = malformed.model_copy(update={"id": f"evt_{uuid.uuid4().hex}", "data": {"id": cited.id}})
    assert await events.deliver(bad) == "handled"  # logged and skipped, its inbox row kept
    assert await events.deliver(bad) == "duplicate"


def change_first(kind: str, cited: p.VersionEvent) -> tuple[EventType[Any], Any, Ref, str, int | None]:
    """A change of what a report cites, as its owner announces it: (event type, payload, the cited ref, the
    drift's reason, its new version)."""
    if kind == "source new version":
        return (
            s.EVT_VERSION_ACTIVATED,
            activated("announcement", 2),
            Ref(kind="source", id="announcement", version=1),
            "new_version",
            2,
        )
    if kind == "source retired":
        retired = s.SourceRetired(source_id="announcement", versions=[1])
        return s.EVT_SOURCE_RETIRED, retired, Ref(kind="source", id="announcement", version=1), "retired", None
    ref = Ref(kind="publication", id=cited.id, version=1)
    if kind == "publication revised":
        return p.EVT_REVISED, cited.model_copy(update={"version": 2}), ref, "new_version", 2
    return p.EVT_WITHDRAWN, cited.model_copy(update={"reason": "wrong figures"}), ref, "withdrawn", None


@pytest.mark.parametrize(
    "kind", ["source new version", "source retired", "publication revised", "publication withdrawn"]
)
async def test_a_change_handled_before_the_citing_version_is_committed_still_drifts_and_rechecks_it(
    events: InMemoryEvents, who: Actor, kind: str
) -> None:
    """The owners' events come in no order between one another: a source's version 2, made after a run's
    answer that cites version 1, can be handled before that answer's event (seen under load). The change is
    applied when the citations are recorded."""
    ws = await workspace_of(events, who)
    report_a = committed(ws, [], title="Report A")
    event_type, payload, ref, reason, new_version = change_first(kind, report_a)
    citing = committed(ws, [ref], title="Report B")  # made before the change
    await events.publish(event_type, payload, scope=who.scope)
    await events.relay(follow=())
    await events.publish(p.EVT_COMMITTED, citing, scope=who.scope)
    announced = await events.relay(follow=())
    [drift] = (await events.call(w.DRIFT, w.DriftRequest(workspace_id=ws), actor=who)).items
    citing_ref = Ref(kind="publication", id=citing.id, version=1)
    assert (drift.ref, drift.cited_by, drift.new_version, drift.reason) == (ref, [citing_ref], new_version, reason)
    [changed] = [w.CitationChanged.model_validate(e.data) for e in announced if e.type == w.EVT_CITATION_CHANGED]
    assert (changed.publication, changed.ref, changed.reason) == (citing_ref, ref, reason)
    # Made after the change, a version that cites what changed chose to (a run told to read version 1), and
    # one that cites what the change does not concern has nothing to drift from: neither drifts.
    later = [ref] + ([ref.model_copy(update={"version": 2})] if kind != "source retired" else [])
    for cites in later:
        await events.publish(p.EVT_COMMITTED, committed(ws, [cites], title="Report C"), scope=who.scope)
        assert [e.type for e in await events.relay(follow=())] == []
    assert len((await events.call(w.DRIFT, w.DriftRequest(workspace_id=ws), actor=who)).items) == 1


@pytest.mark.parametrize(
    "kind", ["source new version", "source retired", "publication revised", "publication withdrawn"]
)
async def test_a_change_made_while_a_run_read_drifts_its_answer_though_the_answer_came_after_it(
    events: InMemoryEvents, who: Actor, kind: str
) -> None:
    """A run reads version 1, version 2 comes out, then the run commits its answer citing version 1: the
    answer is newer than the change, but its evidence (`evidence_since`, the run's start) is older, so it
    drifts. A run that started after the change was told to read version 1, and does not."""
    ws = await workspace_of(events, who)
    report_a = committed(ws, [], title="Report A")
    event_type, payload, ref, reason, new_version = change_first(kind, report_a)
    run_started = datetime.now(UTC)
    await events.publish(event_type, payload, scope=who.scope)
    await events.relay(follow=())
    started_later = committed(ws, [ref], title="Report C", evidence_since=datetime.now(UTC))
    await events.publish(p.EVT_COMMITTED, started_later, scope=who.scope)
    assert [e.type for e in await events.relay(follow=())] == []
    answer = committed(ws, [ref], title="Report B", evidence_since=run_started)
    assert answer.created_at > run_started
    await events.publish(p.EVT_COMMITTED, answer, scope=who.scope)
    announced = await events.relay(follow=())
    [drift] = (await events.call(w.DRIFT, w.DriftRequest(workspace_id=ws), actor=who)).items
    answer_ref = Ref(kind="publication", id=answer.id, version=1)
    assert (drift.ref, drift.new_version, drift.reason) == (ref, new_version, reason)
    assert answer_ref in drift.cited_by  # beside Report C, which cites the same version too
    [changed] = [w.CitationChanged.model_validate(e.data) for e in announced if e.type == w.EVT_CITATION_CHANGED]
    assert (changed.publication, changed.ref, changed.reason) == (answer_ref, ref, reason)


async def test_changes_and_citations_delivered_side_by_side_always_meet(events: InMemoryEvents, who: Actor) -> None:
    """A change and a citation of the same ref handled at the same moment, in two transactions: whichever
    commits second sees the other, so every citation is rechecked once. Twenty-four such transactions on
    one workspace at once never deadlock (a delivery that did would raise here)."""
    ws = await workspace_of(events, who)
    reports = [committed(ws, [Ref(kind="source", id=f"memo{i}", version=1)]) for i in range(12)]

    deliveries = []
    for i, report in enumerate(reports):
        deliveries.append(events.deliver(new_event(s.EVT_VERSION_ACTIVATED, activated(f"memo{i}", 2), scope=who.scope)))
        deliveries.append(events.deliver(new_event(p.EVT_COMMITTED, report, scope=who.scope)))
    await asyncio.gather(*deliveries)
    announced = await events.relay(follow=())
    changed = [w.CitationChanged.model_validate(e.data) for e in announced if e.type == w.EVT_CITATION_CHANGED]
    assert sorted(c.publication.id for c in changed) == sorted(r.id for r in reports)
    assert len((await events.call(w.DRIFT, w.DriftRequest(workspace_id=ws, limit=100), actor=who)).items) == 12


async def test_two_drifts_recorded_side_by_side_lock_their_workspace_in_turn_not_in_a_deadlock(
    events: InMemoryEvents, who: Actor
) -> None:
    """Recording a drift inserts its row (which holds its workspace's key, by the foreign key) and then
    writes the workspace's checkpoint (which locks the workspace). Two of them, each past its insert, must
    not wait on each other's key: the second lock waits for the first transaction, not for a deadlock."""
    ws = await workspace_of(events, who)
    drifts = DriftRepository().for_scope(who.scope)
    workspaces = WorkspaceRepository().for_scope(who.scope)
    both_inserted = asyncio.Barrier(2)

    async def recorded(memo: str) -> None:
        async with events.runtime.db.pool.acquire() as conn, conn.transaction():
            ref = {"kind": "source", "id": memo, "version": 1}
            assert await drifts.insert_drift(
                conn, workspace_id=ws, ref=ref, cited_by=[], new_version=2, reason="new_version"
            )
            await both_inserted.wait()
            assert await workspaces.lock_workspace(conn, id=ws) is not None

    await asyncio.gather(recorded("memo1"), recorded("memo2"))
    assert len((await events.call(w.DRIFT, w.DriftRequest(workspace_id=ws), actor=who)).items) == 2
