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


async def commit(bus: BusClient, who: Actor, workspace_id: str, title: str, **extra: object) -> dict:
    """One real publication for the workspace (a run's, with `run_id`), once the workspace has associated it."""
    pub = await bus.call_raw(
        p.COMMIT, {"title": title, "body": title, "workspace_id": workspace_id, **extra}, actor=who
    )
    await probe_until(lambda: _has(bus, who, workspace_id, pub["id"]))
    return dict(pub)


async def every_page(bus: BusClient, who: Actor, first: dict, ask: dict) -> list[dict]:
    """The items of `first` and of every page after it, following `next_cursor` with `ask` (plus the cursor)."""
    items, page = list(first["items"]), first
    while page["next_cursor"] is not None:
        assert page["complete"] is False and page["omitted"] > 0
        subject = w.CATALOG_ADMITTED if "as_of" in ask else w.CATALOG
        page = await bus.call_raw(subject, ask | {"cursor": page["next_cursor"]}, actor=who)
        items.extend(page["items"])
    assert page["complete"] is True and page["omitted"] == 0
    return items


async def test_the_analysts_material_leads_and_the_runs_follow_current_before_superseded(
    artifact: ArtifactOwner, assets: AssetsStandIn, bus: BusClient, who: Actor
) -> None:
    ws = await create(bus, who)
    mine = await commit(bus, who, ws["id"], "Analyst memo")
    first = await commit(bus, who, ws["id"], "What holds?", run_id="run_1")
    assets.put(who.scope, "S1")
    await bus.call_raw(w.ADD_SOURCE, {"workspace_id": ws["id"], "source_id": "S1"}, actor=who)
    other = await commit(bus, who, ws["id"], "Another question", run_id="run_2")
    # A later run answers the first question again (the same title) and cites the other run's answer.
    cites = [{"kind": "publication", "id": other["id"], "version": 1}]
    again = await commit(bus, who, ws["id"], "What holds?", run_id="run_3", sources=cites)
    chart = await artifact.register(bus, who)
    await bus.call_raw(w.PIN_ARTIFACT, {"workspace_id": ws["id"], "artifact_id": chart["id"]}, actor=who)
    report = await artifact.register(bus, who, title="Report of run_3: What holds?")
    pin = {"workspace_id": ws["id"], "artifact_id": report["id"], "run_id": "run_3"}
    await bus.call_raw(w.PIN_ARTIFACT, pin, actor=who)

    async def superseded() -> list[str] | None:
        order = [i["id"] for i in (await catalog(bus, who, ws["id"]))["items"]]
        return order if order[-2:] == [other["id"], first["id"]] else None

    # A person's catalog: the analyst's own (newest first: the chart, the source, the memo), then the
    # current run publication, then the two it superseded; the run's report is no item.
    assert await probe_until(superseded) == [chart["id"], "S1", mine["id"], again["id"], other["id"], first["id"]]
    page = await catalog(bus, who, ws["id"], limit=4)
    assert page["omitted"] == 2 and page["next_cursor"] is not None
    assert [i["id"] for i in await every_page(bus, who, page, {"workspace_id": ws["id"], "limit": 4})] == [
        chart["id"],
        "S1",
        mine["id"],
        again["id"],
        other["id"],
        first["id"],
    ]

    # A run's catalog holds what a run reads: no artifact. Its later pages are as admitted: what comes
    # after the admission (a newer run answer, a supersession) is not in them.
    snap = await bus.call_raw(w.ADMISSION, {"workspace_id": ws["id"], "run_id": "run_4", "limit": 2}, actor=who)
    as_of = snap["catalog_as_of"]
    assert [i["id"] for i in snap["catalog"]["items"]] == ["S1", mine["id"]] and snap["catalog"]["omitted"] == 3
    newest = await commit(bus, who, ws["id"], "Another question", run_id="run_5")
    await probe_until(lambda: _first_is(bus, who, ws["id"], newest["id"], after=[chart["id"], "S1", mine["id"]]))
    ask = {"workspace_id": ws["id"], "as_of": as_of, "limit": 2}
    paged = await every_page(bus, who, snap["catalog"], ask)
    assert [i["id"] for i in paged] == ["S1", mine["id"], again["id"], other["id"], first["id"]]
    assert all(i["title"] != i["id"] for i in paged)

    holds = {"workspace_id": ws["id"], "as_of": as_of, "kind": "publication"}
    assert (await bus.call_raw(w.CATALOG_HOLDS, holds | {"id": first["id"]}, actor=who))["held"] is True
    assert (await bus.call_raw(w.CATALOG_HOLDS, holds | {"id": newest["id"]}, actor=who))["held"] is False
    with pytest.raises(NotFound):
        await bus.call_raw(w.CATALOG_ADMITTED, ask | {"cursor": snap["catalog"]["next_cursor"]}, actor=stranger_of(who))
    # A person's cursor is no run's, and a run's cursor names its own admission only.
    with pytest.raises(Invalid):
        await bus.call_raw(w.CATALOG_ADMITTED, ask | {"cursor": page["next_cursor"]}, actor=who)
    with pytest.raises(Invalid):
        await bus.call_raw(
            w.CATALOG_ADMITTED, ask | {"as_of": as_of + 1, "cursor": snap["catalog"]["next_cursor"]}, actor=who
        )


def stranger_of(who: Actor) -> Actor:
    return Actor(scope=f"{who.scope}-other", principal="mallory")


async def _first_is(bus: BusClient, who: Actor, workspace_id: str, pub_id: str, after: list[str]) -> bool:
    items = (await catalog(bus, who, workspace_id))["items"]
    return [i["id"] for i in items[: len(after) + 1]] == [*after, pub_id]


async def _has(bus: BusClient, who: Actor, workspace_id: str, pub_id: str) -> bool:
    return pub_id in {item["id"] for item in (await catalog(bus, who, workspace_id, limit=200))["items"]}
