"""A run's limits as an outside agent's calls meet them: the same steps, characters and time as the run host's
own loop (services/runhost/loop.py) holds its policy to.

Every run-bound call of the agent is one step, counted under the lock of the run's row with the check of its
lease (`ExternalRuns._session`), so concurrent calls cannot slip past `max_steps` together. The characters
the agent moves through the run count against `max_chars`: what it writes, known before the write, and what a
read, a search or the catalog answers, counted once it is known. The time limit runs from the run's start: no
lease reaches past it (services/runhost/external_repository.py), and a call after it ends the run. A lease
renewal is no step: it is how a session keeps its run, and the time limit bounds it instead.

The call that would take the run over a limit is refused (409, naming the limit) and the run ends `failed`
with `limit_reached` (its `error_details` naming the limit and its value), in the same transaction, publishing nothing and keeping its files, as
docs/api.md says of any run. A run a finish has won is past its limits' reach: it is being published.
"""

from __future__ import annotations

import logging
from datetime import datetime

import asyncpg

from services.runhost import leases
from services.runhost.admitted import AdmittedRun
from services.runhost.events import emit
from services.runhost.external_repository import ExternalRepository
from services.runhost.repository import WorkDone, WorkerRuns
from shared import tracing
from shared.contracts import runhost as c
from shared.db import Database
from shared.errors import Conflict

log = logging.getLogger("dossier.runhost.limits")


class AgentLimits:
    def __init__(self, *, db: Database, repo: WorkerRuns, leases: ExternalRepository):
        self.db, self.repo, self.leases = db, repo, leases

    async def check_in(
        self, conn: asyncpg.Connection, run: AdmittedRun, now: datetime, *, step: bool, chars: int = 0
    ) -> Conflict | None:
        """Inside the transaction that locked the run and found the caller's lease current: the refusal of a
        call the run's time or lease no longer allows, or that would break a limit (the run then ends at it);
        else the call is counted (`step`, and the `chars` it brings) and None."""
        if run.deadline is not None and run.deadline <= now:
            return await self._end(conn, run, "max_seconds")
        if run.lease_expires_at is None or run.lease_expires_at <= now:
            return leases.expired()
        if not step:
            return None
        which = run.limits.exceeded(steps=run.steps + 1, chars=run.chars_read + chars, past_deadline=False)
        if which is not None:
            return await self._end(conn, run, which)
        await self.repo.add_counters(conn, run_id=run.id, epoch=run.lease_epoch, work=WorkDone(steps=1, chars=chars))
        return None

    async def charge(self, run: AdmittedRun, epoch: int, *, chars: int, source_chars: int = 0) -> None:
        """What a call answered, once it is known: counted, or, over `max_chars`, the run ends and the call is
        refused. Raises the refusal (a run taken over or ended meanwhile: the fence's)."""
        refusal: Conflict | None = None
        async with self.db.transaction() as conn:
            locked = await self.leases.lock_run(conn, id=run.id)
            current = locked[0] if locked is not None else None
            if current is None or current.status != "running":
                refusal = (
                    leases.not_running(current.status, current.error, current.error_details)
                    if current
                    else leases.superseded(None)
                )
            elif current.lease_epoch != epoch:
                refusal = leases.superseded(current.lease_epoch)
            elif current.final_answer is None:
                which = current.limits.exceeded(
                    steps=current.steps, chars=current.chars_read + chars, past_deadline=False
                )
                if which is not None:
                    refusal = await self._end(conn, current, which)
                else:
                    work = WorkDone(chars=chars, source_chars=source_chars)
                    await self.repo.add_counters(conn, run_id=run.id, epoch=epoch, work=work)
        if refusal is not None:
            raise refusal

    async def _end(self, conn: asyncpg.Connection, run: AdmittedRun, which: str) -> Conflict:
        error, details = leases.LIMIT_REACHED, leases.limit_details(which, run.limits.maximum(which))
        ended = await self.leases.end_at_limit(conn, run_id=run.id, epoch=run.lease_epoch, error=error, details=details)
        if ended is None:
            return leases.superseded(run.lease_epoch)
        await emit(conn, c.EVT_FAILED, ended, error=error)
        log.info("run %s: stopped at its %s limit", run.id, which)
        return leases.limit_reached(which, run.limits.maximum(which))

    async def end_past_deadline(self) -> None:
        """External runs left running past their time limit (no call came to end them) fail at it."""
        error = leases.LIMIT_REACHED
        async with self.db.transaction() as conn:
            runs = await self.leases.past_deadline(conn, error=error)
            for run in runs:
                # The run's end belongs to the trace of its admission, not to this sweep.
                with tracing.continued(run.trace_headers):
                    await emit(conn, c.EVT_FAILED, run, error=error)
        for run in runs:
            log.info("run %s: stopped at its time limit", run.id)
