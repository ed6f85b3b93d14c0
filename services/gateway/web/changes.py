"""What changed: the drift of what an answer cites (a banner on runs and answers), a workspace's timeline,
and the diff of two runs' answers."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response

from services.gateway.web.render import WebRoute, build, bus_of, optional, render, signed_in
from services.gateway.web.workspaces import browse, get_workspace
from shared.bus import BusClient
from shared.contracts import assets as a
from shared.contracts import publication as p
from shared.contracts import runhost as r
from shared.contracts import workspace as w
from shared.contracts.common import Actor, Ref
from shared.errors import DomainError, Invalid, NotFound
from shared.textdiff import line_diff

router = APIRouter(route_class=WebRoute, include_in_schema=False, dependencies=[Depends(signed_in)])

# Drift records are read a page at a time; a workspace with more than this many pages shows the first ones.
DRIFT_PAGES = 4
PAGE = 500
# The timeline reads each of its lists' newest page; publications and sources are looked up one by one.
TIMELINE_ITEMS = 40
MAX_DIFF_LINES = 5000
# A page's view of an answer's claims: the first this-many (the API pages on through the rest).
CLAIMS_PAGE = 200

Key = tuple[str, str, int | None]


async def drifts_of(client: BusClient, actor: Actor, workspace_id: str) -> list[w.Drift]:
    items: list[w.Drift] = []
    cursor = None
    for _ in range(DRIFT_PAGES):
        try:
            page = await client.call(
                w.DRIFT, w.DriftRequest(workspace_id=workspace_id, limit=PAGE, cursor=cursor), actor=actor
            )
        except NotFound:
            return items
        items += page.items
        cursor = page.next_cursor
        if not cursor:
            break
    return items


def _key(ref: Ref) -> Key:
    return (ref.kind, ref.id, ref.version)


def changed_since(drifts: list[w.Drift], answer: p.PublicationVersion | None) -> list[w.Drift]:
    """The drifts that touch this answer: a ref it cites has a newer version or was withdrawn or retired, or
    the answer itself is named as citing a changed ref. Newest first."""
    if answer is None:
        return []
    cited = {_key(s) for s in answer.sources}
    itself = ("publication", answer.id, answer.version)
    found = [
        d for d in drifts if _key(d.ref) in cited or itself in {_key(b) for b in d.cited_by} or _key(d.ref) == itself
    ]
    return sorted(found, key=lambda d: d.detected_at, reverse=True)


async def answer_changes(
    client: BusClient, actor: Actor, workspace_id: str, answer: p.PublicationVersion | None
) -> list[w.Drift]:
    if answer is None:
        return []
    return changed_since(await drifts_of(client, actor, workspace_id), answer)


async def claims_of(client: BusClient, actor: Actor, answer: p.PublicationVersion | None) -> p.ClaimList | None:
    """The first page of a run's answer's checked claims (each says whether its evidence changed since)."""
    if answer is None or not answer.run_id:
        return None
    request = p.ClaimsRequest(id=answer.id, version=answer.version, limit=CLAIMS_PAGE)
    return await optional(client.call(p.CLAIMS, request, actor=actor), DomainError)


async def _stale_counts(client: BusClient, actor: Actor, runs: list[r.Run]) -> dict[str, int]:
    """How many of each run's answer's claims rest on changed evidence, by run id."""
    asked = {
        run.id: p.ClaimsRequest(id=run.publication.id, version=run.publication.version, limit=CLAIMS_PAGE)
        for run in runs
        if run.publication
    }
    reads = [client.call(p.CLAIMS, request, actor=actor) for request in asked.values()]
    pages = await asyncio.gather(*(optional(read, DomainError) for read in reads))
    return {
        run_id: sum(1 for claim in page.items if claim.stale)
        for run_id, page in zip(asked, pages, strict=True)
        if page is not None
    }


async def _timeline_events(client: BusClient, actor: Actor, workspace_id: str) -> list[dict[str, Any]]:
    goals, runs, pubs, sources, drifts = await asyncio.gather(
        client.call(w.GOAL_VERSIONS, w.WorkspacePageRequest(workspace_id=workspace_id, limit=500), actor=actor),
        client.call(r.LIST_RUNS, r.ListRunsRequest(workspace_id=workspace_id, limit=TIMELINE_ITEMS), actor=actor),
        client.call(w.CATALOG_BROWSE, browse(workspace_id, TIMELINE_ITEMS, kind="publication"), actor=actor),
        client.call(w.CATALOG_BROWSE, browse(workspace_id, TIMELINE_ITEMS, kind="source"), actor=actor),
        drifts_of(client, actor, workspace_id),
    )
    pub_reads = [client.call(p.GET, p.GetRequest(id=i.id), actor=actor) for i in pubs.items]
    source_reads = [client.call(a.GET_SOURCE, a.GetSourceRequest(source_id=i.id), actor=actor) for i in sources.items]
    found_pubs, found_sources = await asyncio.gather(
        asyncio.gather(*(optional(read, DomainError) for read in pub_reads)),
        asyncio.gather(*(optional(read, DomainError) for read in source_reads)),
    )
    stale = await _stale_counts(client, actor, runs.items)
    events = [{"at": g.created_at, "kind": "goal", "goal": g} for g in goals.items]
    events += [{"at": run.created_at, "kind": "run", "run": run, "stale": stale.get(run.id, 0)} for run in runs.items]
    for pub in filter(None, found_pubs):
        events += [{"at": v.created_at, "kind": "publication", "pub": pub, "v": v} for v in pub.versions]
    for source in filter(None, found_sources):
        events += [{"at": v.created_at, "kind": "source", "source": source, "v": v} for v in source.versions]
    events += [{"at": d.detected_at, "kind": "drift", "drift": d} for d in drifts]
    return sorted(events, key=lambda e: e["at"], reverse=True)


@router.get("/workspaces/{workspace_id}/timeline")
async def timeline(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    client = bus_of(request)
    ws = await get_workspace(client, actor, workspace_id)
    events = await _timeline_events(client, actor, workspace_id)
    return render(request, "timeline.html", ws=ws, events=events, bound=TIMELINE_ITEMS)


async def _run_answer(client: BusClient, actor: Actor, run_id: str) -> tuple[r.Run, p.PublicationVersion]:
    run = await client.call(r.GET_RUN, build(r.RunIdRequest, run_id=run_id), actor=actor)
    if not run.publication:
        raise Invalid(f"the run '{run.question}' has no answer to compare", {"field": "run", "run_id": run_id})
    ref = run.publication
    answer = await client.call(p.READ, p.ReadRequest(id=ref.id, version=ref.version), actor=actor)
    return run, answer


Row = dict[str, p.DiffLine | None]


def _pairs(removed: list[p.DiffLine], added: list[p.DiffLine]) -> list[Row]:
    size = max(len(removed), len(added))
    return [
        {"left": removed[i] if i < len(removed) else None, "right": added[i] if i < len(added) else None}
        for i in range(size)
    ]


def side_by_side(hunks: list[p.DiffHunk]) -> list[list[Row]]:
    """Each hunk as rows of (left, right): context on both sides, a removed run beside the added run after it."""
    table = []
    for hunk in hunks:
        rows: list[Row] = []
        removed: list[p.DiffLine] = []
        added: list[p.DiffLine] = []
        for line in hunk.lines:
            if line.op == "context" or (line.op == "removed" and added):
                rows += _pairs(removed, added)
                removed, added = [], []
            if line.op == "context":
                rows.append({"left": line, "right": line})
            elif line.op == "removed":
                removed.append(line)
            else:
                added.append(line)
        rows += _pairs(removed, added)
        table.append(rows)
    return table


@router.get("/runs/compare")
async def compare_runs(
    request: Request,
    from_: str = Query(alias="from", min_length=1, max_length=200),
    to: str = Query(min_length=1, max_length=200),
    actor: Actor = Depends(signed_in),
) -> Response:
    client = bus_of(request)
    (old_run, old), (new_run, new) = await asyncio.gather(
        _run_answer(client, actor, from_), _run_answer(client, actor, to)
    )
    hunks, truncated = await asyncio.to_thread(line_diff, old.body, new.body, max_lines=MAX_DIFF_LINES)
    ws = await optional(get_workspace(client, actor, new_run.workspace_id), DomainError)
    return render(
        request,
        "compare.html",
        ws=ws,
        old_run=old_run,
        new_run=new_run,
        hunks=hunks,
        truncated=truncated,
        rows=side_by_side(hunks),
    )
