"""Retries the workspace association of completed runs whose workspace did not answer at finish time."""

from __future__ import annotations

import asyncio
import logging

import asyncpg

from services.runhost.owners import Owners
from services.runhost.repository import RunRepository
from shared import tracing
from shared.contracts.common import Actor
from shared.contracts.workspace import AssociateRequest
from shared.db import Database
from shared.errors import DomainError, NotFound

log = logging.getLogger("dossier.runhost.sweeper")


class AssociationSweeper:
    def __init__(self, *, db: Database, repo: RunRepository, owners: Owners, interval: float = 30.0, batch: int = 50):
        self.db, self.repo, self.owners = db, repo, owners
        self.interval, self.batch = interval, batch

    async def sweep_once(self) -> int:
        async with self.db.pool.acquire() as conn:
            rows = await self.repo.pending_associations(conn, limit=self.batch)
        settled = 0
        for row in rows:
            # A late part of the run's work: in the trace of its admission.
            with tracing.work_span("run association retry", row.get("trace_headers"), {"dossier.run_id": row["id"]}):
                settled += await self._settle(row)
        return settled

    async def _settle(self, row: asyncpg.Record) -> int:
        actor = Actor(scope=row["scope"], principal=f"run:{row['id']}")
        try:
            request = AssociateRequest(
                workspace_id=row["workspace_id"],
                kind="publication",
                ref_id=row["publication_id"],
                version=row["publication_version"],
                run_id=row["id"],
            )
            association = (await self.owners.associate_with_workspace(actor, request)).association
        except NotFound:
            association = "refused"
        except DomainError:
            return 0
        async with self.db.transaction() as conn:
            await self.repo.set_association(conn, run_id=row["id"], association=association)
        return 1

    async def run_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sweep_once()
            except (DomainError, OSError) as exc:
                log.warning("association sweep failed: %s", exc)
