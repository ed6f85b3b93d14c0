"""The bounded catalog and the admission snapshot, against the real owners (and the assets stand-in)."""

from __future__ import annotations

import pytest

from shared.bus import BusClient
from shared.contracts import artifact as a
from shared.contracts import publication as p
from shared.contracts import workspace as w
from shared.contracts.common import Actor
from shared.errors import Conflict, Invalid, NotFound
from tests.service.workspace.conftest import ArtifactOwner, catalog, create
from tests.support.owners import AssetsStandIn, RequestTap, SilentOwner
from tests.support.probe import probe_until

# Every test here asks the workspace and publication services.
pytestmark = pytest.mark.usefixtures("workspace", "publication")


async def publish_into(bus: BusClient, who: Actor, workspace_id: str, n: int) -> list[dict]:
    """Commit n real publications for the workspace and wait until the workspace has associated them."""
    pubs = [
        await bus.call_raw(
            p.COMMIT, {"title": f"Report {i}", "body": f"body {i}", "workspace_id": workspace_id}, actor=who
        )
        for i in range(n)
    ]

    async def all_associated() -> bool:
        ids = {item["id"] for item in (await catalog(bus, who, workspace_id, limit=200))["items"]}
        return all(pub["id"] in ids for pub in pubs)

    await probe_until(all_associated)
    return pubs


async def test_catalog_is_bounded_newest_first_and_honest(bus: BusClient, who: Actor) -> None:
    ws = await create(bus, who)
    pubs = await publish_into(bus, who, ws["id"], 7)
    await bus.call_raw(p.REVISE, {"id": pubs[0]["id"], "body": "v2", "expected_latest_version": 1}, actor=who)

    page = await catalog(bus, who, ws["id"], limit=5)
    assert page["complete"] is False and page["omitted"] == 2
    assert [i["id"] for i in page["items"]] == [x["id"] for x in reversed(pubs)][:5]
    assert all(i["kind"] == "publication" and i["available"] and i["reason"] is None for i in page["items"])
    assert page["items"][0]["title"] == "Report 6" and page["items"][0]["version"] == 1

    whole = await catalog(bus, who, ws["id"])
    assert whole["complete"] is True and whole["omitted"] == 0 and len(whole["items"]) == 7
    # A publication item names its latest version, as its owner says now.
    assert whole["items"][-1]["id"] == pubs[0]["id"] and whole["items"][-1]["version"] == 2

    for bad in (0, 201):
        with pytest.raises(Invalid) as err:
            await catalog(bus, who, ws["id"], limit=bad)
        assert err.value.details["field"] == "limit"
    assert (await catalog(bus, who, ws["id"], limit=200))["complete"] is True


async def test_availability_is_one_batch_per_owner(
    artifact: ArtifactOwner, assets: AssetsStandIn, bus: BusClient, who: Actor
) -> None:
    ws = await create(bus, who)
    await publish_into(bus, who, ws["id"], 3)
    for source_id in ("S1", "S2", "S3"):
        assets.put(who.scope, source_id)
        await bus.call_raw(w.ADD_SOURCE, {"workspace_id": ws["id"], "source_id": source_id}, actor=who)
    for _ in range(2):
        art = await artifact.register(bus, who)
        await bus.call_raw(w.PIN_ARTIFACT, {"workspace_id": ws["id"], "artifact_id": art["id"]}, actor=who)
    assets.batches.clear()

    taps = {subject: await RequestTap(bus._nc, subject).start() for subject in (p.CHECK, a.CHECK)}
    try:
        page = await catalog(bus, who, ws["id"])
    finally:
        for tap in taps.values():
            await tap.stop()
    assert len(page["items"]) == 8 and all(i["available"] for i in page["items"])
    assert [len(batch) for batch in taps[p.CHECK].refs] == [3]
    assert [len(batch) for batch in taps[a.CHECK].refs] == [2]
    assert [len(batch) for batch in assets.batches] == [3]
    kinds = [i["kind"] for i in page["items"]]
    assert kinds == ["artifact"] * 2 + ["source"] * 3 + ["publication"] * 3
    source = next(i for i in page["items"] if i["kind"] == "source")
    assert source["version"] == 1 and source["title"].startswith("Source ")


