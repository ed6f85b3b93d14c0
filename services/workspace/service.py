"""The rules of workspaces: creation, the goal under compare-and-swap, archive, delete, admission.

A deleted workspace is a tombstone: its id stays taken, and every request about it answers not_found,
exactly like a workspace that never existed or belongs to another scope.
"""

from __future__ import annotations

import uuid

import asyncpg

from services.workspace.catalog import RUN_KINDS, CatalogReader, Position, bad_cursor
from services.workspace.repository import ScopedWorkspaceRepository, WorkspaceRepository
from shared.bus import RequestContext, answers
from shared.contracts import workspace as c
from shared.contracts.common import Actor, EventType
from shared.db import Database, from_row
from shared.errors import Conflict, Invalid, NotFound, TooLarge
from shared.outbox import enqueue
from shared.paging import Int64, cut_page, decode_cursor
from shared.settings import WorkspaceSettings


def new_workspace_id() -> str:
    return f"ws_{uuid.uuid4().hex}"


def not_found(workspace_id: str) -> NotFound:
    # One message for missing, deleted and foreign workspaces, so an answer never tells them apart.
    return NotFound("workspace not found", {"id": workspace_id})


def workspace_view(row: asyncpg.Record) -> c.Workspace:
    goal = c.Goal(version=row["goal_version"], text=row["goal_text"], created_at=row["goal_created_at"])
    return from_row(c.Workspace, row, goal=goal)


