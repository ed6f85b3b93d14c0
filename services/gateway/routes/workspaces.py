from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Response

from services.gateway.deps import ActorBus, Bus, Paging, PathId, actor_bus
from services.gateway.openapi import errors
from shared.contracts import workspace as c

router = APIRouter(prefix="/v1/workspaces", tags=["workspaces"])


@router.post("", status_code=201, response_model=c.Workspace, responses=errors(413))
async def create_workspace(body: c.CreateRequest, bus: Bus) -> Response:
    """A new workspace with goal version 1."""
    return await bus.relay(c.CREATE, body, status_code=201)


@router.get("", response_model=c.WorkspaceList)
async def list_workspaces(paging: Paging, bus: Bus) -> Response:
    """One page of the workspaces of the caller's scope, newest first."""
    return await bus.relay(c.LIST, c.ListRequest(limit=paging.limit, cursor=paging.cursor))


@router.get("/{workspace_id}", response_model=c.Workspace, responses=errors(404))
async def get_workspace(workspace_id: PathId, bus: Bus) -> Response:
    """One workspace with its current goal."""
    return await bus.relay(c.GET, c.WorkspaceIdRequest(workspace_id=workspace_id))


@router.put("/{workspace_id}/goal", response_model=c.Workspace, responses=errors(404, 409, 413))
async def revise_goal(workspace_id: PathId, body: c.GoalRevision, bus: Bus) -> Response:
    """A new goal version, made only when `expected_version` is still the current one (CAS)."""
    request = c.ReviseGoalRequest(workspace_id=workspace_id, text=body.text, expected_version=body.expected_version)
    return await bus.relay(c.REVISE_GOAL, request)


@router.get("/{workspace_id}/goal/versions", response_model=c.GoalVersions, responses=errors(404))
async def list_goal_versions(workspace_id: PathId, paging: Paging, bus: Bus) -> Response:
    """One page of the goal versions, oldest first."""
    request = c.WorkspacePageRequest(workspace_id=workspace_id, limit=paging.limit, cursor=paging.cursor)
    return await bus.relay(c.GOAL_VERSIONS, request)


@router.post("/{workspace_id}/archive", response_model=c.Workspace, responses=errors(404, 413))
async def archive_workspace(workspace_id: PathId, bus: Bus) -> Response:
    """No new runs or associations until it is unarchived; admitted runs still finish."""
    return await bus.relay(c.ARCHIVE, c.WorkspaceIdRequest(workspace_id=workspace_id))


@router.post("/{workspace_id}/unarchive", response_model=c.Workspace, responses=errors(404, 413))
async def unarchive_workspace(workspace_id: PathId, bus: Bus) -> Response:
    """Undo an archive."""
    return await bus.relay(c.UNARCHIVE, c.WorkspaceIdRequest(workspace_id=workspace_id))


@router.delete("/{workspace_id}", status_code=204, responses=errors(404))
async def delete_workspace(workspace_id: PathId, bus: Bus) -> Response:
    """A tombstone: the id is never reused; what other services own stays."""
    await bus.call(c.DELETE, c.WorkspaceIdRequest(workspace_id=workspace_id))
    return Response(status_code=204)


@router.get("/{workspace_id}/catalog", response_model=c.Catalog, responses=errors(404, 422))
async def get_catalog(
    workspace_id: PathId,
    limit: int | None = Query(default=None, ge=1, le=c.CATALOG_LIMIT_MAX, description="At most this many items"),
    cursor: str | None = Query(
        default=None, min_length=1, max_length=c.CURSOR_MAX_CHARS, description="A page's `next_cursor`"
    ),
    bus: ActorBus = Depends(actor_bus),
) -> Response:
    """A page of the catalog: the analyst's material, then the runs' current and superseded publications;
    `omitted` items follow this page, and `next_cursor` names the next (the catalog as of the first page)."""
    # The service owns the default and may hold a lower maximum (its setting), which it answers itself.
    return await bus.relay(c.CATALOG, c.CatalogRequest(workspace_id=workspace_id, limit=limit, cursor=cursor))


@router.get("/{workspace_id}/drift", response_model=c.DriftList, responses=errors(404))
async def list_drift(workspace_id: PathId, paging: Paging, bus: Bus) -> Response:
    """Refs cited by the checkpoint or the associated publications that changed since, oldest first (a page)."""
    return await bus.relay(c.DRIFT, c.DriftRequest(workspace_id=workspace_id, limit=paging.limit, cursor=paging.cursor))


@router.post("/{workspace_id}/sources", status_code=201, response_model=c.Association, responses=errors(404, 409, 413))
async def associate_source(workspace_id: PathId, body: c.SourceAssociation, bus: Bus) -> Response:
    """Associate a source of the scope with the workspace."""
    request = c.AddSourceRequest(workspace_id=workspace_id, source_id=body.source_id)
    return await bus.relay(c.ADD_SOURCE, request, status_code=201)


@router.post("/{workspace_id}/artifacts", status_code=201, response_model=c.PinReply, responses=errors(404, 409, 413))
async def pin_artifact(workspace_id: PathId, body: c.ArtifactPin, bus: Bus) -> Response:
    """Retain an artifact and associate it; the two outcomes are reported apart."""
    request = c.PinRequest(workspace_id=workspace_id, artifact_id=body.artifact_id)
    return await bus.relay(c.PIN_ARTIFACT, request, status_code=201)
