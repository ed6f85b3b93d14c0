"""What associations recorded by earlier releases lack, asked of their owners once, after the start.

Earlier run hosts associated a run's publication without its title, and when that beat
`publication.committed` (which carries it) the title was lost; they also pinned a run's HTML report without
saying it was one, so it stood in the catalog as an item of its own. Migration 0004 flags those rows
(`backfill`). This asks each row's owner, in batches (one per scope and owner), for what only the owner
knows: a publication's title, and an artifact's title, which names the run of a report
("Report of run_…: …", earlier "Run run_…: …"). Each flagged row is settled once; a row whose owner did
not answer stays flagged and is asked again later.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence

import asyncpg

from services.workspace.owners import FAILED, UNREACHABLE, Owners, Verdict
from services.workspace.repository import WorkspaceMaintenance, WorkspaceRepository
from shared.contracts.common import Actor, Ref
from shared.db import Database

log = logging.getLogger("dossier.workspace.backfill")
BATCH = 200
RETRY_SECONDS = 30.0
# A run's report, as its run host titled it (shared/contracts/runhost.py REPORT_TITLE_PREFIX, and before it).
_REPORT = re.compile(r"^(?:Report of|Run) (run_[0-9a-f]{6,64}): ")


def report_run(title: str | None) -> str | None:
    """The run whose report an artifact titled so is, or None."""
    match = _REPORT.match(title or "")
    return match[1] if match else None


class Backfill:
    def __init__(self, db: Database, owners: Owners, repo: WorkspaceRepository | None = None):
        self._db = db
        self._owners = owners
        self._repo = repo or WorkspaceRepository()
        # The listing of flagged rows crosses scopes; each row is then settled by its own scope's repository.
        self._maintenance = WorkspaceMaintenance()

    async def settle_all(self) -> int:
        """One pass over every flagged row; how many stay flagged (their owner did not answer)."""
        after, left = 0, 0
        while True:
            async with self._db.statement() as conn:
                rows = await self._maintenance.pending_backfill(conn, after=after, limit=BATCH)
            if not rows:
                return left
            after = int(rows[-1]["seq"])
            for scope in dict.fromkeys(row["scope"] for row in rows):
                left += await self._settle(scope, [row for row in rows if row["scope"] == scope])

    async def _settle(self, scope: str, rows: Sequence[asyncpg.Record]) -> int:
        refs = [Ref(kind=row["kind"], id=row["ref_id"], version=None) for row in rows]
        verdicts = await self._owners.check_eligibility(Actor(scope=scope, principal="system:workspace"), refs)
        left = 0
        workspaces = self._repo.for_scope(scope)
        async with self._db.transaction() as conn:
            for row, verdict in zip(rows, verdicts, strict=True):
                if verdict.reason in (UNREACHABLE, FAILED):
                    left += 1
                    continue
                await workspaces.settle_backfill(
                    conn,
                    workspace_id=row["workspace_id"],
                    kind=row["kind"],
                    ref_id=row["ref_id"],
                    **learned(row["kind"], verdict),
                )
        return left

    async def run_forever(self) -> None:
        """Until nothing is left: most homes have nothing flagged, and this ends at once."""
        while True:
            try:
                left = await self.settle_all()
            except (OSError, asyncpg.PostgresError) as exc:
                log.warning("the association backfill failed (%s); trying again later", exc)
                left = 1
            if not left:
                return
            log.info("%d associations wait for their owner to answer; asking again later", left)
            await asyncio.sleep(RETRY_SECONDS)


def learned(kind: str, verdict: Verdict) -> dict[str, str | None]:
    """What a row takes from its owner's verdict: a publication its title, an artifact whether it is a report."""
    if kind == "publication":
        return {"title": verdict.title, "report_of": None}
    if kind == "artifact":
        return {"title": None, "report_of": report_run(verdict.title)}
    return {"title": None, "report_of": None}
