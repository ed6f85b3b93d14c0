"""Workers share runs through leases in runhost's database (FOR UPDATE SKIP LOCKED, heartbeat, expiry).

A lease carries an epoch; every write of a worker is fenced by it, so a worker that lost its lease
(paused, partitioned, presumed dead) can no longer change the run. A run whose worker died is taken
over when its lease expires, and resumes from its working files.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket

import asyncpg

from services.runhost.admitted import AdmittedRun
from services.runhost.attempt import RunAttempt, RunAttempts
from services.runhost.events import emit
from services.runhost.finishing import Finisher
from services.runhost.leases import StaleLease
from services.runhost.loop import Finished, RunLoop, Stopped
from services.runhost.owners import Owners
from services.runhost.policies.base import PolicyError
from services.runhost.policies.factory import make_policy
from services.runhost.repository import WAKE_CHANNEL, WorkerRuns
from shared import tracing
from shared.aio import wait_event
from shared.contracts import runhost as c
from shared.db import Database, session_lost
from shared.errors import DomainError
from shared.metrics import LEASE_TAKEOVERS
from shared.observe import bound
from shared.settings import RunhostSettings

log = logging.getLogger("dossier.runhost.worker")


class Worker:
    def __init__(
        self, *, db: Database, repo: WorkerRuns, attempts: RunAttempts, owners: Owners, settings: RunhostSettings
    ):
        self.db, self.repo, self.attempts, self.owners, self.settings = db, repo, attempts, owners, settings
        self.id = f"{socket.gethostname()}:{os.getpid()}"
        self._slots = asyncio.Semaphore(settings.run_concurrency)
        self._wake = asyncio.Event()
        self._running: set[asyncio.Task[None]] = set()

    async def run_forever(self) -> None:
        try:
            # An admitted run wakes the claim loop at once, also after PostgreSQL restarted; the poll is the backstop.
            async with self.db.listening(WAKE_CHANNEL, self._wake.set):
                await self._claim_forever()
        finally:
            for task in self._running:
                task.cancel()
            await asyncio.gather(*self._running, return_exceptions=True)
            # On a graceful stop, hand our runs back at once instead of making them wait out the lease.
            async with self.db.transaction() as conn:
                await self.repo.release_leases(conn, owner=self.id)

    async def _claim_forever(self) -> None:
        while True:
            await self._slots.acquire()
            # Cleared before the claim looks: a run admitted while it looks keeps the event set for the next claim.
            self._wake.clear()
            try:
                run = await self._claim()
            except (OSError, asyncpg.PostgresError) as exc:
                # The runs in flight go on; claiming is tried again at the next poll.
                log.warning("runhost worker: no claim this time (%r)", exc)
                run = None
            if run is None:
                self._slots.release()
                await wait_event(self._wake, self.settings.run_poll_seconds)
                continue
            task = asyncio.create_task(self._execute_in_slot(run))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _claim(self) -> AdmittedRun | None:
        async with self.db.transaction() as conn:
            run = await self.repo.claim_run(conn, owner=self.id, lease_seconds=self.settings.run_lease_seconds)
            if run is not None and run.lease_epoch == 1:
                # `run.started` belongs to the run's trace, not to the claim's idle poll.
                with tracing.continued(run.trace_headers):
                    await emit(conn, c.EVT_STARTED, run)
        if run is not None and run.lease_epoch > 1:
            LEASE_TAKEOVERS.inc()
        return run

    async def _execute_in_slot(self, run: AdmittedRun) -> None:
        try:
            await self.execute(run)
        finally:
            self._slots.release()

    async def execute(self, run: AdmittedRun) -> None:
        # Every log line and bus call of this attempt carries the run, its scope and one request id.
        with bound(run_id=run.id, scope=run.scope, request_id=f"{run.id}.e{run.lease_epoch}"):
            log.info("run %s: working (lease epoch %s)", run.id, run.lease_epoch)
            # One span per attempt, a child of the admission's: the run's calls, its events and their
            # consumers are in the trace of the POST that admitted it, however late the worker takes it.
            with tracing.work_span(
                "run attempt",
                run.trace_headers,
                {"dossier.run_id": run.id, "dossier.lease_epoch": run.lease_epoch},
            ):
                await self._execute_bound(run)

    async def _execute_bound(self, run: AdmittedRun) -> None:
        epoch = run.lease_epoch
        lost = asyncio.Event()
        # The lease's upkeep is not the run's work: traced, it would add a statement every few seconds to it.
        with tracing.untraced():
            heartbeat = asyncio.create_task(self._heartbeat(run.id, epoch, lost))
        work = asyncio.create_task(self._drive(run))
        lease_lost = asyncio.create_task(lost.wait())
        try:
            done, _ = await asyncio.wait({work, lease_lost}, return_when=asyncio.FIRST_COMPLETED)
            if work not in done:
                log.warning("run %s: lease epoch %s lost; stopping this worker's attempt", run.id, epoch)
                work.cancel()
            await asyncio.gather(work, return_exceptions=True)
        finally:
            # Every task started here ends here: a pending one left behind is "destroyed but pending" later.
            for task in (heartbeat, lease_lost, work):
                task.cancel()
            await asyncio.gather(heartbeat, lease_lost, work, return_exceptions=True)

    async def _heartbeat(self, run_id: str, epoch: int, lost: asyncio.Event) -> None:
        interval = self.settings.run_lease_seconds / 3
        while True:
            await asyncio.sleep(interval)
            try:
                async with self.db.transaction() as conn:
                    alive = await self.repo.heartbeat(
                        conn, run_id=run_id, epoch=epoch, lease_seconds=self.settings.run_lease_seconds
                    )
            except (OSError, asyncpg.PostgresError):
                continue
            if not alive:
                lost.set()
                return

    async def _drive(self, run: AdmittedRun) -> None:
        attempt = self.attempts.attempt(run)
        finisher = attempt.finisher
        try:
            if run.final_answer is not None:
                # An earlier worker reached its answer and began finishing: finish with that answer.
                await finisher.resume_finish()
                return
            outcome = await self._research(attempt)
            if isinstance(outcome, Finished):
                await finisher.complete(outcome.answer, outcome.proposal)
            elif outcome.limit is None:
                await finisher.cancelled()
            else:
                await self._end_at_limit(finisher, outcome)
        except StaleLease:
            log.warning("run %s: a newer worker owns the run; this attempt's writes stop here", run.id)
        except (PolicyError, DomainError) as exc:
            message = exc.message if isinstance(exc, DomainError) else str(exc)
            await self._fail(finisher, f"{type(exc).__name__}: {message}")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if session_lost(exc):
                # As a crash of this process would: the run resumes from what its attempts kept.
                log.warning(
                    "run %s: this attempt lost its database session (%r); the run is taken up again", run.id, exc
                )
                await self._let_go(run)
                return
            log.exception("run %s failed unexpectedly", run.id)
            await self._fail(finisher, f"internal error ({type(exc).__name__})")

    async def _let_go(self, run: AdmittedRun) -> None:
        """The run's lease ended now rather than at its expiry, when the database answers again at once."""
        with contextlib.suppress(OSError, asyncpg.PostgresError):
            async with self.db.transaction() as conn:
                await self.repo.release_lease(conn, run_id=run.id, epoch=run.lease_epoch)

    async def _fail(self, finisher: Finisher, error: str) -> None:
        log.warning("run %s: failed: %s", finisher.run.id, error)
        try:
            await finisher.failed(error)
        except StaleLease:
            pass

    async def _research(self, attempt: RunAttempt) -> Finished | Stopped:
        run = attempt.run
        try:
            revision = await self.owners.fetch_checkpoint_revision(run.actor, workspace_id=run.workspace_id)
        except DomainError:
            revision = 0
        policy = make_policy(run.model, self.settings)
        loop = RunLoop(
            attempt=attempt,
            policy=policy,
            db=self.db,
            repo=self.repo,
            checkpoint_revision=revision,
            same_failures=self.settings.run_same_failures,
            max_rereads=self.settings.run_max_rereads,
            step_delay=self.settings.run_step_delay_seconds,
        )
        try:
            return await loop.run_until_done()
        finally:
            close = getattr(policy, "close", None)
            if close is not None:
                await close()

    async def _end_at_limit(self, finisher: Finisher, outcome: Stopped) -> None:
        """A run stopped at a limit did not finish: it fails saying which limit, publishes nothing, and keeps
        its files and ledger (what it read and noted stays there to look at)."""
        log.warning("run %s: failed at its limit %s (%s)", finisher.run.id, outcome.limit, outcome.value)
        await finisher.failed(c.LIMIT_REACHED, {"limit": outcome.limit, "value": outcome.value})
