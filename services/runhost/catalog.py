"""A run's catalog as admitted: every page of it, and what of it the run may read.

The first page is kept in the run row at admission (`catalog`). Every later page is read from the workspace
as of the admission's mark (`catalog_as_of`, services/workspace/catalog.py), so the run pages through the
catalog it was admitted with, however the workspace has changed since, and `omitted` never means
unreachable. Runs admitted before the catalog paged have no mark: their catalog is their first page.

A run's grant names the refs of its first page and its history, so it stays small however large the
catalog is. A read of a publication that only a later page holds is confirmed with the workspace (the
catalog as admitted holds it) and made under a grant that also names it: whatever a run is shown, on
any page, it can read, and it can read nothing its admission did not hold. Sources need no such grant:
a run reads a source's passages through its own search, which every source of its scope is open to.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from services.runhost.admitted import AdmittedRun
from services.runhost.owners import Owners
from shared.contracts.common import Ref
from shared.contracts.workspace import Catalog
from shared.errors import Invalid

Mint = Callable[[Sequence[str]], str]


class RunCatalog:
    def __init__(self, run: AdmittedRun, owners: Owners, mint: Mint | None = None):
        """`mint(refs)`: a grant of this run that also names `refs` (services/runhost/attempt.py `run_grant`)."""
        self.run, self.owners, self._mint = run, owners, mint
        self._admitted = set(run.grant_refs())

    async def page(self, cursor: str | None) -> Catalog:
        """The first page without a cursor; with one, the page it names (a `next_cursor` of this catalog)."""
        if cursor is None:
            return self.run.catalog
        if self.run.catalog_as_of is None:
            raise Invalid("this run was admitted before its catalog had later pages", {"field": "cursor"})
        return await self.owners.fetch_admitted_catalog_page(
            self.run.actor, workspace_id=self.run.workspace_id, as_of=self.run.catalog_as_of, cursor=cursor
        )

    async def grant_for(self, ref: Ref, grant: str) -> str:
        """The grant to read `ref` with: `grant` when it names the ref (or nothing more can be granted); for a
        publication on a later page of the catalog as admitted, a grant that also names it (at any version:
        the item is the publication, and its owner checks the version asked for)."""
        if ref.key() in self._admitted or self._mint is None or self.run.catalog_as_of is None:
            return grant
        held = await self.owners.admitted_catalog_holds(
            self.run.actor, workspace_id=self.run.workspace_id, as_of=self.run.catalog_as_of, ref=ref
        )
        return self._mint([ref.key()]) if held else grant
