"""Retries the workspace association of completed runs whose workspace did not answer at finish time."""

from __future__ import annotations

import asyncio
import logging

from services.runhost.admitted import AdmittedRun
from services.runhost.owners import Owners
from services.runhost.repository import WorkerRuns
from shared import tracing
from shared.contracts.workspace import AssociateRequest
from shared.db import Database
from shared.errors import DomainError, NotFound

log = logging.getLogger("dossier.runhost.sweeper")


class AssociationSweeper:
    def __init__(self, *, db: Database, repo: WorkerRuns, owners: Owners, interval: float = 30.0, batch: int = 50):
        self.db, self.repo, self.owners = db, repo, owners
        self.interval, self.batch = interval, batch

    async def sweep_once(self) -> int:
        async with self.db.statement() as conn:
            runs = await self.repo.pending_associations(conn, limit=self.batch)
        settled = 0
        for run in runs:
            # A late part of the run's work: in the trace of its admission.
            with tracing.work_span("run association retry", run.trace_headers, {"dossier.run_id": run.id}):
                settled += await self._settle(run)
        return settled

    async def _settle(self, run: AdmittedRun) -> int:
        actor = run.actor
        publication = run.publication
        assert publication is not None, "only published runs wait for their association"
        try:
            request = AssociateRequest(
                workspace_id=run.workspace_id,
                kind="publication",
                ref_id=publication.id,
                version=publication.version,
                run_id=run.id,
                title=run.answer_title,
            )
            association = (await self.owners.associate_with_workspace(actor, request)).association
        except NotFound:
            association = "refused"
        except DomainError:
            return 0
        async with self.db.transaction() as conn:
            await self.repo.set_association(conn, run_id=run.id, association=association)
        return 1

    async def run_forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sweep_once()
            except (DomainError, OSError) as exc:
                log.warning("association sweep failed: %s", exc)
