"""The assets service's rules served in memory (tests/support/eventbus.py), on its own PostgreSQL database and
the test S3 server, without NATS: what each rule answers, and the events it commits to the outbox with it.

An upload's, import's or attachment's reply waits for its version to settle, so each new version here is
extracted by the confined parser within the request; the recovery sweep, a loop of the runtime, is not started
in memory, and the spare parser the sandbox warms after each job is closed with the service. A run's grant is
signed with runhost's key, as runhost signs it. The end-to-end tests on the bus (test_check_and_events.py and
beside it) check the same rules through the envelope; these check each announcement once, and that a refusal,
or another scope's or another run's request, records and announces nothing.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from services.assets.app import AssetsRuntime, create_app
from shared.blobs import Blobs, content_key
from shared.contracts import assets as c
from shared.contracts.common import Actor, CheckRequest, Model, Ref, Subject
from shared.errors import Invalid, NotFound, TooLarge, Unauthenticated, Unavailable, Unsupported
from shared.grants import GrantClaims, sign_grant
from shared.proof import load_private_key
from shared.settings import AssetsSettings
from tests.service.assets.conftest import actor
from tests.support import documents
from tests.support.eventbus import InMemoryEvents, in_memory
from tests.support.infra import Infra

LIMIT = 100_000


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """An approved import root holding one PDF."""
    (tmp_path / "notes.pdf").write_bytes(documents.pdf(["Imported liquidity note"]))
    return tmp_path


@pytest.fixture
async def events(infra: Infra, root: Path) -> AsyncIterator[InMemoryEvents]:
    served = in_memory(
        infra,
        "assets",
        create_app,
        AssetsSettings,
        DOSSIER_APPROVED_ROOTS=f"docs={root}",
        DOSSIER_MAX_UPLOAD_BYTES=str(LIMIT),
    )
    runtime = cast(AssetsRuntime, served.runtime)
    await runtime.blobs.ensure_bucket()
    try:
        async with served:
            yield served
    finally:
        # What an upload leaves open beside the pool: the claims' connection and the warm spare parser.
        assert runtime.lifecycle is not None
        await runtime.lifecycle.claims.close()
        await runtime.sandbox.close()


@pytest.fixture
def blobs(infra: Infra, events: InMemoryEvents) -> Blobs:
    """The service's bucket as the tester sees it: the gateway writes the bytes before it asks for an upload."""
    return infra.blobs_as("tester", events.runtime.settings.s3_bucket)


async def put(blobs: Blobs, data: bytes) -> c.BlobRef:
    sha = hashlib.sha256(data).hexdigest()
    await blobs.put_bytes(content_key(sha), data)
    return c.BlobRef(bucket=blobs.bucket, key=content_key(sha), sha256=sha, size=len(data))


async def upload(
    events: InMemoryEvents, blobs: Blobs, who: Actor, source_id: str, data: bytes, **fields: str
) -> c.AssetVersion:
    request = c.UploadRequest(source_id=source_id, blob=await put(blobs, data), **fields)
    return await events.call(c.UPLOAD, request, actor=who)


async def recorded(events: InMemoryEvents) -> tuple[int, int]:
    """How many sources and versions the service's database holds."""
    async with events.runtime.db.transaction() as conn:
        return (
            await conn.fetchval("SELECT count(*) FROM sources"),
            await conn.fetchval("SELECT count(*) FROM asset_versions"),
        )


async def test_an_upload_is_announced_once_and_the_same_bytes_answer_the_same_version(
    events: InMemoryEvents, blobs: Blobs
) -> None:
    who = actor()
    data = documents.pdf(["Fund X redemption terms"])
    first = await upload(events, blobs, who, "S", data, filename="terms.pdf", workspace_id="ws_1")
    assert (first.source_id, first.version, first.status, first.reused, first.kind) == ("S", 1, "active", False, "pdf")
    association = {"source_id": "S", "asset_id": first.asset_id, "version": 1}
    asked, activated = await events.relay()
    assert (asked.type, asked.scope, asked.data) == (
        c.EVT_ASSOCIATION_REQUESTED,
        who.scope,
        {"workspace_id": "ws_1", **association},
    )
    assert (activated.type, activated.scope) == (c.EVT_VERSION_ACTIVATED, who.scope)
    announced = c.VersionActivated.model_validate(activated.data)
    assert (announced.asset_id, announced.content_hash, announced.filename) == (
        first.asset_id,
        first.content_hash,
        "terms.pdf",
    )
    assert (announced.superseded, announced.extraction.status) == (None, "complete")

    again = await upload(events, blobs, who, "S", data, workspace_id="ws_2")
    assert (again.asset_id, again.version, again.reused) == (first.asset_id, 1, True)
    [asked_again] = await events.relay()
    assert (asked_again.type, asked_again.data) == (
        c.EVT_ASSOCIATION_REQUESTED,
        {"workspace_id": "ws_2", **association},
    )
    assert await recorded(events) == (1, 1)
    assert await events.call(c.GET_ASSET, c.GetAssetRequest(asset_id=first.asset_id), actor=who) == first


