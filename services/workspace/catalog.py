"""The catalog: what a workspace refers to, in an order that ages well, paged, each item with its owner's verdict.

A workspace run daily gains a publication per run, so an order by recency alone soon pushes the analyst's
own material off a run's page. The catalog has one total order instead, in three parts, each newest first:
  0. the analyst's own material: every source, and every publication (in a person's catalog, every
     artifact too) that no run produced;
  1. the runs' publications that are current;
  2. the runs' publications a later run superseded (its publication cites them, or answers the same
     question: the same title; see `Associations`).
A run's HTML report is no item of its own (its publication is), and a run's catalog holds only what a run's
tools read (publications and sources). The first page of a run's catalog therefore holds the analyst's
publications and sources before any run output, however many runs have published.

Every page is read "as of" a mark (`Position.as_of`): the associations and supersessions recorded before
it. A run is admitted with the mark of its admission, so every later page of its catalog is the catalog as
admitted, however the workspace has changed since; a person's first page takes the mark of now, and its
cursor keeps it. The cursor also carries the total of that catalog and how many items came before, so
`omitted` (the items after this page) is exact without counting rows, and a page never costs more than
one index-ordered scan per part, whatever the number of associations.

Items are checked with their owners when their page is read: an item whose owner did not confirm it is
listed as unavailable with the reason, never dropped and never shown as available.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated

import asyncpg
from pydantic import Field

from services.workspace.owners import Owners
from services.workspace.repository import ScopedWorkspaceRepository
from shared.contracts.common import Actor, Ref
from shared.contracts.workspace import Catalog, CatalogItem
from shared.errors import Invalid
from shared.paging import Int64, decode_cursor, encode_cursor
from shared.settings import WorkspaceSettings

OWN, CURRENT, SUPERSEDED = 0, 1, 2
PARTS = (OWN, CURRENT, SUPERSEDED)
# What a person's catalog holds, and what a run's does (what the run's tools read).
PERSON_KINDS = ["publication", "source", "artifact"]
RUN_KINDS = ["publication", "source"]

_Part = Annotated[int, Field(ge=-1, le=SUPERSEDED)]
_Flag = Annotated[int, Field(ge=0, le=1)]


def bad_cursor() -> Invalid:
    return Invalid("the cursor is not one this catalog gave out", {"field": "cursor"})


@dataclass(frozen=True)
class Position:
    """Where a page of the catalog starts: the catalog as of `as_of`, with `total` items, `served` of them on
    earlier pages, the last of those at `seq` in `part` (-1: none yet); `for_run`: a run's catalog."""

    as_of: int
    total: int
    served: int
    for_run: bool
    part: int = -1
    seq: int = 0

    def cursor(self) -> str:
        return encode_cursor((self.as_of, self.total, self.served, int(self.for_run), self.part, self.seq))

    @classmethod
    def of(cls, cursor: str) -> Position:
        as_of, total, served, for_run, part, seq = decode_cursor(cursor, Int64, Int64, Int64, _Flag, _Part, Int64)
        return cls(as_of=as_of, total=total, served=served, for_run=bool(for_run), part=part, seq=seq)

    @classmethod
    def start(cls, state: asyncpg.Record, *, for_run: bool) -> Position:
        """The first page of the catalog as of now, from the workspace's counters and mark (`catalog_state`)."""
        total = state["catalog_count"] + (0 if for_run else state["pinned_count"])
        return cls(as_of=int(state["catalog_mark"]) + 1, total=int(total), served=0, for_run=for_run)


@dataclass(frozen=True)
class Page:
    rows: list[asyncpg.Record]
    next: Position | None
    omitted: int


class CatalogReader:
    def __init__(self, owners: Owners, settings: WorkspaceSettings):
        self._owners = owners
        self._settings = settings

    def bound(self, limit: int | None) -> int:
        if limit is None:
            return self._settings.catalog_default_limit
        if not 1 <= limit <= self._settings.catalog_max_limit:
            raise Invalid(
                f"limit must be between 1 and {self._settings.catalog_max_limit}",
                {"field": "limit", "limit": self._settings.catalog_max_limit},
            )
        return limit

    async def read(
        self,
        conn: asyncpg.Connection,
        workspaces: ScopedWorkspaceRepository,
        workspace_id: str,
        at: Position,
        limit: int,
    ) -> Page:
        """The page that starts at `at`, read through the repository of the reader's scope: part by part, each
        scan asking only for what the page still lacks (one row more than the page, to know whether another
        page follows)."""
        kinds = RUN_KINDS if at.for_run else PERSON_KINDS
        rows: list[tuple[int, asyncpg.Record]] = []
        part, before = (OWN, at.as_of) if at.part < 0 else (at.part, at.seq)
        while part <= SUPERSEDED and len(rows) <= limit:
            found = await workspaces.catalog_part(
                conn,
                workspace_id=workspace_id,
                part=part,
                as_of=at.as_of,
                before=before,
                kinds=kinds,
                limit=limit + 1 - len(rows),
            )
            rows.extend((part, row) for row in found)
            part, before = part + 1, at.as_of
        shown = rows[:limit]
        served = at.served + len(shown)
        if len(rows) <= limit or not shown:
            return Page([row for _, row in shown], None, 0)
        last_part, last = shown[-1]
        after = replace(at, served=served, part=last_part, seq=int(last["seq"]))
        # The counters are kept with every change, so this is exact; it never claims fewer than one
        # item when another page follows.
        return Page([row for _, row in shown], after, max(at.total - served, 1))

    async def resolve(self, actor: Actor, page: Page) -> Catalog:
        """Turn one page into the catalog's answer, asking every owner once."""
        items = await self.items(actor, page.rows)
        cursor = page.next.cursor() if page.next is not None else None
        return Catalog(items=items, complete=page.next is None, omitted=page.omitted, next_cursor=cursor)

    async def items(self, actor: Actor, rows: Sequence[asyncpg.Record]) -> list[CatalogItem]:
        # A publication names its latest version and a source its active one: the owner says which.
        refs = [Ref(kind=row["kind"], id=row["ref_id"], version=None) for row in rows]
        verdicts = await self._owners.check_eligibility(actor, refs)
        return [
            CatalogItem(
                kind=row["kind"],
                id=row["ref_id"],
                version=verdict.version if verdict.version is not None else row["version"],
                title=verdict.title or row["title"] or row["ref_id"],
                created_at=verdict.created_at or row["created_at"],
                run_id=verdict.run_id or row["run_id"],
                available=verdict.available,
                reason=verdict.reason,
            )
            for row, verdict in zip(rows, verdicts, strict=True)
        ]
