"""The rules of associations: what may be linked to a workspace, when, and what happens when it may not.

An association is a reference to a record another service owns. It is recorded only while the workspace
is active, or, once archived, for a run admitted before the archive. A deleted workspace takes nothing:
the association is recorded nowhere and, for an event, `workspace.association_refused` says so.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import asyncpg

from services.workspace.owners import FAILED, UNREACHABLE, Owners
from services.workspace.repository import ScopedWorkspaceRepository, WorkspaceRepository
from services.workspace.service import not_found
from shared.bus import RequestContext, answers
from shared.contracts import workspace as c
from shared.contracts.assets import AssociationRequested
from shared.contracts.common import Actor, Ref
from shared.contracts.publication import EVT_COMMITTED, VersionEvent
from shared.db import Database, from_row
from shared.errors import Conflict, DomainError, Invalid, NotFound, Unavailable, Unreachable
from shared.events import EventContext, consumes
from shared.outbox import enqueue

log = logging.getLogger("dossier.workspace.associations")


def refusal(workspace: asyncpg.Record | None, admission: asyncpg.Record | None) -> str | None:
    """Why an association must be refused, or None when it may be recorded."""
    if workspace is None:
        return "workspace_not_found"
    if workspace["status"] == "deleted":
        return "workspace_deleted"
    if workspace["status"] == "archived":
        admitted_before = admission is not None and admission["admitted_at"] <= workspace["archived_at"]
        return None if admitted_before else "workspace_archived"
    return None


@dataclass(frozen=True)
class Link:
    """One association to record: a ref another service owns, linked to a workspace (by a run, maybe)."""

    workspace_id: str
    kind: str
    ref_id: str
    version: int | None = None
    run_id: str | None = None
    title: str | None = None


class Associations:
    def __init__(self, db: Database, owners: Owners, repo: WorkspaceRepository | None = None):
        self._db = db
        self._owners = owners
        self._repo = repo or WorkspaceRepository()

    async def record(self, conn: asyncpg.Connection, scope: str, link: Link, cites: Sequence[str] = ()) -> str | None:
        """Record one association in the caller's transaction; returns the refusal reason, if any.

        `cites`: the publications a run's publication cites (from `publication.committed`)."""
        workspaces = self._repo.for_scope(scope)
        # The exclusive lock orders this against archive and delete, admissions, and the catalog's counters.
        workspace = await workspaces.lock_workspace(conn, id=link.workspace_id)
        if workspace is not None and workspace["status"] != "deleted":
            existing = await workspaces.get_association(
                conn, workspace_id=link.workspace_id, kind=link.kind, ref_id=link.ref_id
            )
            if existing is not None:
                # Idempotent: what was confirmed once stays confirmed. Whichever of the run's finish and
                # `publication.committed` comes first, the later one gives what the first lacked.
                title = link.title if existing["title"] is None else None
                if title is not None:
                    await workspaces.fill_title(
                        conn, workspace_id=link.workspace_id, kind=link.kind, ref_id=link.ref_id, title=title
                    )
                if existing["run_id"] is not None:
                    await self._supersede(conn, workspaces, link, existing["seq"], title, cites)
                return None
        admission = None
        if workspace is not None and workspace["status"] == "archived" and link.run_id:
            admission = await workspaces.find_admission(conn, workspace_id=link.workspace_id, run_id=link.run_id)
        reason = refusal(workspace, admission)
        if reason is None:
            seq = await workspaces.insert_association(conn, **asdict(link))
            if seq is not None and link.run_id is not None:
                await self._supersede(conn, workspaces, link, seq, link.title, cites)
        return reason

    async def _supersede(
        self,
        conn: asyncpg.Connection,
        workspaces: ScopedWorkspaceRepository,
        link: Link,
        seq: int,
        title: str | None,
        cites: Sequence[str],
    ) -> None:
        """A run's publication supersedes the earlier runs' publications it cites or whose question it answers
        again (the same title): they move after the current ones in the catalog (services/workspace/catalog.py)."""
        if link.kind != "publication" or (title is None and not cites):
            return
        await workspaces.supersede(conn, workspace_id=link.workspace_id, by_seq=seq, title=title, cited=list(cites))

    async def _live_status(self, actor: Actor, workspace_id: str) -> str:
        async with self._db.statement() as conn:
            row = await self._repo.for_scope(actor.scope).find_workspace(conn, id=workspace_id)
        if row is None:
            raise not_found(workspace_id)
        if row["status"] == "archived":
            raise Conflict("the workspace is archived; it takes no new associations", {"status": "archived"})
        return str(row["status"])

    # -- requests -----------------------------------------------------------------------------------

    @answers(c.ASSOCIATE)
    async def associate(self, ctx: RequestContext, req: c.AssociateRequest) -> c.AssociateReply:
        async with self._db.transaction() as conn:
            link = Link(req.workspace_id, req.kind, req.ref_id, req.version, req.run_id, req.title)
            reason = await self.record(conn, ctx.actor.scope, link)
        if reason is not None:
            return c.AssociateReply(association="refused", reason=reason)
        return c.AssociateReply(association="confirmed")

    @answers(c.ADD_SOURCE)
    async def add_source(self, ctx: RequestContext, req: c.AddSourceRequest) -> c.Association:
        """Link a source after its owner confirms it exists and is usable in this scope."""
        await self._live_status(ctx.actor, req.workspace_id)
        [verdict] = await self._owners.check_sources(ctx.actor, [Ref(kind="source", id=req.source_id, version=None)])
        if verdict.reason == "not_found":
            raise NotFound("source not found", {"source_id": req.source_id})
        if verdict.reason == UNREACHABLE:
            raise Unreachable("the assets service did not answer in time", {"service": "assets"})
        if verdict.reason == FAILED:
            raise DomainError("the assets service could not check the source", code="internal")
        if not verdict.available:
            raise Unavailable(
                f"source {req.source_id} cannot be used now", {"source_id": req.source_id}, reason=verdict.reason
            )
        async with self._db.transaction() as conn:
            link = Link(req.workspace_id, "source", req.source_id, verdict.version, title=verdict.title)
            reason = await self.record(conn, ctx.actor.scope, link)
            if reason == "workspace_archived":
                raise Conflict("the workspace is archived; it takes no new associations", {"status": "archived"})
            if reason is not None:
                raise not_found(req.workspace_id)
            row = await self._repo.for_scope(ctx.actor.scope).get_association(
                conn, workspace_id=req.workspace_id, kind="source", ref_id=req.source_id
            )
        assert row is not None  # recorded (or found) under the lock just above
        return from_row(c.Association, row)

    @answers(c.PIN_ARTIFACT)
    async def pin_artifact(self, ctx: RequestContext, req: c.PinRequest) -> c.PinReply:
        """The artifact service retains the file, then the workspace records the link; both are reported."""
        await self._live_status(ctx.actor, req.workspace_id)
        try:
            await self._owners.retain_artifact(ctx.actor, req.artifact_id)
        except (NotFound, Unavailable, Invalid):
            raise  # the artifact's owner refused: there is nothing to pin
        except DomainError as exc:
            return c.PinReply(
                artifact_id=req.artifact_id, retention="failed", association="unconfirmed", reason=exc.message
            )
        # The workspace may have been archived or deleted while the artifact service answered.
        async with self._db.transaction() as conn:
            # A run's report carries its run: its publication is the catalog item, the report is not.
            link = Link(req.workspace_id, "artifact", req.artifact_id, 1, req.run_id)
            reason = await self.record(conn, ctx.actor.scope, link)
        if reason is not None:
            return c.PinReply(
                artifact_id=req.artifact_id, retention="retained", association="unconfirmed", reason=reason
            )
        return c.PinReply(artifact_id=req.artifact_id, retention="retained", association="confirmed")

    # -- events (each runs inside the consumer's transaction, with its inbox row) --------------------

    @consumes(EVT_COMMITTED)
    async def on_publication_committed(self, ctx: EventContext, published: VersionEvent) -> None:
        if published.workspace_id is None:
            return
        link = Link(
            published.workspace_id, "publication", published.id, published.version, published.run_id, published.title
        )
        cites = [ref.id for ref in published.sources if ref.kind == "publication"] if published.run_id else []
        await self._record_from_event(ctx, link, cites)

    @consumes(c.EVT_ASSET_ASSOCIATION_REQUESTED)
    async def on_asset_association_requested(self, ctx: EventContext, requested: AssociationRequested) -> None:
        link = Link(requested.workspace_id, "source", requested.source_id, requested.version)
        await self._record_from_event(ctx, link)

    async def _record_from_event(self, ctx: EventContext, link: Link, cites: Sequence[str] = ()) -> None:
        reason = await self.record(ctx.conn, ctx.scope, link, cites)
        if reason is None:
            return
        refused = from_row(c.AssociationRefused, asdict(link), reason=reason)
        await enqueue(ctx.conn, c.EVT_ASSOCIATION_REFUSED, refused, scope=ctx.scope)
