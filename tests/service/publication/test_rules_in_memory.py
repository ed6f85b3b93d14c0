"""The publication service's rules served in memory (tests/support/eventbus.py): what each rule answers, and
the event it commits to the outbox with it, on the service's own PostgreSQL database, without NATS.

The end-to-end tests on the bus (test_publication_bus.py) check the same rules' replies through the envelope;
these check what only the database shows: one event per change, none for a refusal or a repeat, and the
claims' stale marks.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from services.publication.app import create_app
from services.publication.service import sha256_text
from shared.contracts import publication as c
from shared.contracts.common import Actor, Event, Ref
from shared.errors import Conflict, NotFound, Unavailable
from shared.settings import PublicationSettings
from tests.support.eventbus import InMemoryEvents, in_memory
from tests.support.infra import Infra

SOURCE = Ref(kind="source", id="announcement", version=1)


@pytest.fixture
async def events(infra: Infra) -> AsyncIterator[InMemoryEvents]:
    async with in_memory(infra, "publication", create_app, PublicationSettings) as served:
        yield served


def actor() -> Actor:
    return Actor(scope=f"s{uuid.uuid4().hex[:8]}", principal="alice")


async def commit(
    events: InMemoryEvents, who: Actor, body: str = "Fund X is liquid.", **fields: object
) -> c.PublicationVersion:
    request = c.CommitRequest.model_validate({"title": "Report A", "body": body} | fields)
    return await events.call(c.COMMIT, request, actor=who)


def announced(published: list[Event]) -> list[tuple[str, c.VersionEvent]]:
    return [(e.type, c.VersionEvent.model_validate(e.data)) for e in published]


async def test_a_commit_is_announced_once_with_what_it_cites(events: InMemoryEvents) -> None:
    who = actor()
    started = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # the run's start, when its reading began
    v1 = await commit(
        events, who, workspace_id="ws_a", run_id="run_1", sources=[SOURCE], request_key="run_1:finish",
        evidence_since=started,
    )  # fmt: skip
    published = await events.relay()
    [(kind, event)] = announced(published)
    assert kind == c.EVT_COMMITTED and published[0].scope == who.scope
    assert (event.id, event.version, event.workspace_id, event.run_id, event.sources, event.evidence_since) == (
        v1.id, 1, "ws_a", "run_1", [SOURCE], started)  # fmt: skip
    assert event.content_hash == sha256_text("Fund X is liquid.") == v1.content_hash and event.reason is None

    # The same request_key again is the same publication, and nothing new is announced.
    again = await commit(events, who, workspace_id="ws_a", run_id="run_1", sources=[SOURCE], request_key="run_1:finish")
    assert again == v1
    with pytest.raises(Conflict) as err:
        await commit(events, who, body="Other words.", workspace_id="ws_a", run_id="run_1", request_key="run_1:finish")
    assert err.value.details == {"request_key": "run_1:finish", "id": v1.id}
    assert await events.relay() == []


async def test_a_revision_names_the_publications_workspace_and_a_stale_one_conflicts(events: InMemoryEvents) -> None:
    who = actor()
    v1 = await commit(events, who, workspace_id="ws_a")
    await events.relay()
    revise = c.ReviseRequest(id=v1.id, body="Fund X is illiquid.", expected_latest_version=1, sources=[SOURCE])
    v2 = await events.call(c.REVISE, revise, actor=who)
    assert (v2.version, v2.title, v2.sources) == (2, "Report A", [SOURCE])
    [(kind, event)] = announced(await events.relay())
    assert (kind, event.id, event.version, event.workspace_id) == (c.EVT_REVISED, v1.id, 2, "ws_a")

    with pytest.raises(Conflict) as err:
        await events.call(c.REVISE, revise.model_copy(update={"body": "lost"}), actor=who)
    assert err.value.details == {"current_latest_version": 2}
    assert await events.relay() == []
    got = await events.call(c.GET, c.GetRequest(id=v1.id), actor=who)
    assert got.latest_version == 2 and [v.version for v in got.versions] == [1, 2]


async def test_a_withdrawal_is_announced_once_and_its_version_is_unavailable(events: InMemoryEvents) -> None:
    who = actor()
    v1 = await commit(events, who, workspace_id="ws_a")
    await events.relay()
    withdraw = c.WithdrawRequest(id=v1.id, version=1, reason="wrong figures")
    out = await events.call(c.WITHDRAW, withdraw, actor=who)
    assert out.status == "withdrawn"
    [(kind, event)] = announced(await events.relay())
    assert (kind, event.id, event.version, event.reason, event.workspace_id) == (
        c.EVT_WITHDRAWN, v1.id, 1, "wrong figures", "ws_a")  # fmt: skip

    # Withdrawing it again answers the same version and announces nothing.
    again = await events.call(c.WITHDRAW, withdraw.model_copy(update={"reason": "twice"}), actor=who)
    assert again.status == "withdrawn"
    assert await events.relay() == []
    with pytest.raises(Unavailable) as err:
        await events.call(c.READ, c.ReadRequest(id=v1.id, version=1), actor=who)
    assert (err.value.details["reason"], err.value.details["withdrawn_reason"]) == ("withdrawn", "wrong figures")
    with pytest.raises(Unavailable):
        await events.call(c.CLAIMS, c.ClaimsRequest(id=v1.id, version=1), actor=who)


async def test_another_scope_is_answered_not_found_and_changes_nothing(events: InMemoryEvents) -> None:
    owner, stranger = actor(), actor()
    v1 = await commit(events, owner)
    await events.relay()
    mark = c.StaleMark(index=0, stale=c.Stale(ref=SOURCE, reason="withdrawn"))
    for subject, request in [
        (c.GET, c.GetRequest(id=v1.id)),
        (c.READ, c.ReadRequest(id=v1.id, version=1)),
        (c.CLAIMS, c.ClaimsRequest(id=v1.id, version=1)),
        (c.DIFF, c.DiffRequest(id=v1.id, from_=1, to=1)),
        (c.REVISE, c.ReviseRequest(id=v1.id, body="x", expected_latest_version=1)),
        (c.WITHDRAW, c.WithdrawRequest(id=v1.id, version=1, reason="x")),
        (c.MARK_STALE, c.MarkStaleRequest(id=v1.id, version=1, marks=[mark])),
    ]:
        with pytest.raises(NotFound):
            await events.call(subject, request, actor=stranger)  # type: ignore[arg-type]
    assert await events.relay() == []
    got = await events.call(c.GET, c.GetRequest(id=v1.id), actor=owner)
    assert got.latest_version == 1
    assert (await events.call(c.READ, c.ReadRequest(id=v1.id, version=1), actor=owner)).status == "active"


def claim(text: str, *refs: Ref) -> c.Claim:
    return c.Claim(text=text, refs=list(refs), support="supported", score=0.9, locators=[None] * len(refs))


async def test_stale_marks_keep_the_weightiest_change_and_recheck_a_successor(events: InMemoryEvents) -> None:
    who = actor()
    cited = await commit(events, who, body="The redemption gate was lifted in March.")
    cited_v1 = Ref(kind="publication", id=cited.id, version=1)
    claims = [claim("The redemption gate was lifted in March.", cited_v1), claim("Fund X holds cash.", SOURCE)]
    citing = await commit(events, who, body="Answer.", claims=[x.model_dump() for x in claims])
    for n, body in [(1, "Fund Y merged with Fund Z."), (2, "The redemption gate was lifted in March, again.")]:
        await events.call(c.REVISE, c.ReviseRequest(id=cited.id, body=body, expected_latest_version=n), actor=who)
    cited_v2, cited_v3 = (Ref(kind="publication", id=cited.id, version=n) for n in (2, 3))

    def mark_stale(*marks: c.StaleMark) -> c.MarkStaleRequest:
        return c.MarkStaleRequest(id=citing.id, version=1, marks=list(marks))

    async def claims_now() -> list[c.Claim]:
        return (await events.call(c.CLAIMS, c.ClaimsRequest(id=citing.id, version=1), actor=who)).items

    def successor(now: Ref) -> c.StaleMark:
        return c.StaleMark(index=0, stale=c.Stale(ref=cited_v1, reason="new_version", now=now))

    # A mark for a claim that does not cite the ref, or for no claim at all, changes nothing.
    stray = c.StaleMark(index=1, stale=c.Stale(ref=cited_v1, reason="withdrawn"))
    beyond = c.StaleMark(index=7, stale=c.Stale(ref=cited_v1, reason="withdrawn"))
    assert (await events.call(c.MARK_STALE, mark_stale(successor(cited_v2), stray, beyond), actor=who)).marked == 1
    first, second = await claims_now()
    assert first.stale is not None and (first.stale.reason, first.stale.now) == ("new_version", cited_v2)
    assert first.stale.support_now == "unsupported"  # checked again, against the successor's body
    assert second.stale is None and first.support == "supported"  # the claim itself stays as checked

    # A later successor replaces an older one, never the other way round.
    assert (await events.call(c.MARK_STALE, mark_stale(successor(cited_v3)), actor=who)).marked == 1
    assert (await events.call(c.MARK_STALE, mark_stale(successor(cited_v2)), actor=who)).marked == 0
    first, _ = await claims_now()
    assert first.stale is not None and (first.stale.now, first.stale.support_now) == (cited_v3, "supported")

    # A withdrawal stays: a later successor's mark does not replace it.
    withdrawn = c.StaleMark(index=1, stale=c.Stale(ref=SOURCE, reason="withdrawn"))
    assert (await events.call(c.MARK_STALE, mark_stale(withdrawn), actor=who)).marked == 1
    later = c.StaleMark(
        index=1, stale=c.Stale(ref=SOURCE, reason="new_version", now=SOURCE.model_copy(update={"version": 2}))
    )
    assert (await events.call(c.MARK_STALE, mark_stale(later), actor=who)).marked == 0
    _, second = await claims_now()
    assert second.stale is not None and second.stale.reason == "withdrawn"
    with pytest.raises(NotFound):
        await events.call(c.MARK_STALE, c.MarkStaleRequest(id=citing.id, version=2, marks=[withdrawn]), actor=who)


async def test_a_diff_reads_both_versions_under_the_rules_of_a_read(events: InMemoryEvents) -> None:
    who = actor()
    v1 = await commit(events, who, body="Line one.\nFund X is liquid.\n")
    revise = c.ReviseRequest(id=v1.id, body="Line one.\nFund X is illiquid.\n", expected_latest_version=1)
    await events.call(c.REVISE, revise, actor=who)
    diff = await events.call(c.DIFF, c.DiffRequest(id=v1.id, from_=1, to=2), actor=who)
    [hunk] = diff.hunks
    changed = [(line.op, line.text) for line in hunk.lines if line.op != "context"]
    assert changed == [("removed", "Fund X is liquid."), ("added", "Fund X is illiquid.")]
    assert (diff.from_, diff.to, diff.truncated) == (1, 2, False)
    with pytest.raises(NotFound):
        await events.call(c.DIFF, c.DiffRequest(id=v1.id, from_=1, to=3), actor=who)
    await events.call(c.WITHDRAW, c.WithdrawRequest(id=v1.id, version=2, reason="wrong"), actor=who)
    with pytest.raises(Unavailable):
        await events.call(c.DIFF, c.DiffRequest(id=v1.id, from_=1, to=2), actor=who)
