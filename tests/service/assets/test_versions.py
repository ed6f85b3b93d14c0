"""Identity, versions and their states, over the real bus with real Postgres and S3."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from services.assets.app import create_app
from shared.blobs import Blobs
from shared.bus import BusClient
from shared.contracts import assets as c
from shared.contracts.common import Actor
from shared.errors import NotFound, Unavailable
from shared.settings import AssetsSettings
from tests.service.assets.conftest import AssetsUnderTest, actor
from tests.support import documents
from tests.support.service import running


async def test_lifecycle_reuse_supersede_fail_retire(assets: AssetsUnderTest) -> None:
    who = actor()
    first = documents.pdf(["Fund X holds cash.", "Second page."])
    v1 = await assets.upload(who, "prospectus", first)
    assert (v1["version"], v1["status"], v1["reused"], v1["kind"]) == (1, "active", False, "pdf")
    assert v1["extraction"] == {"status": "complete", "units_total": 2, "units_extracted": 2, "notes": []}

    again = await assets.upload(who, "prospectus", first)
    assert again["reused"] is True and again["asset_id"] == v1["asset_id"] and again["version"] == 1

    v2 = await assets.upload(who, "prospectus", documents.pdf(["Fund X gated redemptions."]))
    assert (v2["version"], v2["status"]) == (2, "active")

    v3 = await assets.upload(who, "prospectus", b"%PDF-1.7\n" + documents.random_bytes(3000))
    assert (v3["version"], v3["status"]) == (3, "failed") and v3["error"]
    assert v3["extraction"]["status"] == "failed"

    source = await assets.bus.call_raw(c.GET_SOURCE, {"source_id": "prospectus"}, actor=who)
    assert source["active_version"] == 2
    assert [(v["version"], v["status"]) for v in source["versions"]] == [
        (1, "superseded"),
        (2, "active"),
        (3, "failed"),
    ]

    retired = await assets.bus.call_raw(c.RETIRE, {"source_id": "prospectus"}, actor=who)
    assert retired["active_version"] is None and {v["status"] for v in retired["versions"]} == {"retired"}
    with pytest.raises(Unavailable) as err:
        await assets.upload(who, "prospectus", documents.pdf(["new"]))
    assert err.value.details["reason"] == "retired"


async def test_other_scope_sees_nothing(assets: AssetsUnderTest) -> None:
    owner, stranger = actor(), actor()
    data = documents.pdf(["Same bytes, two scopes."])
    mine = await assets.upload(owner, "S1", data)
    theirs = await assets.upload(stranger, "S1", data)
    assert mine["asset_id"] != theirs["asset_id"] and theirs["reused"] is False
    third = actor()
    for subject, payload in [
        (c.GET_SOURCE, {"source_id": "S1"}),
        (c.GET_ASSET, {"asset_id": mine["asset_id"]}),
        (c.RETIRE, {"source_id": "S1"}),
    ]:
        with pytest.raises(NotFound):
            await assets.bus.call_raw(subject, payload, actor=third)


async def test_a_source_retired_during_extraction_never_activates(
    make_settings: Callable[..., AssetsSettings], bus: BusClient
) -> None:
    settings = make_settings(DOSSIER_ASSETS_PAUSE_BEFORE_ACTIVATE_SECONDS="1.5")
    async with running(create_app(settings)):
        assets, who = AssetsUnderTest(settings, Blobs(settings), bus), actor()
        pending = asyncio.create_task(assets.upload(who, "late", documents.pdf(["extracting while retired"])))
        for _ in range(200):
            source = await _try_source(assets, who, "late")
            if source and source["versions"] and source["versions"][0]["status"] == "extracting":
                break
            await asyncio.sleep(0.05)
        retired = await bus.call_raw(c.RETIRE, {"source_id": "late"}, actor=who)
        assert retired["versions"][0]["status"] == "extracting"
        version = await pending
        assert version["status"] == "retired"
        check = await bus.call_raw(c.CHECK, {"refs": [{"kind": "source", "id": "late", "version": 1}]}, actor=who)
        assert check["items"][0]["reason"] == "retired"


async def _try_source(assets: AssetsUnderTest, who: Actor, source_id: str) -> dict | None:
    try:
        return dict(await assets.bus.call_raw(c.GET_SOURCE, {"source_id": source_id}, actor=who))
    except NotFound:
        return None


async def test_a_version_that_extracted_nothing_never_replaces_the_active_one(assets: AssetsUnderTest) -> None:
    """A hostile v2 that offers no passage (blank pages; one page behind a broken nested Flate filter) fails
    with its reason, and v1 stays active, searchable and the only version activated in the outbox."""
    who = actor()
    v1 = await assets.upload(who, "memo", documents.pdf(["Fund Q keeps eleven percent in cash."]))
    assert v1["status"] == "active"
    for version, hostile in [(2, documents.blank_pdf(3)), (3, documents.nested_flate_pdf())]:
        got = await assets.upload(who, "memo", hostile)
        assert (got["version"], got["status"]) == (version, "failed"), got
        assert got["error"] == "nothing was extracted (no passage); version 1 stays active"
        assert got["extraction"]["status"] == "failed" and got["error"] in got["extraction"]["notes"]
    source = await assets.bus.call_raw(c.GET_SOURCE, {"source_id": "memo"}, actor=who)
    assert source["active_version"] == 1
    assert [(v["version"], v["status"]) for v in source["versions"]] == [(1, "active"), (2, "failed"), (3, "failed")]
    hits = await assets.bus.call_raw(c.SEARCH, {"q": "eleven percent"}, actor=who)
    assert [(h["version"], h["asset_id"]) for h in hits["items"]] == [(1, v1["asset_id"])]
    async with assets.db() as conn:
        rows = await conn.fetch("SELECT type FROM outbox WHERE scope = $1 ORDER BY seq", who.scope)
    assert [r["type"] for r in rows] == [c.EVT_VERSION_ACTIVATED, c.EVT_VERSION_FAILED, c.EVT_VERSION_FAILED]

    # A version with passages still replaces v1; a source's first version has nothing to replace.
    v4 = await assets.upload(who, "memo", documents.pdf(["Fund Q now keeps nine percent."]))
    assert (v4["version"], v4["status"]) == (4, "active")
    first = await assets.upload(who, "blank", documents.blank_pdf(2))
    assert (first["version"], first["status"]) == (1, "active")
