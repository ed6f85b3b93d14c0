"""Bus edge of the workspace service: decode, call the rules, encode; and its event consumers."""

from __future__ import annotations

from pathlib import Path

import asyncpg
import nats

from services.workspace.associations import Associations
from services.workspace.catalog import CatalogReader
from services.workspace.checkpoint import Checkpoints
from services.workspace.drift import DriftWatch
from services.workspace.owners import Owners
from services.workspace.service import WorkspaceService
from shared.bus import RequestContext, endpoint
from shared.contracts import workspace as c
from shared.contracts.assets import EVT_SOURCE_RETIRED, EVT_VERSION_ACTIVATED
from shared.contracts.common import Event, Model, event_subject
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
    broker = runtime.broker

    def on(subject: str, model: type[Model]):  # type: ignore[no-untyped-def]
        return endpoint(broker, subject, model, queue=NAME)

    @on(c.CREATE, c.CreateRequest)
    async def create(ctx: RequestContext, req: c.CreateRequest) -> c.Workspace:
        return await workspaces.create(ctx.actor, req)

    @on(c.LIST, c.ListRequest)
    async def list_(ctx: RequestContext, req: c.ListRequest) -> c.WorkspaceList:
        return await workspaces.list_workspaces(ctx.actor, req)

    @on(c.GET, c.WorkspaceIdRequest)
    async def get(ctx: RequestContext, req: c.WorkspaceIdRequest) -> c.Workspace:
        return await workspaces.get(ctx.actor, req.workspace_id)

    @on(c.REVISE_GOAL, c.ReviseGoalRequest)
    async def revise_goal(ctx: RequestContext, req: c.ReviseGoalRequest) -> c.Workspace:
        return await workspaces.revise_goal(ctx.actor, req)

    @on(c.GOAL_VERSIONS, c.WorkspacePageRequest)
    async def goal_versions(ctx: RequestContext, req: c.WorkspacePageRequest) -> c.GoalVersions:
        return await workspaces.goal_versions(ctx.actor, req)

    @on(c.ARCHIVE, c.WorkspaceIdRequest)
    async def archive(ctx: RequestContext, req: c.WorkspaceIdRequest) -> c.Workspace:
        return await workspaces.archive(ctx.actor, req.workspace_id)

    @on(c.UNARCHIVE, c.WorkspaceIdRequest)
    async def unarchive(ctx: RequestContext, req: c.WorkspaceIdRequest) -> c.Workspace:
        return await workspaces.unarchive(ctx.actor, req.workspace_id)

    @on(c.DELETE, c.WorkspaceIdRequest)
    async def delete(ctx: RequestContext, req: c.WorkspaceIdRequest) -> c.DeleteReply:
        await workspaces.delete(ctx.actor, req.workspace_id)
        return c.DeleteReply(workspace_id=req.workspace_id, status="deleted")

    @on(c.CATALOG, c.CatalogRequest)
    async def catalog(ctx: RequestContext, req: c.CatalogRequest) -> c.Catalog:
        return await workspaces.catalog(ctx.actor, req)

    @on(c.CATALOG_BROWSE, c.CatalogBrowseRequest)
    async def browse_catalog(ctx: RequestContext, req: c.CatalogBrowseRequest) -> c.CatalogPage:
        return await workspaces.browse_catalog(ctx.actor, req)

    @on(c.ADMISSION, c.AdmissionRequest)
    async def admission(ctx: RequestContext, req: c.AdmissionRequest) -> c.Admission:
        return await workspaces.admit(ctx.actor, req)

    @on(c.ADD_SOURCE, c.AddSourceRequest)
    async def add_source(ctx: RequestContext, req: c.AddSourceRequest) -> c.Association:
        return await associations.add_source(ctx.actor, req)

    @on(c.PIN_ARTIFACT, c.PinRequest)
    async def pin_artifact(ctx: RequestContext, req: c.PinRequest) -> c.PinReply:
        return await associations.pin_artifact(ctx.actor, req)

    @on(c.ASSOCIATE, c.AssociateRequest)
    async def associate(ctx: RequestContext, req: c.AssociateRequest) -> c.AssociateReply:
        return await associations.associate(ctx.actor, req)

    @on(c.CHECKPOINT_GET, c.WorkspaceIdRequest)
    async def checkpoint(ctx: RequestContext, req: c.WorkspaceIdRequest) -> c.Checkpoint:
        return await checkpoints.get(ctx.actor, req.workspace_id)

    @on(c.CHECKPOINT_UPDATE, c.UpdateCheckpointRequest)
    async def update_checkpoint(ctx: RequestContext, req: c.UpdateCheckpointRequest) -> c.Checkpoint:
        return await checkpoints.update(ctx.actor, req)

    @on(c.CHECKPOINT_REVISIONS, c.WorkspacePageRequest)
    async def checkpoint_revisions(ctx: RequestContext, req: c.WorkspacePageRequest) -> c.CheckpointRevisions:
        return await checkpoints.revisions(ctx.actor, req)

    @on(c.CHECKPOINT_PROPOSE, c.RawProposal)
    async def propose(ctx: RequestContext, req: c.RawProposal) -> c.ProposeReply:
        return await checkpoints.propose(ctx.actor, req)

    @on(c.DRIFT, c.DriftRequest)
    async def drifts(ctx: RequestContext, req: c.DriftRequest) -> c.DriftList:
        return await drift.list_drifts(ctx.actor, req)

    async def on_committed(conn: asyncpg.Connection, event: Event) -> None:
        await associations.on_publication_committed(conn, event)
        await drift.on_publication_committed(conn, event)  # what the new version cites, for later drift

    handlers = {
        event_subject(EVT_COMMITTED): on_committed,
        event_subject(c.EVT_ASSET_ASSOCIATION_REQUESTED): associations.on_asset_association_requested,
        event_subject(EVT_REVISED): drift.on_publication_revised,
        event_subject(EVT_WITHDRAWN): drift.on_publication_withdrawn,
        event_subject(EVT_VERSION_ACTIVATED): drift.on_version_activated,
        event_subject(EVT_SOURCE_RETIRED): drift.on_source_retired,
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
