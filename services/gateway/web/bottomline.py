"""What a person reads first about a run: its bottom line (what it concluded, what changed since it ran, how its
claims stand), the locators its answer's citations resolve with, and the names of what it cites.

Citations are found by `shared.citations` (the reading the run's claim check counts and the pages link), so a
finding shown here links the passage its claim was checked against.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from markupsafe import Markup, escape

from services.gateway.web.render import optional
from shared.bus import BusClient
from shared.citations import MARKDOWN, Citation, Known, find_citations
from shared.contracts import publication as p
from shared.contracts import runhost as r
from shared.contracts import workspace as w
from shared.contracts.common import Actor, Ref
from shared.errors import DomainError, NotFound
from shared.markdown import citation_href

# A run's ledger is paged; the locators of its sources are looked for in this many pages at most.
LEDGER_PAGES = 20
# The bottom line shows this many findings (or first lines), each cut near this many characters.
FINDINGS = 3
FINDING_CHARS = 280
STANDINGS = ("supported", "weak", "unsupported", "stale")

LocatorKey = tuple[str, str, int | None]

# Drift records are read a page at a time; a workspace with more than this many pages shows the first ones.
DRIFT_PAGES = 4
PAGE = 500
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


Locators = dict[LocatorKey, list[str]]


async def ledger_locators(client: BusClient, actor: Actor, run_id: str | None) -> tuple[Locators, Locators]:
    """The locators of each material the run included in a model request (its ledger's `included` rows), and
    of each it read or included: what its answer's citations are read with, as the claim check read them (a
    DOCX heading path holds spaces)."""
    found: Locators = {}
    included: Locators = {}
    if not run_id:
        return included, found
    cursor = None
    for _ in range(LEDGER_PAGES):
        try:
            page = await client.call(r.LEDGER, r.RunPageRequest(run_id=run_id, cursor=cursor), actor=actor)
        except DomainError:
            return included, found
        for row in page.items:
            ref, locator = row.ref, row.locator
            if ref is None:  # a `replayed` row names a model request, not a material
                continue
            key = (ref.kind, ref.id, ref.version)
            if row.stage in ("read", "included") and locator and locator not in found.setdefault(key, []):
                found[key].append(locator)
            if row.stage == "included" and locator and locator not in included.setdefault(key, []):
                included[key].append(locator)
        cursor = page.next_cursor
        if not cursor:
            break
    return included, found


def titles_of(run: r.Run) -> dict[str, str]:
    """What the run was offered, by `kind:id`: the ledger names materials by title, not by id."""
    return {f"{i.kind}:{i.id}": i.title for i in run.catalog.items}


def known_of(locators: Locators) -> Known:
    """The source locators by (source id, version), as `shared.markdown` reads citations with them."""
    return {(k[1], k[2]): locs for k, locs in locators.items() if k[0] == "source" and k[2] is not None}


async def ref_titles(
    client: BusClient, actor: Actor, refs: Iterable[Ref], titles: dict[str, str] | None = None
) -> dict[str, str]:
    """Titles by `kind:id`, for a page that names refs as a person knows them: `titles` as given, and each
    publication not in it read from its owner. A source is named by its source id, which a person chose."""
    named = dict(titles or {})
    missing = list(
        dict.fromkeys(ref.id for ref in refs if ref.kind == "publication" and f"publication:{ref.id}" not in named)
    )
    reads = [client.call(p.GET, p.GetRequest(id=pub_id), actor=actor) for pub_id in missing]
    found = await asyncio.gather(*(optional(read, DomainError) for read in reads))
    for pub in filter(None, found):
        named[f"publication:{pub.id}"] = pub.title
    return named


def cut(text: str, citations: list[Citation], limit: int = FINDING_CHARS) -> str:
    """`text` cut near `limit` at a word's end, never inside a citation; whole when it is short."""
    if len(text) <= limit:
        return text
    end = text.rfind(" ", 0, limit)
    end = end if end > limit // 2 else limit
    for c in citations:
        if c.start < end < c.end:
            end = c.end
    return text[:end].rstrip(" ,;:") + "…" if end < len(text) else text