async def test_an_owner_that_does_not_answer_is_marked_not_hidden(
    assets: AssetsStandIn, bus: BusClient, who: Actor
) -> None:
    ws = await create(bus, who)
    await publish_into(bus, who, ws["id"], 2)
    assets.put(who.scope, "S1")
    await bus.call_raw(w.ADD_SOURCE, {"workspace_id": ws["id"], "source_id": "S1"}, actor=who)
    # The artifact service is not running at all: nobody answers its check.
    await bus.call_raw(w.ASSOCIATE, {"workspace_id": ws["id"], "kind": "artifact", "ref_id": "art_1"}, actor=who)

    # The assets owner is there but never answers within the deadline.
    await assets.stop()
    silent = await SilentOwner(bus._nc, w.ASSETS_CHECK, "assets").start()
    try:
        page = await catalog(bus, who, ws["id"])
    finally:
        await silent.stop()
    assert silent.received == 1
    by_kind = {i["kind"]: i for i in page["items"]}
    assert len(page["items"]) == 4 and page["complete"] is True
    assert by_kind["source"]["available"] is False and by_kind["source"]["reason"] == "owner_unreachable"
    assert by_kind["source"]["id"] == "S1" and by_kind["source"]["version"] == 1
    assert by_kind["artifact"]["available"] is False and by_kind["artifact"]["reason"] == "owner_unreachable"
    assert [i["available"] for i in page["items"] if i["kind"] == "publication"] == [True, True]


async def test_admission_snapshot_and_refusals(bus: BusClient, who: Actor, stranger: Actor) -> None:
    ws = await create(bus, who, goal="first goal")
    await bus.call_raw(
        w.REVISE_GOAL, {"workspace_id": ws["id"], "text": "second goal", "expected_version": 1}, actor=who
    )
    await publish_into(bus, who, ws["id"], 3)

    snap = await bus.call_raw(w.ADMISSION, {"workspace_id": ws["id"], "run_id": "run_1", "limit": 2}, actor=who)
    assert snap["workspace_id"] == ws["id"] and snap["status"] == "active"
    assert snap["goal"]["version"] == 2 and snap["goal"]["text"] == "second goal"
    assert len(snap["catalog"]["items"]) == 2 and snap["catalog"]["omitted"] == 1
    assert snap["catalog"]["complete"] is False

    await bus.call_raw(w.ARCHIVE, {"workspace_id": ws["id"]}, actor=who)
    with pytest.raises(Conflict):
        await bus.call_raw(w.ADMISSION, {"workspace_id": ws["id"], "run_id": "run_2"}, actor=who)
    with pytest.raises(NotFound):
        await bus.call_raw(w.ADMISSION, {"workspace_id": ws["id"], "run_id": "run_3"}, actor=stranger)
    await bus.call_raw(w.UNARCHIVE, {"workspace_id": ws["id"]}, actor=who)
    assert (await bus.call_raw(w.ADMISSION, {"workspace_id": ws["id"], "run_id": "run_2"}, actor=who))[
        "status"
    ] == "active"
    await bus.call_raw(w.DELETE, {"workspace_id": ws["id"]}, actor=who)
    with pytest.raises(NotFound):
        await bus.call_raw(w.ADMISSION, {"workspace_id": ws["id"], "run_id": "run_4"}, actor=who)


async def test_a_runs_catalog_ranks_by_the_questions_words_then_by_recency(bus: BusClient, who: Actor) -> None:
    ws = await create(bus, who)
    pubs = await publish_into(bus, who, ws["id"], 6)
    titled = await bus.call_raw(
        p.COMMIT, {"title": "Fund X redemption liquidity", "body": "b", "workspace_id": ws["id"]}, actor=who
    )
    await probe_until(lambda: _has(bus, who, ws["id"], titled["id"]))
    newer = await publish_into(bus, who, ws["id"], 3)

    asked = {"workspace_id": ws["id"], "run_id": "run_q", "limit": 3, "question": "Is Fund X liquidity enough?"}
    snap = await bus.call_raw(w.ADMISSION, asked, actor=who)
    ids = [i["id"] for i in snap["catalog"]["items"]]
    # The older report that holds the question's words comes first; the rest by recency.
    assert ids == [titled["id"], newer[2]["id"], newer[1]["id"]]
    assert snap["catalog"]["omitted"] == len(pubs) + len(newer) + 1 - 3
    plain = await bus.call_raw(w.ADMISSION, {"workspace_id": ws["id"], "run_id": "run_p", "limit": 3}, actor=who)
    assert [i["id"] for i in plain["catalog"]["items"]] == [x["id"] for x in reversed(newer)]


async def _has(bus: BusClient, who: Actor, workspace_id: str, pub_id: str) -> bool:
    return pub_id in {item["id"] for item in (await catalog(bus, who, workspace_id, limit=200))["items"]}
