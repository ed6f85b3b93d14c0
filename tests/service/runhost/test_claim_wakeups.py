"""The claim loop's wake-up: a run admitted while a claim looks is claimed next, not at the next poll."""

from __future__ import annotations

import asyncio

from services.runhost.admitted import AdmittedRun
from services.runhost.attempt import RunAttempts
from services.runhost.owners import Owners
from services.runhost.repository import WAKE_CHANNEL, WorkerRuns
from services.runhost.worker import Worker
from shared.blobs import Blobs
from shared.db import Database
from shared.settings import RunhostSettings
from tests.support.databases import listener_session
from tests.support.infra import Infra
from tests.support.probe import probe_until
from tests.support.service import settings_from


class HeldClaims(Worker):
    """A worker whose claims wait for the test's word before they look (they look in its real database)."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.started: list[asyncio.Event] = []
        self.go_on: list[asyncio.Event] = []

    async def _claim(self) -> AdmittedRun | None:
        started, go_on = asyncio.Event(), asyncio.Event()
        self.started.append(started)
        self.go_on.append(go_on)
        started.set()
        await go_on.wait()
        return await super()._claim()

    async def claim_started(self, n: int) -> None:
        async def started() -> bool:
            return len(self.started) >= n

        await probe_until(started, timeout=10)

    async def woken(self) -> bool:
        return self._wake.is_set()


async def test_a_wakeup_sent_while_a_claim_looks_starts_the_next_claim_at_once(db: Database, infra: Infra) -> None:
    settings = settings_from(infra.settings_env("runhost") | {"DOSSIER_RUN_POLL_SECONDS": "60"}, RunhostSettings)
    repo = WorkerRuns()
    owners = Owners(lambda: None)  # type: ignore[arg-type,return-value]  # no run is admitted, so none is asked
    attempts = RunAttempts(db=db, repo=repo, blobs=Blobs(settings), owners=owners, settings=settings)
    worker = HeldClaims(db=db, repo=repo, attempts=attempts, owners=owners, settings=settings)
    task = asyncio.create_task(worker.run_forever())
    try:
        await worker.claim_started(1)
        await probe_until(lambda: listener_session(db), timeout=30)
        # The wake-up of a run admitted now, while the first claim looks (it finds nothing).
        async with db.pool.acquire() as conn:
            await conn.execute(f"NOTIFY {WAKE_CHANNEL}")
        await probe_until(worker.woken, timeout=10)
        worker.go_on[0].set()
        # The next claim follows at once, not after the minute's poll.
        await worker.claim_started(2)
        worker.go_on[1].set()
    finally:
        for go_on in worker.go_on:
            go_on.set()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