async def test_a_new_version_supersedes_the_active_one_and_a_retirement_is_announced_once(
    events: InMemoryEvents, blobs: Blobs
) -> None:
    who = actor()
    v1 = await upload(events, blobs, who, "S", documents.pdf(["first draft"]))
    v2 = await upload(events, blobs, who, "S", documents.pdf(["second draft"]))
    assert (v2.version, v2.reused) == (2, False)
    _, activated = await events.relay()
    announced = c.VersionActivated.model_validate(activated.data)
    assert (announced.asset_id, announced.superseded) == (v2.asset_id, Ref(kind="source", id="S", version=1))
    source = await events.call(c.GET_SOURCE, c.GetSourceRequest(source_id="S"), actor=who)
    assert (source.active_version, [(v.asset_id, v.status) for v in source.versions]) == (
        2,
        [(v1.asset_id, "superseded"), (v2.asset_id, "active")],
    )

    retired = await events.call(c.RETIRE, c.RetireRequest(source_id="S"), actor=who)
    assert (retired.active_version, [v.status for v in retired.versions]) == (None, ["retired", "retired"])
    [announcement] = await events.relay()
    assert (announcement.type, announcement.scope, announcement.data) == (
        c.EVT_SOURCE_RETIRED,
        who.scope,
        {"source_id": "S", "versions": [1, 2]},
    )
    assert await events.call(c.RETIRE, c.RetireRequest(source_id="S"), actor=who) == retired
    assert await events.relay() == []

    with pytest.raises(Unavailable) as err:
        await upload(events, blobs, who, "S", documents.pdf(["third draft"]))
    assert err.value.details == {"source_id": "S", "reason": "retired"}
    assert await events.relay() == []
    assert await recorded(events) == (1, 2)
    with pytest.raises(NotFound) as missing:
        await events.call(c.RETIRE, c.RetireRequest(source_id="never"), actor=who)
    assert missing.value.details == {"source_id": "never"}


async def test_a_refused_upload_records_and_announces_nothing(events: InMemoryEvents, blobs: Blobs) -> None:
    who = actor()
    good = await put(blobs, documents.pdf(["a good file"]))
    unknown = await put(blobs, documents.random_bytes(300))
    absent = hashlib.sha256(b"never stored").hexdigest()
    refusals: list[tuple[c.BlobRef, type[Exception], str]] = [
        (good.model_copy(update={"size": 0}), Invalid, "file"),
        (good.model_copy(update={"size": LIMIT + 1}), TooLarge, "file"),
        (good.model_copy(update={"bucket": "another-bucket"}), Invalid, "blob.bucket"),
        (good.model_copy(update={"key": content_key(absent), "sha256": absent}), Invalid, "blob.key"),
        (good.model_copy(update={"sha256": absent}), Invalid, "blob.sha256"),
        (good.model_copy(update={"size": good.size - 1}), Invalid, "blob.sha256"),
        (unknown, Unsupported, "file"),
    ]
    for blob, error, field in refusals:
        with pytest.raises(error) as err:
            await events.call(c.UPLOAD, c.UploadRequest(source_id="S", blob=blob, workspace_id="ws_1"), actor=who)
        assert err.value.details["field"] == field, blob  # type: ignore[attr-defined]
    with pytest.raises(Invalid):
        await events.call(c.UPLOAD, c.UploadRequest.model_construct(source_id="a/b", blob=good), actor=who)
    assert await events.relay() == []
    assert await recorded(events) == (0, 0)


