"""The artifact service over real NATS, PostgreSQL and S3."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from services.artifact.app import create_app
from shared.blobs import Blobs, content_key
from shared.bus import BusClient
from shared.contracts import artifact as a
from shared.contracts.common import Actor
from shared.errors import Invalid, NotFound, TooLarge, Unavailable
from shared.settings import ArtifactSettings
from tests.support.infra import Infra
from tests.support.probe import probe_until
from tests.support.service import running, settings_from

HTML = b"<!doctype html><html><body><h1>Report A</h1></body></html>"


@pytest.fixture
async def artifact(infra: Infra) -> AsyncIterator[tuple[ArtifactSettings, Blobs]]:
    settings = settings_from(infra.settings_env("artifact", DOSSIER_MAX_ARTIFACT_BYTES="4096"), ArtifactSettings)
    await Blobs(settings).ensure_bucket()
    async with running(create_app(settings)):
        # Retained HTML is written by the gateway (and runhost); the artifact service's key only asks
        # whether it is there (shared.objectkeys). Tests that lose bytes on purpose do so as the tester.
        yield settings, infra.blobs_as("tester", settings.s3_bucket)


def actor() -> Actor:
    return Actor(scope=f"s{uuid.uuid4().hex[:8]}", principal="alice")


async def store(blobs: Blobs, data: bytes = HTML, **extra: object) -> dict[str, object]:
    """What the gateway does before registering: bytes under their content key, then only the reference."""
    sha = hashlib.sha256(data).hexdigest()
    await blobs.put_bytes(content_key(sha), data, content_type="text/html")
    request: dict[str, object] = {
        "bucket": blobs.bucket,
        "key": content_key(sha),
        "sha256": sha,
        "size": len(data),
        "title": "Report A (HTML)",
        "media_type": "text/html",
    }
    return request | extra


def ref(artifact_id: str, version: int | None = None) -> dict[str, object]:
    return {"kind": "artifact", "id": artifact_id, "version": version}


async def test_register_get_open_check(artifact: tuple[ArtifactSettings, Blobs], bus: BusClient) -> None:
    _, blobs = artifact
    who = actor()
    art = await bus.call_raw(a.REGISTER, await store(blobs), actor=who)
    assert art["content_hash"] == hashlib.sha256(HTML).hexdigest() and art["size"] == len(HTML)
    assert art["media_type"] == "text/html" and art["expires_at"] is None and art["id"].startswith("art_")
    assert await bus.call_raw(a.GET, {"artifact_id": art["id"]}, actor=who) == art

    location = await bus.call_raw(a.OPEN, {"artifact_id": art["id"]}, actor=who)
    assert location["key"] == content_key(art["content_hash"]) and location["bucket"] == blobs.bucket
    assert await blobs.get_bytes(location["key"]) == HTML

    refs = [ref(art["id"]), ref(art["id"], 1), ref(art["id"], 2), ref("art_missing", 1)]
    items = (await bus.call_raw(a.CHECK, {"refs": refs}, actor=who))["items"]
    assert [(i["ref"]["version"], i["available"], i["reason"]) for i in items] == [
        (1, True, None),
        (1, True, None),
        (2, False, "not_found"),
        (1, False, "not_found"),
    ]
    assert items[0]["title"] == "Report A (HTML)" and items[0]["content_hash"] == art["content_hash"]


async def test_register_refuses_what_it_cannot_vouch_for(
    artifact: tuple[ArtifactSettings, Blobs], bus: BusClient
) -> None:
    _, blobs = artifact
    who = actor()
    good = await store(blobs)
    with pytest.raises(Invalid) as err:
        await bus.call_raw(a.REGISTER, good | {"key": "elsewhere/report.html"}, actor=who)
    assert err.value.details["field"] == "key"
    absent = hashlib.sha256(b"never stored").hexdigest()
    with pytest.raises(Invalid):
        await bus.call_raw(a.REGISTER, good | {"sha256": absent, "key": content_key(absent)}, actor=who)
    with pytest.raises(TooLarge) as big:
        await bus.call_raw(a.REGISTER, good | {"size": 5000}, actor=who)
    assert big.value.details["limit"] == 4096
    with pytest.raises(Invalid):
        await bus.call_raw(a.REGISTER, good | {"media_type": "application/pdf"}, actor=who)
    with pytest.raises(Invalid) as past:
        await bus.call_raw(a.REGISTER, good | {"expires_at": "2020-01-01T00:00:00Z"}, actor=who)
    assert past.value.details["field"] == "expires_at"
    with pytest.raises(Invalid):
        await bus.call_raw(a.REGISTER, good | {"title": "  "}, actor=who)


async def test_expiry_and_retention(artifact: tuple[ArtifactSettings, Blobs], bus: BusClient) -> None:
    _, blobs = artifact
    who = actor()
    soon = datetime.now(UTC) + timedelta(seconds=2)
    later = datetime.now(UTC) + timedelta(days=30)

    # Retaining lifts an expiry; a later retention with an expiry never shortens it again.
    kept = await bus.call_raw(a.REGISTER, await store(blobs, expires_at=later.isoformat()), actor=who)
    assert kept["expires_at"] is not None
    retention = await bus.call_raw(a.RETAIN, {"artifact_id": kept["id"]}, actor=who)
    assert retention["status"] == "retained" and retention["expires_at"] is None and retention["retained_at"]
    again = await bus.call_raw(a.RETAIN, {"artifact_id": kept["id"], "expires_at": soon.isoformat()}, actor=who)
    assert again["expires_at"] is None

    # An unretained file expires: its reads and its retention are refused, its record stays readable.
    fleeting = await bus.call_raw(a.REGISTER, await store(blobs, expires_at=soon.isoformat()), actor=who)

    async def expired() -> bool:
        items = (await bus.call_raw(a.CHECK, {"refs": [ref(fleeting["id"])]}, actor=who))["items"]
        return items[0]["reason"] == "expired"

    await probe_until(expired, timeout=30, interval=0.2)
    with pytest.raises(Unavailable) as err:
        await bus.call_raw(a.OPEN, {"artifact_id": fleeting["id"]}, actor=who)
    assert err.value.details["reason"] == "expired"
    with pytest.raises(Unavailable):
        await bus.call_raw(a.RETAIN, {"artifact_id": fleeting["id"]}, actor=who)
    assert (await bus.call_raw(a.GET, {"artifact_id": fleeting["id"]}, actor=who))["id"] == fleeting["id"]
    kept_check = (await bus.call_raw(a.CHECK, {"refs": [ref(kept["id"])]}, actor=who))["items"][0]
    assert kept_check["available"] is True


async def test_missing_bytes_are_unavailable(artifact: tuple[ArtifactSettings, Blobs], bus: BusClient) -> None:
    _, blobs = artifact
    who = actor()
    data = b"<p>only this artifact has these bytes " + uuid.uuid4().hex.encode() + b"</p>"
    art = await bus.call_raw(a.REGISTER, await store(blobs, data), actor=who)
    await blobs.delete(content_key(art["content_hash"]))
    with pytest.raises(Unavailable) as err:
        await bus.call_raw(a.OPEN, {"artifact_id": art["id"]}, actor=who)
    assert err.value.details["reason"] == "failed"


async def test_other_scope_sees_nothing(artifact: tuple[ArtifactSettings, Blobs], bus: BusClient) -> None:
    _, blobs = artifact
    owner, stranger = actor(), actor()
    art = await bus.call_raw(a.REGISTER, await store(blobs), actor=owner)
    for subject in (a.GET, a.OPEN, a.RETAIN):
        with pytest.raises(NotFound) as err:
            await bus.call_raw(subject, {"artifact_id": art["id"]}, actor=stranger)
        with pytest.raises(NotFound) as missing:
            await bus.call_raw(subject, {"artifact_id": "art_missing"}, actor=owner)
        assert err.value.message == missing.value.message
    item = (await bus.call_raw(a.CHECK, {"refs": [ref(art["id"])]}, actor=stranger))["items"][0]
    assert item["available"] is False and item["reason"] == "not_found"