def linked(text: str, known: Known | None) -> Markup:
    """Plain text (as a reader reads it) with its citations made links, everything else escaped."""
    out, at = [], 0
    for c in find_citations(text, known):
        out.append(escape(text[at : c.start]))
        out.append(Markup('<a class="cite" href="{}">{}</a>').format(citation_href(c), text[c.start : c.end]))
        at = c.end
    out.append(escape(text[at:]))
    return Markup("").join(out)


def _finding(text: str, known: Known | None) -> Markup:
    return linked(cut(text, find_citations(text, known)), known)


def first_lines(body: str, known: Known | None, count: int = FINDINGS) -> list[Markup]:
    """The answer's first paragraphs and list items as they read (headings and markup stripped)."""
    found: list[Markup] = []
    tokens = MARKDOWN.parse(body)
    in_heading = False
    for token in tokens:
        if token.type == "heading_open":
            in_heading = True
        elif token.type == "heading_close":
            in_heading = False
        elif token.type == "inline" and not in_heading:
            text = " ".join(
                (c.content if c.type in ("text", "code_inline") else " ")
                for c in token.children or []
                if c.type in ("text", "code_inline", "softbreak", "hardbreak")
            )
            text = re.sub(r"\s+", " ", text).strip()
            if text:
                found.append(_finding(text, known))
        if len(found) == count:
            break
    return found


@dataclass
class BottomLine:
    """What a run concluded (`findings`: its strongest checked claims, or its first lines), and its claims'
    standing: how many are supported, weak, unsupported, and rest on evidence changed since (stale)."""

    findings: list[Markup] = field(default_factory=list)
    quoted: bool = False
    standing: dict[str, int] = field(default_factory=dict)
    goal_now: int | None = None


RANK = {"supported": 0, "weak": 1, "unsupported": 2}


def bottom_line(
    run: r.Run,
    answer: p.PublicationVersion | None,
    claims: p.ClaimList | None,
    known: Known | None,
    ws: w.Workspace | None,
) -> BottomLine:
    line = BottomLine()
    if ws is not None and ws.goal.version > run.goal_version:
        line.goal_now = ws.goal.version
    items = claims.items if claims else []
    line.standing = {s: sum(1 for c in items if c.support == s) for s in STANDINGS[:3]}
    line.standing["stale"] = sum(1 for c in items if c.stale)
    if answer is None:
        return line
    backed = sorted((c for c in items if c.support != "unsupported"), key=lambda c: (RANK[c.support], -c.score))
    if run.model == "extractive" and backed:
        line.quoted = True
        line.findings = [_finding(" ".join(c.text.split()), known) for c in backed[:FINDINGS]]
    else:
        line.findings = first_lines(answer.body, known)
    return line


@dataclass
class Latest:
    """A workspace's latest answered run, as its page sums it up: its bottom line and what changed since."""

    run: r.Run
    line: BottomLine
    changes: list[w.Drift]
    titles: dict[str, str]
    claims: p.ClaimList | None


async def latest_answer(client: BusClient, actor: Actor, ws: w.Workspace, runs: list[r.Run]) -> Latest | None:
    """The newest run of `runs` with an answer, summed up; None when none has one (or it cannot be read)."""
    run = next((run for run in runs if run.publication), None)
    if run is None or run.publication is None:
        return None
    read = p.ReadRequest(id=run.publication.id, version=run.publication.version)
    answer = await optional(client.call(p.READ, read, actor=actor), DomainError)
    if answer is None:
        return None
    changes, claims, (_, locators) = await asyncio.gather(
        answer_changes(client, actor, ws.id, answer),
        claims_of(client, actor, answer),
        ledger_locators(client, actor, run.id),
    )
    cited = [d.ref for d in changes] + [b for d in changes for b in d.cited_by]
    titles = await ref_titles(client, actor, cited, titles_of(run))
    return Latest(run, bottom_line(run, answer, claims, known_of(locators), ws), changes, titles, claims)
