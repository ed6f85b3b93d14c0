"""Runhost built: its rules served on the bus, plus the lease workers."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from services.runhost.attempt import RunAttempts
from services.runhost.external import ExternalRuns
from services.runhost.gauges import count_runs_forever
from services.runhost.owners import Owners
from services.runhost.replies import MESSAGES
from services.runhost.repository import WorkerRuns
from services.runhost.retention import StorageSweeper
from services.runhost.service import RunService
from services.runhost.sweeper import AssociationSweeper
from services.runhost.worker import Worker
from shared.blobs import Blobs
from shared.metrics import MODEL_REPLIES_ANSWERED_BACK, from_zero
from shared.runtime import ServiceRuntime
from shared.settings import RunhostSettings

MIGRATIONS = Path(__file__).parent / "migrations"
NAME = "runhost"
# Seconds: far above the time any of the run host's own transactions takes.
IDLE_TRANSACTION = 30.0


def create_app(settings: RunhostSettings, *, workers: bool = True) -> ServiceRuntime:
    # A worker frozen amid a transaction (stopped, its machine paused) would hold its run's row past its lease
    # and keep the next worker from taking the run over; PostgreSQL ends such a session after this long.
    runtime = ServiceRuntime(NAME, settings, MIGRATIONS, session_state=False, idle_transaction_seconds=IDLE_TRANSACTION)
    from_zero(MODEL_REPLIES_ANSWERED_BACK, MESSAGES)
    repo = WorkerRuns()
    blobs = Blobs(settings)

    # The bus client exists only once the runtime has connected, hence a provider.
    owners = Owners(lambda: runtime.bus)

    attempts = RunAttempts(db=runtime.db, repo=repo, blobs=blobs, owners=owners, settings=settings)
    external = ExternalRuns(db=runtime.db, repo=repo, attempts=attempts, owners=owners, settings=settings)
    service = RunService(db=runtime.db, attempts=attempts, external=external, owners=owners, settings=settings)

    runtime.on_start(blobs.ensure_bucket)
    if workers:
        worker = Worker(db=runtime.db, repo=repo, attempts=attempts, owners=owners, settings=settings)
        runtime.background(worker.run_forever)
        runtime.background(AssociationSweeper(db=runtime.db, repo=repo, owners=owners).run_forever)
        runtime.background(StorageSweeper(db=runtime.db, blobs=blobs, settings=settings).run_forever)
    runtime.background(partial(count_runs_forever, runtime.db, repo))
    runtime.background(external.abandon_forever)

    runtime.serve_rules(service, external)

    return runtime
