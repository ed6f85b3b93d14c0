"""The workspace service built: its rules served on the bus, and its event rules followed."""

from __future__ import annotations

from pathlib import Path

from services.workspace.associations import Associations
from services.workspace.backfill import Backfill
from services.workspace.catalog import CatalogReader
from services.workspace.checkpoint import Checkpoints
from services.workspace.drift import DriftWatch
from services.workspace.owners import Owners
from services.workspace.service import WorkspaceService
from services.workspace.staleness import ClaimRecheck
from shared.runtime import ServiceRuntime
from shared.settings import WorkspaceSettings

MIGRATIONS = Path(__file__).parent / "migrations"
NAME = "workspace"


def create_app(settings: WorkspaceSettings) -> ServiceRuntime:
    runtime = ServiceRuntime(NAME, settings, MIGRATIONS, consumer_prefix=settings.consumer_prefix)
    owners = Owners(
        lambda: runtime.bus, check_timeout=settings.owner_check_timeout, retain_timeout=settings.retain_timeout
    )
    workspaces = WorkspaceService(runtime.db, settings, CatalogReader(owners, settings))
    associations = Associations(runtime.db, owners)
    checkpoints = Checkpoints(runtime.db, owners, settings)
    drift = DriftWatch(runtime.db, checkpoints)
    recheck = ClaimRecheck(lambda: runtime.bus, timeout=settings.owner_check_timeout)
    # Every rule marked with the subject it answers or the event it consumes (one durable consumer each).
    runtime.serve_rules(workspaces, associations, checkpoints, drift, recheck)
    # What associations recorded by earlier releases lack (a title, that an artifact is a run's report).
    runtime.background(Backfill(runtime.db, owners).run_forever)
    return runtime
