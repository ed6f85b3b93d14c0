"""The artifact service's rules served in memory (tests/support/eventbus.py), on its own PostgreSQL database and
the test S3 server, without NATS: what each rule answers, and the event it commits to the outbox with it.

The end-to-end tests on the bus (test_artifact_bus.py) check the replies through the envelope and the bytes
behind them; these check that each registration and retention is announced once with what it recorded, and
that a refusal, or another scope's request, records and announces nothing.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from services.artifact.app import create_app
from shared.blobs import Blobs, content_key
from shared.contracts import artifact as a
from shared.contracts.common import Actor, CheckRequest, Ref
from shared.errors import Invalid, NotFound, TooLarge, Unavailable
from shared.settings import ArtifactSettings
from tests.support.eventbus import InMemoryEvents, in_memory
from tests.support.infra import Infra

LIMIT = 4096


@pytest.fixture
async def events(infra: Infra) -> AsyncIterator[InMemoryEvents]:
    served = in_memory(infra, "artifact", create_app, ArtifactSettings, DOSSIER_MAX_ARTIFACT_BYTES=str(LIMIT))
    await Blobs(served.runtime.settings).ensure_bucket()
    async with served:
        yield served


@pytest.fixture
def blobs(infra: Infra, events: InMemoryEvents) -> Blobs:
    """The service's bucket as the tester sees it: the gateway writes the bytes, the service's key only reads."""
    return infra.blobs_as("tester", events.runtime.settings.s3_bucket)


def actor() -> Actor:
    return Actor(scope=f"s{uuid.uuid4().hex[:8]}", principal="alice")


async def stored(blobs: Blobs, **fields: object) -> a.RegisterRequest:
    """HTML put under its content key, as the gateway puts it before registering, and the request to register it."""
    data = f"<!doctype html><p>Chart pack {uuid.uuid4().hex}</p>".encode()
    sha = hashlib.sha256(data).hexdigest()
    await blobs.put_bytes(content_key(sha), data, content_type="text/html")
    request = {"bucket": blobs.bucket, "key": content_key(sha), "sha256": sha, "size": len(data), "title": "Chart pack"}
    return a.RegisterRequest.model_validate(request | {"media_type": "text/html"} | fields)


def ref(artifact_id: str) -> Ref:
    return Ref(kind="artifact", id=artifact_id, version=1)


async def test_a_registration_is_announced_once_with_the_artifact(events: InMemoryEvents, blobs: Blobs) -> None:
    who = actor()
    later = datetime.now(UTC) + timedelta(days=30)
    request = await stored(blobs, title="  Chart pack  ", expires_at=later)
    art = await events.call(a.REGISTER, request, actor=who)
    assert (art.title, art.size, art.content_hash, art.expires_at) == (
        "Chart pack",
        request.size,
        request.sha256,
        later,
    )
    [registered] = await events.relay()
    assert (registered.type, registered.scope) == (a.EVT_REGISTERED, who.scope)
    assert a.Artifact.model_validate(registered.data) == art
    assert await events.call(a.GET, a.ArtifactIdRequest(artifact_id=art.id), actor=who) == art
    [item] = (await events.call(a.CHECK, CheckRequest(refs=[ref(art.id)]), actor=who)).items
    assert (item.available, item.reason, item.content_hash) == (True, None, request.sha256)


async def test_a_refused_registration_records_and_announces_nothing(events: InMemoryEvents, blobs: Blobs) -> None:
    who = actor()
    good = await stored(blobs)
    absent = hashlib.sha256(b"never stored").hexdigest()
    refusals: list[tuple[dict[str, object], type[Exception], str]] = [
        ({"key": "elsewhere/chart.html"}, Invalid, "key"),
        ({"bucket": "another-bucket"}, Invalid, "key"),
        ({"sha256": absent, "key": content_key(absent)}, Invalid, "key"),
        ({"size": LIMIT + 1}, TooLarge, "file"),
        ({"title": "   "}, Invalid, "title"),
        ({"expires_at": datetime.now(UTC) - timedelta(seconds=1)}, Invalid, "expires_at"),
    ]
    for change, error, field in refusals:
        with pytest.raises(error) as err:
            await events.call(a.REGISTER, good.model_copy(update=change), actor=who)
        assert err.value.details["field"] == field, change  # type: ignore[attr-defined]
    assert await events.relay() == []
    async with events.runtime.db.transaction() as conn:
        assert await conn.fetchval("SELECT count(*) FROM artifacts") == 0


async def test_each_retention_is_announced_and_none_shortens_an_earlier_one(
    events: InMemoryEvents, blobs: Blobs
) -> None:
    who = actor()
    now = datetime.now(UTC)
    art = await events.call(a.REGISTER, await stored(blobs, expires_at=now + timedelta(days=30)), actor=who)
    await events.relay()

    async def retain(expires_at: datetime | None) -> a.Retention:
        request = a.RetainRequest(artifact_id=art.id, expires_at=expires_at)
        return await events.call(a.RETAIN, request, actor=who)

    kept = [await retain(now + timedelta(days=n)) for n in (60, 10)] + [await retain(None), await retain(now)]
    assert [r.expires_at for r in kept] == [now + timedelta(days=60)] * 2 + [None, None]
    announced = await events.relay()
    assert [(e.type, e.scope) for e in announced] == [(a.EVT_RETAINED, who.scope)] * 4
    assert [a.Retention.model_validate(e.data) for e in announced] == kept
    assert (await events.call(a.GET, a.ArtifactIdRequest(artifact_id=art.id), actor=who)).expires_at is None


async def test_an_expired_artifact_is_not_retained_again(events: InMemoryEvents, blobs: Blobs) -> None:
    who = actor()
    art = await events.call(
        a.REGISTER, await stored(blobs, expires_at=datetime.now(UTC) + timedelta(days=1)), actor=who
    )
    await events.relay()
    async with events.runtime.db.transaction() as conn:
        await conn.execute("UPDATE artifacts SET expires_at = now() - interval '1 second' WHERE id = $1", art.id)
    with pytest.raises(Unavailable) as err:
        await events.call(a.RETAIN, a.RetainRequest(artifact_id=art.id), actor=who)
    assert err.value.details["reason"] == "expired"
    with pytest.raises(Unavailable):
        await events.call(a.OPEN, a.ArtifactIdRequest(artifact_id=art.id), actor=who)
    assert await events.relay() == []
    [item] = (await events.call(a.CHECK, CheckRequest(refs=[ref(art.id)]), actor=who)).items
    assert (item.available, item.reason) == (False, "expired")
    assert (await events.call(a.GET, a.ArtifactIdRequest(artifact_id=art.id), actor=who)).id == art.id


async def test_another_scope_is_answered_as_a_missing_artifact_and_changes_nothing(
    events: InMemoryEvents, blobs: Blobs
) -> None:
    owner, stranger = actor(), actor()
    art = await events.call(a.REGISTER, await stored(blobs), actor=owner)
    await events.relay()
    requests: list[tuple[object, object]] = [
        (a.GET, a.ArtifactIdRequest(artifact_id=art.id)),
        (a.OPEN, a.ArtifactIdRequest(artifact_id=art.id)),
        (a.RETAIN, a.RetainRequest(artifact_id=art.id)),
    ]
    for subject, request in requests:
        with pytest.raises(NotFound) as err:
            await events.call(subject, request, actor=stranger)  # type: ignore[call-overload]
        missing = request.model_copy(update={"artifact_id": "art_missing"})  # type: ignore[attr-defined]
        with pytest.raises(NotFound) as absent:
            await events.call(subject, missing, actor=owner)  # type: ignore[call-overload]
        assert (err.value.message, err.value.details) == (absent.value.message, {"id": art.id})
    assert await events.relay() == []
    [item] = (await events.call(a.CHECK, CheckRequest(refs=[ref(art.id)]), actor=stranger)).items
    assert (item.available, item.reason) == (False, "not_found")
    location = await events.call(a.OPEN, a.ArtifactIdRequest(artifact_id=art.id), actor=owner)
    assert (location.artifact, location.key) == (art, content_key(art.content_hash))