async def test_another_scope_is_answered_as_a_missing_source_and_changes_nothing(
    events: InMemoryEvents, blobs: Blobs
) -> None:
    owner, stranger = actor(), actor()
    version = await upload(events, blobs, owner, "S", documents.pdf(["the owner's note"]))
    await events.relay()
    asks: list[tuple[Subject[Any, Any], Model, Model]] = [
        (c.GET_ASSET, c.GetAssetRequest(asset_id=version.asset_id), c.GetAssetRequest(asset_id="ast_missing")),
        (c.GET_SOURCE, c.GetSourceRequest(source_id="S"), c.GetSourceRequest(source_id="missing")),
        (c.RETIRE, c.RetireRequest(source_id="S"), c.RetireRequest(source_id="missing")),
    ]
    for subject, theirs, missing in asks:
        with pytest.raises(NotFound) as err:
            await events.call(subject, theirs, actor=stranger)
        with pytest.raises(NotFound) as absent:
            await events.call(subject, missing, actor=owner)
        assert err.value.message == absent.value.message
        assert err.value.details == theirs.model_dump(include=set(err.value.details))
    [item] = (await events.call(c.CHECK, CheckRequest(refs=[Ref(kind="source", id="S")]), actor=stranger)).items
    assert (item.available, item.reason) == (False, "not_found")
    assert await events.relay() == []
    source = await events.call(c.GET_SOURCE, c.GetSourceRequest(source_id="S"), actor=owner)
    assert (source.active_version, source.versions) == (1, [version])


async def test_the_batch_check_answers_each_ref_in_the_order_asked(events: InMemoryEvents, blobs: Blobs) -> None:
    who = actor()
    await upload(events, blobs, who, "S", documents.pdf(["one"]))
    v2 = await upload(events, blobs, who, "S", documents.pdf(["two"]), filename="two.pdf")
    await upload(events, blobs, who, "R", documents.pdf(["retired"]))
    await events.call(c.RETIRE, c.RetireRequest(source_id="R"), actor=who)
    failed = await upload(events, blobs, who, "F", b"%PDF-1.5\n" + documents.random_bytes(600))
    assert failed.status == "failed"
    refs = [
        Ref(kind="source", id="nope"),
        Ref(kind="source", id="S", version=1),
        Ref(kind="publication", id="S", version=2),
        Ref(kind="source", id="S"),
        Ref(kind="source", id="F"),
        Ref(kind="source", id="R"),
        Ref(kind="source", id="S", version=9),
        Ref(kind="source", id="S", version=2),
    ]
    items = (await events.call(c.CHECK, CheckRequest(refs=refs), actor=who)).items
    assert [(i.ref, i.available, i.reason) for i in items] == [
        (refs[0], False, "not_found"),
        (refs[1], False, "superseded"),
        (refs[2], False, "not_found"),
        (Ref(kind="source", id="S", version=2), True, None),
        (Ref(kind="source", id="F", version=1), False, "failed"),
        (Ref(kind="source", id="R", version=1), False, "retired"),
        (refs[6], False, "not_found"),
        (refs[7], True, None),
    ]
    assert (items[3].content_hash, items[3].title) == (v2.content_hash, "two.pdf")


async def test_an_import_reads_only_under_an_approved_root(events: InMemoryEvents, root: Path) -> None:
    who = actor()
    (root.parent / "outside.pdf").write_bytes(documents.pdf(["not approved"]))
    refusals: list[tuple[str, str, str]] = [
        ("elsewhere", "notes.pdf", "root"),
        ("docs", str(root / "notes.pdf"), "path"),
        ("docs", "~/notes.pdf", "path"),
        ("docs", "../outside.pdf", "path"),
    ]
    for name, path, field in refusals:
        with pytest.raises(Invalid) as err:
            await events.call(c.IMPORT, c.ImportRequest(root=name, path=path, source_id="N"), actor=who)
        assert err.value.details["field"] == field, path
    assert err.value.message == "the path leaves the approved root"
    assert await recorded(events) == (0, 0)
    assert await events.relay() == []

    imported = await events.call(
        c.IMPORT, c.ImportRequest(root="docs", path="notes.pdf", source_id="N", workspace_id="ws_1"), actor=who
    )
    assert (imported.source_id, imported.status, imported.filename) == ("N", "active", "notes.pdf")
    assert [e.type for e in await events.relay()] == [c.EVT_ASSOCIATION_REQUESTED, c.EVT_VERSION_ACTIVATED]


def run_grant(infra: Infra, who: Actor, run_id: str) -> str:
    """A grant of run `run_id`, signed with runhost's key as runhost signs it."""
    claims = GrantClaims(run_id=run_id, scope=who.scope, expires_at=time.time() + 60)
    return sign_grant(load_private_key(infra.proof_keys["runhost"]), claims)


