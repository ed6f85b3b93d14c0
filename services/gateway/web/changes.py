"""What changed: the drift of what an answer cites (a banner on runs and answers), a workspace's timeline,
and the diff of two runs' answers."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from fastapi import APIRouter, Depends, Query, Request, Response
from markupsafe import Markup, escape

from services.gateway.web.bottomline import (
    CLAIMS_PAGE,
    claims_of,
    drifts_of,
    ref_titles,
    titles_of,
)
from services.gateway.web.render import WebRoute, build, bus_of, optional, render, signed_in, snippet_marks
from services.gateway.web.workspaces import browse, get_workspace
from shared.bus import BusClient
from shared.citations import find_citations
from shared.contracts import assets as a
from shared.contracts import publication as p
from shared.contracts import runhost as r
from shared.contracts import workspace as w
from shared.contracts.common import Actor, Ref
from shared.errors import DomainError, Invalid
from shared.textdiff import line_diff

router = APIRouter(route_class=WebRoute, include_in_schema=False, dependencies=[Depends(signed_in)])

# The timeline reads each of its lists' newest page; publications and sources are looked up one by one.
TIMELINE_ITEMS = 40
MAX_DIFF_LINES = 5000


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


async def _timeline_events(
    client: BusClient, actor: Actor, workspace_id: str
) -> tuple[list[dict[str, Any]], dict[str, str]]:
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
    # What the drift rows name, by title: the catalog's items, the runs' offered catalogs, then any other
    # publication read from its owner.
    known = {f"{i.kind}:{i.id}": i.title for i in [*pubs.items, *sources.items]}
    for run in runs.items:
        known |= titles_of(run)
    cited = [d.ref for d in drifts] + [b for d in drifts for b in d.cited_by]
    titles = await ref_titles(client, actor, cited, known)
    events = [{"at": g.created_at, "kind": "goal", "goal": g} for g in goals.items]
    events += [{"at": run.created_at, "kind": "run", "run": run, "stale": stale.get(run.id, 0)} for run in runs.items]
    for pub in filter(None, found_pubs):
        events += [{"at": v.created_at, "kind": "publication", "pub": pub, "v": v} for v in pub.versions]
    for source in filter(None, found_sources):
        events += [{"at": v.created_at, "kind": "source", "source": source, "v": v} for v in source.versions]
    events += [{"at": d.detected_at, "kind": "drift", "drift": d} for d in drifts]
    return sorted(events, key=lambda e: e["at"], reverse=True), titles


@router.get("/workspaces/{workspace_id}/timeline")
async def timeline(request: Request, workspace_id: str, actor: Actor = Depends(signed_in)) -> Response:
    client = bus_of(request)
    ws = await get_workspace(client, actor, workspace_id)
    events, titles = await _timeline_events(client, actor, workspace_id)
    return render(request, "timeline.html", ws=ws, events=events, titles=titles, bound=TIMELINE_ITEMS)


# A workspace's search reads this many of its newest publications, and filters this many evidence hits.
SEARCH_PUBLICATIONS = 50
SEARCH_HITS = 100
SEARCH_SOURCES = 200
SEARCH_LINES = 3


def terms_of(q: str) -> list[str]:
    """The words searched for: each of two characters or more, once, longest first (so a longer one is marked
    whole where a shorter one is inside it)."""
    words = {w.lower() for w in re.findall(r"\w{2,}", q)}
    return sorted(words, key=len, reverse=True)


def marked(text: str, terms: list[str]) -> Markup:
    """`text` escaped, each term marked (`<mark>`) wherever it occurs, in any case."""
    if not terms:
        return Markup(escape(text))
    pattern = re.compile("|".join(re.escape(t) for t in terms), re.IGNORECASE)
    out, at = [], 0
    for m in pattern.finditer(text):
        out += [escape(text[at : m.start()]), Markup("<mark>{}</mark>").format(m[0])]
        at = m.end()
    out.append(escape(text[at:]))
    return Markup("").join(out)


def _matching_lines(body: str, terms: list[str]) -> list[str]:
    """The body's lines (markdown heading marks and list bullets off) that hold a term."""
    found = []
    for line in body.splitlines():
        text = re.sub(r"^\s*(?:#{1,6}\s+|[-*+]\s+|\d+[.)]\s+)", "", line).strip()
        if text and any(t in text.lower() for t in terms):
            found.append(text if len(text) <= 400 else text[:399] + "…")
        if len(found) == SEARCH_LINES:
            break
    return found


