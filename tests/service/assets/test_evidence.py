"""Evidence search and reads: active versions only, grants, run-local attachments and promotion."""

from __future__ import annotations

import time

import pytest
from nacl.signing import SigningKey

from shared.contracts import assets as c
from shared.contracts.common import Actor, Ref
from shared.errors import Forbidden, NotFound, Unauthenticated, Unavailable
from shared.grants import GrantClaims, sign_grant
from tests.service.assets.conftest import AssetsUnderTest, actor
from tests.support import documents


def grant(assets: AssetsUnderTest, who: Actor, run_id: str, refs: list[str] | None = None) -> str:
    claims = GrantClaims(run_id=run_id, scope=who.scope, refs=refs or [], expires_at=time.time() + 60)
    assert assets.grant_key is not None
    return sign_grant(assets.grant_key, claims)


async def search(assets: AssetsUnderTest, who: Actor, q: str, **extra: object) -> list[dict]:
    reply = await assets.bus.call_raw(c.SEARCH, {"q": q, **extra}, actor=who)
    return list(reply["items"])


async def test_search_covers_active_versions_only(assets: AssetsUnderTest) -> None:
    who = actor()
    v1 = await assets.upload(who, "fund", documents.pdf(["The fund suspended redemptions in March."]))
    hits = await search(assets, who, "redemptions suspended")
    assert [(h["asset_id"], h["locator"], h["version"]) for h in hits] == [(v1["asset_id"], "page:1", 1)]
    assert "<<redemptions>>" in hits[0]["snippet"].lower() and hits[0]["score"] > 0
    old_passage = hits[0]["evidence_id"]

    await assets.upload(who, "fund", documents.pdf(["Redemptions resumed in May."]))
    hits = await search(assets, who, "redemptions")
    assert [(h["version"], h["locator"]) for h in hits] == [(2, "page:1")]
    assert await search(assets, who, "suspended") == []
    # The superseded passage is still known, but never delivered as current evidence.
    with pytest.raises(Unavailable) as err:
        await assets.bus.call_raw(c.READ, {"evidence_id": old_passage}, actor=who)
    assert err.value.details["reason"] == "superseded"

    read = await assets.bus.call_raw(c.READ, {"evidence_id": hits[0]["evidence_id"]}, actor=who)
    assert read["text"] == "Redemptions resumed in May." and read["locator"] == "page:1"
    assert read["version"] == 2 and len(read["content_hash"]) == 64

    other = await assets.upload(who, "other", documents.pdf(["Redemptions elsewhere."]))
    assert {h["source_id"] for h in await search(assets, who, "redemptions")} == {"fund", "other"}
    only = await search(assets, who, "redemptions", source_id="other")
    assert [h["asset_id"] for h in only] == [other["asset_id"]]
    assert len(await search(assets, who, "redemptions", limit=1)) == 1
    assert await search(assets, actor(), "redemptions") == []

    await assets.bus.call_raw(c.RETIRE, {"source_id": "fund"}, actor=who)
    assert {h["source_id"] for h in await search(assets, who, "redemptions")} == {"other"}
    with pytest.raises(Unavailable) as retired:
        await assets.bus.call_raw(c.READ, {"evidence_id": hits[0]["evidence_id"]}, actor=who)
    assert retired.value.details["reason"] == "retired"
    with pytest.raises(NotFound):
        await assets.bus.call_raw(c.READ, {"evidence_id": hits[0]["evidence_id"]}, actor=actor())


