"""A run's search, for the run host's search tool and an outside agent's search route: evidence passages
first, then the earlier publications of the run's workspace, each kind paged by rank.

A page shows some of each kind, and its cursor holds how far each kind has got (two offsets), so the next
page goes on with both: no publication hit is capped away, and no hit shown on one page comes again on the
next. Passages reach as deep as the assets search ranks them (its `limit`, at most 100; it samples about
that many candidates a term anyway); publications as deep as they match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from services.runhost.owners import Owners
from shared.contracts import assets
from shared.contracts import publication as pub
from shared.contracts.common import Actor
from shared.errors import Invalid
from shared.paging import Int32, decode_cursor, encode_cursor

P = TypeVar("P")
Q = TypeVar("Q")
PASSAGE_DEPTH = 100
# Beside a full page of passages, a page of the run host's search tool keeps this many places for publications.
POLICY_PUBLICATIONS = 3
SNIPPET_CHARS = 100
TITLE_CHARS = 80


@dataclass(frozen=True)
class Asked:
    """What one search asks: its words, how many hits a page shows (`in_all`: both kinds together), the
    cursor of the page, and one source's passages only (then no publications)."""

    query: str
    limit: int
    cursor: str | None = None
    source_id: str | None = None
    in_all: bool = False


@dataclass(frozen=True)
class Found(Generic[P, Q]):
    """One page of a search: evidence passages, then earlier publications; `next_cursor` asks for the next."""

    passages: list[P]
    publications: list[Q]
    next_cursor: str | None = None


def offsets(cursor: str | None) -> tuple[int, int]:
    """How many passages and how many publications the pages before `cursor` showed."""
    if cursor is None:
        return 0, 0
    passages, publications = decode_cursor(cursor, Int32, Int32)
    return passages, publications


def share(limit: int) -> int:
    """The places publications keep on a page of `limit` hits in all that passages would fill: a third, and
    at least one when there are two places (a search with room shows both kinds); none with one place."""
    return 0 if limit < 2 else max(1, limit // 3)


def within(limit: int, passages: list[P], publications: list[Q]) -> Found[P, Q]:
    """At most `limit` hits in all, passages first: the publications take the places the passages leave,
    and their `share` when the passages would fill them all."""
    shown = min(len(publications), max(limit - len(passages), share(limit)))
    return Found(passages[: limit - shown], publications[:shown])


def beside(limit: int, passages: list[P], publications: list[Q]) -> Found[P, Q]:
    """A page of the run host's search tool: up to `limit` passages, and beside them the publications in the
    places the passages leave (at least POLICY_PUBLICATIONS)."""
    shown = passages[:limit]
    return Found(shown, publications[: max(limit - len(shown), POLICY_PUBLICATIONS)])


async def search_for_run(
    owners: Owners, actor: Actor, grant: str, asked: Asked
) -> Found[assets.SearchHit, pub.PublicationHit]:
    """The page after `asked.cursor`: with `in_all` at most `limit` hits together (`within`), else `beside`.
    Each kind is asked for one hit more than the page can show, to know whether another page exists."""
    query, limit = asked.query, asked.limit
    if not query.strip():
        raise Invalid("the query is empty")
    after_passages, after_publications = offsets(asked.cursor)
    passages: list[assets.SearchHit] = []
    if after_passages < PASSAGE_DEPTH:
        deep = min(after_passages + limit + 1, PASSAGE_DEPTH)
        hits = await owners.search_evidence_for_run(actor, grant, query=query, limit=deep, source_id=asked.source_id)
        passages = hits[after_passages:]
    # Earlier publications of the workspace are searched too, so one the catalog page omits is found.
    publications: list[pub.PublicationHit] = []
    if asked.source_id is None:
        publications = await owners.search_publications_for_run(
            actor, grant, query=query, limit=limit + 1, offset=after_publications
        )
    page = (within if asked.in_all else beside)(limit, passages, publications)
    more = len(passages) > len(page.passages) or len(publications) > len(page.publications)
    next_cursor = (
        encode_cursor([after_passages + len(page.passages), after_publications + len(page.publications)])
        if more
        else None
    )
    return Found(page.passages, page.publications, next_cursor)


def search_text(found: Found[assets.SearchHit, pub.PublicationHit], tool: str) -> str:
    """A page as the model reads it: a first line with the counts, the way to the next page and how to read
    a hit, then the passages, then the publications."""
    more = f"; next page: {tool} with the same query and cursor {found.next_cursor!r}" if found.next_cursor else ""
    if not found.passages and not found.publications:
        return "no evidence matched" + more
    how = "read [source] hits with read_evidence, [publication] hits with read_publication (id, version)"
    lines = [f"({len(found.passages)} [source] and {len(found.publications)} [publication] hits{more}; {how})"]
    for hit in found.passages:
        lines.append(
            f"- [source] {hit.evidence_id}: {hit.source_id}@{hit.version} {hit.locator}: {hit.snippet[:SNIPPET_CHARS]}"
        )
    for item in found.publications:
        created = item.created_at.isoformat().replace("+00:00", "Z")
        lines.append(
            f"- [publication] {item.id}@{item.version} {item.title[:TITLE_CHARS]!r} {created}:"
            f" {item.snippet[:SNIPPET_CHARS]}"
        )
    return "\n".join(lines)