@router.get("/workspaces/{workspace_id}/search")
async def workspace_search(
    request: Request,
    workspace_id: str,
    q: str = Query(default="", max_length=1000),
    actor: Actor = Depends(signed_in),
) -> Response:
    """The workspace's conclusions (its publications' text, newest first) and the evidence of its sources that
    hold the words searched for, each match marked."""
    client = bus_of(request)
    ws = await get_workspace(client, actor, workspace_id)
    terms = terms_of(q)
    conclusions: list[dict[str, Any]] = []
    hits: list[a.SearchHit] = []
    if terms:
        pubs, sources, found = await asyncio.gather(
            client.call(w.CATALOG_BROWSE, browse(workspace_id, SEARCH_PUBLICATIONS, kind="publication"), actor=actor),
            client.call(w.CATALOG_BROWSE, browse(workspace_id, SEARCH_SOURCES, kind="source"), actor=actor),
            client.call(a.SEARCH, build(a.SearchRequest, q=q, limit=SEARCH_HITS), actor=actor),
        )
        items = [i for i in pubs.items if i.version]
        reads = [client.call(p.READ, p.ReadRequest(id=i.id, version=i.version or 1), actor=actor) for i in items]
        bodies = await asyncio.gather(*(optional(read, DomainError) for read in reads))
        for item, body in zip(items, bodies, strict=True):
            text = f"{item.title}\n{body.body}" if body else item.title
            lines = _matching_lines(text, terms)
            if lines:
                conclusions.append({"item": item, "lines": [marked(line, terms) for line in lines]})
        own = {i.id for i in sources.items}
        hits = [h for h in found.items if h.source_id in own]
    return render(
        request,
        "workspace_search.html",
        ws=ws,
        q=q,
        searched=bool(terms),
        conclusions=conclusions,
        hits=[{"hit": h, "snippet": snippet_marks(h.snippet)} for h in hits],
    )


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


def _claim_key(text: str) -> str:
    """A claim as compared across runs: its words without its citations (a newer run cites newer versions)."""
    at, parts = 0, []
    for c in find_citations(text):
        parts.append(text[at : c.start])
        at = c.end
    parts.append(text[at:])
    return " ".join(re.sub(r"[^\w\s]", " ", "".join(parts)).lower().split())


def standing(claim: p.Claim) -> str:
    return "stale" if claim.stale else claim.support


def claim_changes(old: p.ClaimList | None, new: p.ClaimList | None) -> dict[str, list[Any]]:
    """Claim by claim: those only the newer answer makes (added), only the older one (dropped), and those both
    make whose standing differs (changed: old claim, new claim)."""
    before = {_claim_key(c.text): c for c in (old.items if old else [])}
    after = {_claim_key(c.text): c for c in (new.items if new else [])}
    return {
        "added": [c for k, c in after.items() if k not in before],
        "dropped": [c for k, c in before.items() if k not in after],
        "changed": [(before[k], c) for k, c in after.items() if k in before and standing(before[k]) != standing(c)],
        "same": [c for k, c in after.items() if k in before and standing(before[k]) == standing(c)],
    }


def source_changes(old: p.PublicationVersion, new: p.PublicationVersion) -> dict[str, list[Ref]]:
    before, after = {s.key(): s for s in old.sources}, {s.key(): s for s in new.sources}
    return {
        "added": [s for k, s in after.items() if k not in before],
        "dropped": [s for k, s in before.items() if k not in after],
    }


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
    ws, old_claims, new_claims = await asyncio.gather(
        optional(get_workspace(client, actor, new_run.workspace_id), DomainError),
        claims_of(client, actor, old),
        claims_of(client, actor, new),
    )
    sources = source_changes(old, new)
    # Each side's refs named as its own run was offered them (a source's title may differ between versions).
    old_titles, new_titles = await asyncio.gather(
        ref_titles(client, actor, sources["dropped"], titles_of(old_run)),
        ref_titles(client, actor, sources["added"], titles_of(new_run)),
    )
    return render(
        request,
        "compare.html",
        ws=ws,
        old_run=old_run,
        new_run=new_run,
        hunks=hunks,
        truncated=truncated,
        rows=side_by_side(hunks),
        claims=claim_changes(old_claims, new_claims),
        compared=bool(old_claims and new_claims),
        sources=sources,
        old_titles=old_titles,
        new_titles=new_titles,
    )
