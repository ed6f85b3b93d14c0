"""The workspace service built: its rules served on the bus, and its event consumers."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import nats

from services.workspace.associations import Associations
from services.workspace.backfill import Backfill
from services.workspace.catalog import CatalogReader
from services.workspace.checkpoint import Checkpoints
from services.workspace.drift import DriftWatch
from services.workspace.owners import Owners
from services.workspace.service import WorkspaceService
from services.workspace.staleness import ClaimRecheck
from shared.contracts import workspace as c
from shared.contracts.assets import EVT_SOURCE_RETIRED, EVT_VERSION_ACTIVATED
from shared.contracts.common import Event
from shared.contracts.publication import EVT_COMMITTED, EVT_REVISED, EVT_WITHDRAWN
from shared.natsauth import connect_options, workspace_durables
from shared.outbox import consume
from shared.runtime import ServiceRuntime
from shared.settings import WorkspaceSettings

MIGRATIONS = Path(__file__).parent / "migrations"
NAME = "workspace"


def consumer_names(prefix: str) -> dict[str, str]:
    """Durable consumer name → the event subject it follows (named in shared.natsauth, which grants them)."""
    return workspace_durables(prefix)


def create_app(settings: WorkspaceSettings) -> ServiceRuntime:
    runtime = ServiceRuntime(NAME, settings, MIGRATIONS)
    owners = Owners(
        lambda: runtime.bus, check_timeout=settings.owner_check_timeout, retain_timeout=settings.retain_timeout
    )
    workspaces = WorkspaceService(runtime.db, settings, CatalogReader(owners, settings))
    associations = Associations(runtime.db, owners)
    checkpoints = Checkpoints(runtime.db, owners, settings)
    drift = DriftWatch(runtime.db, checkpoints)
    recheck = ClaimRecheck(lambda: runtime.bus, timeout=settings.owner_check_timeout)
    runtime.serve_rules(workspaces, associations, checkpoints, drift)
    # What associations recorded by earlier releases lack (a title, that an artifact is a run's report).
    runtime.background(Backfill(runtime.db, owners).run_forever)

    async def on_committed(conn: asyncpg.Connection, event: Event) -> None:
        await associations.on_publication_committed(conn, event)
        await drift.on_publication_committed(conn, event)  # what the new version cites, for later drift

    handlers = {
        EVT_COMMITTED.subject: on_committed,
        c.EVT_ASSET_ASSOCIATION_REQUESTED.subject: associations.on_asset_association_requested,
        EVT_REVISED.subject: drift.on_publication_revised,
        EVT_WITHDRAWN.subject: drift.on_publication_withdrawn,
        EVT_VERSION_ACTIVATED.subject: drift.on_version_activated,
        EVT_SOURCE_RETIRED.subject: drift.on_source_retired,
        c.EVT_CITATION_CHANGED.subject: recheck.on_citation_changed,
    }
    for durable, subject in consumer_names(settings.consumer_prefix).items():

        async def follow(durable: str = durable, subject: str = subject) -> None:
            # A connection of its own: at shutdown the broker drains its connection, and nats-py's drain
            # waits on a pull subscription's queue until its timeout (30 s) instead of returning.
            nc = await nats.connect(
                settings.nats_servers, name=f"{NAME}-{durable}", max_reconnect_attempts=-1, **connect_options(settings)
            )
            try:
                await consume(
                    nc,
                    runtime.db,
                    consumer=durable,
                    filter_subject=subject,
                    handler=handlers[subject],
                    replicas=settings.stream_replicas,
                )
            finally:
                await nc.close()

        runtime.background(follow)

    return runtime