async def passages(events: InMemoryEvents, asset_id: str) -> list[str]:
    async with events.runtime.db.transaction() as conn:
        rows = await conn.fetch("SELECT text FROM evidence WHERE asset_id = $1 ORDER BY ord", asset_id)
    return [row["text"] for row in rows]


async def test_an_attachment_is_the_runs_alone_until_promoted_once(
    events: InMemoryEvents, blobs: Blobs, infra: Infra
) -> None:
    who = actor()
    mine, other = run_grant(infra, who, "run_1"), run_grant(infra, who, "run_2")
    blob = await put(blobs, documents.pdf(["a run's working note"]))
    with pytest.raises(Unauthenticated):
        await events.call(c.ATTACH, c.AttachRequest(source_id="note", blob=blob), actor=who)
    attached = await events.call(c.ATTACH, c.AttachRequest(source_id="note", blob=blob), actor=who, grant=mine)
    assert (attached.status, attached.run_local, attached.version) == ("active", True, 1)
    assert await events.relay() == []  # a run-local attachment stays quiet
    ask = c.GetAssetRequest(asset_id=attached.asset_id)
    assert await events.call(c.GET_ASSET, ask, actor=who, grant=mine) == attached
    for grant in (None, other):
        with pytest.raises(NotFound):
            await events.call(c.GET_ASSET, ask, actor=who, grant=grant)
    with pytest.raises(NotFound):
        await events.call(c.GET_SOURCE, c.GetSourceRequest(source_id="note"), actor=who)
    local = await events.call(c.GET_SOURCE, c.GetSourceRequest(source_id="note", run_local=True), actor=who, grant=mine)
    assert (local.active_version, local.versions) == (1, [attached])

    promote = c.PromoteRequest(asset_id=attached.asset_id, source_id="Notes", workspace_id="ws_1")
    with pytest.raises(NotFound):
        await events.call(c.PROMOTE, promote, actor=who, grant=other)
    assert await events.relay() == []
    promoted = await events.call(c.PROMOTE, promote, actor=who, grant=mine)
    assert (promoted.source_id, promoted.version, promoted.run_local, promoted.reused) == ("Notes", 1, False, False)
    assert (promoted.status, promoted.content_hash) == ("active", attached.content_hash)
    assert promoted.asset_id != attached.asset_id
    assert await passages(events, promoted.asset_id) == await passages(events, attached.asset_id) != []
    activated, asked = await events.relay()
    assert (activated.type, c.VersionActivated.model_validate(activated.data).run_id) == (
        c.EVT_VERSION_ACTIVATED,
        "run_1",
    )
    association = {"workspace_id": "ws_1", "source_id": "Notes", "asset_id": promoted.asset_id, "version": 1}
    assert (asked.type, asked.data) == (c.EVT_ASSOCIATION_REQUESTED, association)

    again = await events.call(c.PROMOTE, promote, actor=who, grant=mine)
    assert (again.asset_id, again.reused) == (promoted.asset_id, True)
    assert [(e.type, e.data) for e in await events.relay()] == [(c.EVT_ASSOCIATION_REQUESTED, association)]
    assert await events.call(c.GET_ASSET, c.GetAssetRequest(asset_id=promoted.asset_id), actor=who) == promoted


async def test_an_attachment_that_failed_or_a_grant_naming_a_namespace_is_never_promoted(
    events: InMemoryEvents, blobs: Blobs, infra: Infra
) -> None:
    who = actor()
    blob = await put(blobs, b"%PDF-1.5\n" + documents.random_bytes(600))
    with pytest.raises(Invalid) as refused:
        await events.call(
            c.ATTACH, c.AttachRequest(source_id="note", blob=blob), actor=who, grant=run_grant(infra, who, "a|b")
        )
    assert refused.value.details == {"field": "grant"}
    assert await recorded(events) == (0, 0)
    mine = run_grant(infra, who, "run_1")
    broken = await events.call(c.ATTACH, c.AttachRequest(source_id="note", blob=blob), actor=who, grant=mine)
    assert (broken.status, broken.run_local) == ("failed", True)
    with pytest.raises(Unavailable) as err:
        await events.call(c.PROMOTE, c.PromoteRequest(asset_id=broken.asset_id), actor=who, grant=mine)
    assert err.value.details == {"asset_id": broken.asset_id, "reason": "failed"}
    assert await events.relay() == []  # neither the run-local failure nor the refusal is announced
    assert await recorded(events) == (1, 1)