class WorkspaceService:
    def __init__(
        self,
        db: Database,
        settings: WorkspaceSettings,
        catalog: CatalogReader,
        repo: WorkspaceRepository | None = None,
    ):
        self._db = db
        self._settings = settings
        self._catalog = catalog
        self._repo = repo or WorkspaceRepository()

    # -- checks -------------------------------------------------------------------------------------

    def _check_title(self, title: str) -> str:
        title = title.strip()
        if not title or len(title) > self._settings.max_title_chars:
            raise Invalid(
                f"the title must be 1 to {self._settings.max_title_chars} characters",
                {"field": "title", "limit": self._settings.max_title_chars},
            )
        return title

    def _check_goal(self, text: str, field: str) -> str:
        size = len(text.encode("utf-8"))
        if size > self._settings.max_goal_bytes:
            raise TooLarge(
                "the goal is larger than the limit", {"field": field, "limit": self._settings.max_goal_bytes}
            )
        if not text.strip():
            raise Invalid("the goal is empty", {"field": field})
        return text

    async def _live(
        self, conn: asyncpg.Connection, workspaces: ScopedWorkspaceRepository, workspace_id: str
    ) -> asyncpg.Record:
        row = await workspaces.find_workspace(conn, id=workspace_id)
        if row is None:
            raise not_found(workspace_id)
        return row

    # -- workspaces ---------------------------------------------------------------------------------

    @answers(c.CREATE)
    async def create(self, ctx: RequestContext, req: c.CreateRequest) -> c.Workspace:
        title = self._check_title(req.title)
        goal = self._check_goal(req.goal, "goal")
        workspace_id = new_workspace_id()
        workspaces = self._repo.for_scope(ctx.actor.scope)
        async with self._db.transaction() as conn:
            await workspaces.insert_workspace(conn, id=workspace_id, title=title)
            await workspaces.insert_goal_version(conn, workspace_id=workspace_id, version=1, text=goal)
            workspace = workspace_view(await self._live(conn, workspaces, workspace_id))
            created = c.WorkspaceCreated(workspace_id=workspace_id, title=title, goal_version=1)
            await enqueue(conn, c.EVT_CREATED, created, scope=ctx.actor.scope)
        return workspace

    @answers(c.LIST)
    async def list_workspaces(self, ctx: RequestContext, req: c.ListRequest) -> c.WorkspaceList:
        async with self._db.statement() as conn:
            page, next_cursor = await self._repo.for_scope(ctx.actor.scope).list_workspaces(conn, page=req)
        return c.WorkspaceList(items=[workspace_view(r) for r in page], next_cursor=next_cursor)

    @answers(c.GET)
    async def get(self, ctx: RequestContext, req: c.WorkspaceIdRequest) -> c.Workspace:
        async with self._db.statement() as conn:
            return workspace_view(await self._live(conn, self._repo.for_scope(ctx.actor.scope), req.workspace_id))

    @answers(c.REVISE_GOAL)
    async def revise_goal(self, ctx: RequestContext, req: c.ReviseGoalRequest) -> c.Workspace:
        text = self._check_goal(req.text, "text")
        workspaces = self._repo.for_scope(ctx.actor.scope)
        async with self._db.transaction() as conn:
            row = await workspaces.lock_workspace(conn, id=req.workspace_id)
            if row is None or row["status"] == "deleted":
                raise not_found(req.workspace_id)
            if row["goal_version"] != req.expected_version:
                raise Conflict("the goal has a newer version than expected", {"current_version": row["goal_version"]})
            version = row["goal_version"] + 1
            await workspaces.insert_goal_version(conn, workspace_id=req.workspace_id, version=version, text=text)
            await workspaces.set_goal_version(conn, id=req.workspace_id, version=version)
            workspace = workspace_view(await self._live(conn, workspaces, req.workspace_id))
            revised = c.GoalRevised(workspace_id=req.workspace_id, version=version)
            await enqueue(conn, c.EVT_GOAL_REVISED, revised, scope=ctx.actor.scope)
        return workspace

    @answers(c.GOAL_VERSIONS)
    async def goal_versions(self, ctx: RequestContext, req: c.WorkspacePageRequest) -> c.GoalVersions:
        workspaces = self._repo.for_scope(ctx.actor.scope)
        async with self._db.statement() as conn:
            await self._live(conn, workspaces, req.workspace_id)
            page, next_cursor = await workspaces.list_goal_versions(conn, id=req.workspace_id, page=req)
        return c.GoalVersions(items=[c.Goal.model_validate(dict(r)) for r in page], next_cursor=next_cursor)

    # -- lifecycle ----------------------------------------------------------------------------------

    @answers(c.ARCHIVE)
    async def archive(self, ctx: RequestContext, req: c.WorkspaceIdRequest) -> c.Workspace:
        return await self._set_status(ctx.actor, req.workspace_id, "archived", c.EVT_ARCHIVED)

    @answers(c.UNARCHIVE)
    async def unarchive(self, ctx: RequestContext, req: c.WorkspaceIdRequest) -> c.Workspace:
        return await self._set_status(ctx.actor, req.workspace_id, "active", c.EVT_UNARCHIVED)

    async def _set_status(
        self, actor: Actor, workspace_id: str, status: str, event: EventType[c.WorkspaceChanged]
    ) -> c.Workspace:
        workspaces = self._repo.for_scope(actor.scope)
        async with self._db.transaction() as conn:
            row = await workspaces.lock_workspace(conn, id=workspace_id)
            if row is None or row["status"] == "deleted":
                raise not_found(workspace_id)
            changed = row["status"] != status
            if changed:
                # Repeating an archive would move its instant and so change which runs count as "before" it.
                await workspaces.set_status(conn, id=workspace_id, status=status)
                await enqueue(conn, event, c.WorkspaceChanged(workspace_id=workspace_id), scope=actor.scope)
            return workspace_view(await self._live(conn, workspaces, workspace_id))

    @answers(c.DELETE)
    async def delete(self, ctx: RequestContext, req: c.WorkspaceIdRequest) -> c.DeleteReply:
        """Tombstone the workspace. What other services own (publications, runs, files) is left as it is."""
        workspaces = self._repo.for_scope(ctx.actor.scope)
        async with self._db.transaction() as conn:
            row = await workspaces.lock_workspace(conn, id=req.workspace_id)
            if row is None or row["status"] == "deleted":
                raise not_found(req.workspace_id)
            await workspaces.tombstone(conn, id=req.workspace_id)
            await enqueue(conn, c.EVT_DELETED, c.WorkspaceChanged(workspace_id=req.workspace_id), scope=ctx.actor.scope)
        return c.DeleteReply(workspace_id=req.workspace_id, status="deleted")

    # -- catalog and admission ----------------------------------------------------------------------

    @answers(c.CATALOG_BROWSE)
    async def browse_catalog(self, ctx: RequestContext, req: c.CatalogBrowseRequest) -> c.CatalogPage:
        (before,) = decode_cursor(req.cursor, Int64) if req.cursor else (2**63 - 1,)
        kinds: list[str] = [req.kind] if req.kind else ["publication", "source", "artifact"]
        async with self._db.statement() as conn:
            rows = await self._repo.for_scope(ctx.actor.scope).catalog_browse(
                conn,
                workspace_id=req.workspace_id,
                kinds=kinds,
                limit=req.limit + 1,
                before=before,
                title_holds=(req.q or "").strip(),
            )
        if not rows:
            raise not_found(req.workspace_id)
        found = [row for row in rows if row["kind"] is not None]
        page, next_cursor = cut_page(found, req.limit, lambda r: (r["seq"],))
        items = await self._catalog.items(ctx.actor, page)
        return c.CatalogPage(items=items, next_cursor=next_cursor, total=rows[0]["total"], start=rows[0]["newer"] + 1)

    @answers(c.CATALOG)
    async def catalog(self, ctx: RequestContext, req: c.CatalogRequest) -> c.Catalog:
        """A person's catalog: the first page as of now, or the page a cursor names (as of its first page)."""
        limit = self._catalog.bound(req.limit)
        workspaces = self._repo.for_scope(ctx.actor.scope)
        async with self._db.statement() as conn:
            state = await workspaces.catalog_state(conn, workspace_id=req.workspace_id)
            if state is None:
                raise not_found(req.workspace_id)
            at = Position.start(state, for_run=False) if req.cursor is None else Position.of(req.cursor)
            if at.for_run:
                raise bad_cursor()
            page = await self._catalog.read(conn, workspaces, req.workspace_id, at, limit)
        return await self._catalog.resolve(ctx.actor, page)

    @answers(c.CATALOG_ADMITTED)
    async def admitted_catalog(self, ctx: RequestContext, req: c.AdmittedCatalogRequest) -> c.Catalog:
        """A later page of a run's catalog, as of the run's admission."""
        limit = self._catalog.bound(req.limit)
        at = Position.of(req.cursor)
        if not at.for_run or at.as_of != req.as_of:
            raise bad_cursor()
        workspaces = self._repo.for_scope(ctx.actor.scope)
        async with self._db.statement() as conn:
            if await workspaces.catalog_state(conn, workspace_id=req.workspace_id) is None:
                raise not_found(req.workspace_id)
            page = await self._catalog.read(conn, workspaces, req.workspace_id, at, limit)
        return await self._catalog.resolve(ctx.actor, page)

    @answers(c.CATALOG_HOLDS)
    async def catalog_holds(self, ctx: RequestContext, req: c.CatalogHoldsRequest) -> c.CatalogHolds:
        async with self._db.statement() as conn:
            held = await self._repo.for_scope(ctx.actor.scope).catalog_holds(
                conn,
                workspace_id=req.workspace_id,
                as_of=req.as_of,
                kind=req.kind,
                ref_id=req.id,
            )
        return c.CatalogHolds(held=held and req.kind in RUN_KINDS)

    @answers(c.ADMISSION)
    async def admit(self, ctx: RequestContext, req: c.AdmissionRequest) -> c.Admission:
        """The snapshot a run freezes. Recording the admission under the row lock orders it against archive,
        and against every association: the catalog as of its mark is the catalog as admitted."""
        limit = self._catalog.bound(req.limit)
        workspaces = self._repo.for_scope(ctx.actor.scope)
        async with self._db.transaction() as conn:
            row = await workspaces.lock_workspace(conn, id=req.workspace_id, share=True)
            if row is None or row["status"] == "deleted":
                raise not_found(req.workspace_id)
            if row["status"] == "archived":
                raise Conflict("the workspace is archived; it takes no new runs", {"status": "archived"})
            await workspaces.insert_admission(conn, workspace_id=req.workspace_id, run_id=req.run_id)
            workspace = workspace_view(await self._live(conn, workspaces, req.workspace_id))
            state = await workspaces.catalog_state(conn, workspace_id=req.workspace_id)
            assert state is not None  # the live workspace was just read under the lock
            at = Position.start(state, for_run=True)
            page = await self._catalog.read(conn, workspaces, req.workspace_id, at, limit)
        # Owners are asked after the commit: no transaction is held open across the bus.
        catalog = await self._catalog.resolve(ctx.actor, page)
        return c.Admission(
            workspace_id=workspace.id,
            status=workspace.status,
            goal=workspace.goal,
            catalog=catalog,
            catalog_as_of=at.as_of,
        )