async def test_grant_reads_admitted_or_found_by_the_runs_own_search(assets: AssetsUnderTest) -> None:
    who = actor()
    a = await assets.upload(who, "A", documents.pdf(["Alpha covenant breach."]))
    b = await assets.upload(who, "B", documents.pdf(["Beta covenant waiver."]))
    hits = {h["source_id"]: h for h in await search(assets, who, "covenant")}
    admitted = grant(assets, who, "run_1", [Ref(kind="source", id="A", version=a["version"]).key()])

    read = await assets.bus.call_raw(c.READ, {"evidence_id": hits["A"]["evidence_id"]}, actor=who, grant=admitted)
    assert read["locator"] == "page:1" and read["content_hash"] == a["content_hash"]
    with pytest.raises(NotFound):  # B exists, but run_1 was neither admitted with it nor found it
        await assets.bus.call_raw(c.READ, {"evidence_id": hits["B"]["evidence_id"]}, actor=who, grant=admitted)

    found = await assets.bus.call_raw(c.SEARCH, {"q": "waiver"}, actor=who, grant=admitted)
    assert [h["evidence_id"] for h in found["items"]] == [hits["B"]["evidence_id"]]
    read_b = await assets.bus.call_raw(c.READ, {"evidence_id": hits["B"]["evidence_id"]}, actor=who, grant=admitted)
    assert read_b["text"] == "Beta covenant waiver." and read_b["content_hash"] == b["content_hash"]

    # Another run's search does not widen this run's grant, and grants are not inherited.
    other_run = grant(assets, who, "run_2")
    with pytest.raises(NotFound):
        await assets.bus.call_raw(c.READ, {"evidence_id": hits["A"]["evidence_id"]}, actor=who, grant=other_run)
    by_evidence = grant(assets, who, "run_3", [Ref(kind="evidence", id=hits["A"]["evidence_id"], version=1).key()])
    assert (await assets.bus.call_raw(c.READ, {"evidence_id": hits["A"]["evidence_id"]}, actor=who, grant=by_evidence))[
        "evidence_id"
    ] == hits["A"]["evidence_id"]
    forged = sign_grant(
        SigningKey.generate(), GrantClaims(run_id="run_1", scope=who.scope, expires_at=time.time() + 60)
    )
    with pytest.raises(Unauthenticated):
        await assets.bus.call_raw(c.READ, {"evidence_id": hits["A"]["evidence_id"]}, actor=who, grant=forged)


async def test_attachment_is_run_local_until_promoted(assets: AssetsUnderTest) -> None:
    who = actor()
    run_grant = grant(assets, who, "run_att")
    blob = await assets.put(documents.pdf(["Attachment about a margin call."]))
    with pytest.raises(Forbidden):  # only runhost sends it, and only with the run's grant (shared/proof.py)
        await assets.bus.call_raw(c.ATTACH, {"source_id": "tool-result", "blob": blob}, actor=who)
    att = await assets.bus.call_raw(c.ATTACH, {"source_id": "tool-result", "blob": blob}, actor=who, grant=run_grant)
    assert att["status"] == "active" and att["run_local"] is True and att["run_id"] == "run_att"

    # Invisible without that run's grant: not in the scope's sources, search or reads.
    for g in (None, grant(assets, who, "run_other")):
        with pytest.raises(NotFound):
            await assets.bus.call_raw(c.GET_ASSET, {"asset_id": att["asset_id"]}, actor=who, grant=g)
        assert (await assets.bus.call_raw(c.SEARCH, {"q": "margin"}, actor=who, grant=g))["items"] == []
    with pytest.raises(NotFound):
        await assets.bus.call_raw(c.GET_SOURCE, {"source_id": "tool-result"}, actor=who)
    own = await assets.bus.call_raw(c.SEARCH, {"q": "margin"}, actor=who, grant=run_grant)
    passage = own["items"][0]["evidence_id"]
    assert (await assets.bus.call_raw(c.READ, {"evidence_id": passage}, actor=who, grant=run_grant))[
        "locator"
    ] == "page:1"
    with pytest.raises(NotFound):
        await assets.bus.call_raw(c.READ, {"evidence_id": passage}, actor=who)
    local = await assets.bus.call_raw(
        c.GET_SOURCE, {"source_id": "tool-result", "run_local": True}, actor=who, grant=run_grant
    )
    assert local["active_version"] == 1

    with pytest.raises(NotFound):
        await assets.bus.call_raw(
            c.PROMOTE, {"asset_id": att["asset_id"]}, actor=who, grant=grant(assets, who, "run_x")
        )
    promoted = await assets.bus.call_raw(
        c.PROMOTE, {"asset_id": att["asset_id"], "source_id": "margin-call"}, actor=who, grant=run_grant
    )
    assert (promoted["source_id"], promoted["version"], promoted["status"]) == ("margin-call", 1, "active")
    assert promoted["run_local"] is False and promoted["run_id"] == "run_att"
    assert promoted["content_hash"] == att["content_hash"] and promoted["extraction"] == att["extraction"]
    again = await assets.bus.call_raw(
        c.PROMOTE, {"asset_id": att["asset_id"], "source_id": "margin-call"}, actor=who, grant=run_grant
    )
    assert again["reused"] is True and again["asset_id"] == promoted["asset_id"]
    hits = await search(assets, who, "margin")
    assert [(h["source_id"], h["locator"]) for h in hits] == [("margin-call", "page:1")]
    assert (await assets.bus.call_raw(c.READ, {"evidence_id": hits[0]["evidence_id"]}, actor=who))["text"] == (
        "Attachment about a margin call."
    )
