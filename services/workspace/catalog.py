"""The bounded catalog: N items a workspace refers to, each with its owner's verdict.

It is what a run is admitted with, so it never claims more than it knows: `complete` and `omitted` say
how much was left out, and an item whose owner did not confirm it is listed as unavailable with the
reason, never dropped and never shown as available.

A run's catalog is filled for its question. Every run adds its publication and its report artifact to
the workspace, so by recency alone a few dozen runs push the ingested sources off the page. The kinds
are kept apart instead: each kind's newest `candidate_window` items are ranked by how many of the
question's words their title holds, then by recency, and the kinds take turns (sources first), so the
outputs of runs can take at most their share of the page and never a source's place. What the page
omits stays reachable: a run's evidence search covers every active source of its scope and the
earlier publications of its workspace, and what its search found is one it may read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import asyncpg

from services.workspace.owners import Owners
from shared.contracts.common import Actor, Ref
from shared.contracts.workspace import Catalog, CatalogItem
from shared.errors import Invalid
from shared.settings import WorkspaceSettings

# The kinds in the order they take turns on a run's catalog page.
CATALOG_KINDS = ("source", "publication", "artifact")
# Relevance is ranked among each kind's newest this-many-times-the-page items: bounded work per admission.
WINDOW_PAGES = 4
MAX_QUESTION_WORDS = 16
_WORD = re.compile(r"[^\W_]{4,}")


def question_words(question: str) -> list[str]:
    """The question's words that say something (four letters or more), lower-cased, once each."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(question)))[:MAX_QUESTION_WORDS]


def candidate_window(limit: int) -> int:
    return limit * WINDOW_PAGES


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

    async def resolve(self, actor: Actor, page: Sequence[asyncpg.Record]) -> Catalog:
        """Turn one page (see `WorkspaceRepository.catalog_page`) into the catalog, asking every owner once."""
        total = int(page[0]["catalog_count"]) if page else 0
        rows = [row for row in page if row["kind"] is not None]
        # A publication names its latest version and a source its active one: the owner says which.
        refs = [Ref(kind=row["kind"], id=row["ref_id"], version=None) for row in rows]
        verdicts = await self._owners.check_eligibility(actor, refs)
        items = [
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
        omitted = max(total - len(items), 0)
        return Catalog(items=items, complete=omitted == 0, omitted=omitted)
