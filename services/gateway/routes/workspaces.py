from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import JSONResponse

from services.gateway.deps import PathId, bus, current_actor, page
from services.gateway.openapi import errors
from shared.bus import BusClient
from shared.contracts import workspace as c
from shared.contracts.common import Actor

router = APIRouter(prefix="/v1/workspaces", tags=["workspaces"])


@router.post("", status_code=201, response_model=c.Workspace, responses=errors(413))
async def create_workspace(
    body: c.CreateRequest, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """A new workspace with goal version 1."""
    return JSONResponse(await client.call_raw(c.CREATE, body, actor=actor), status_code=201)


@router.get("", response_model=c.WorkspaceList)
async def list_workspaces(
    paging: dict[str, Any] = Depends(page), actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """One page of the workspaces of the caller's scope, newest first."""
    return JSONResponse(await client.call_raw(c.LIST, paging, actor=actor))


@router.get("/{workspace_id}", response_model=c.Workspace, responses=errors(404))
async def get_workspace(
    workspace_id: PathId, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """One workspace with its current goal."""
    return JSONResponse(await client.call_raw(c.GET, {"workspace_id": workspace_id}, actor=actor))


@router.put("/{workspace_id}/goal", response_model=c.Workspace, responses=errors(404, 409, 413))
async def revise_goal(
    workspace_id: PathId, body: c.GoalRevision, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """A new goal version, made only when `expected_version` is still the current one (CAS)."""
    data = await client.call_raw(c.REVISE_GOAL, {"workspace_id": workspace_id, **body.model_dump()}, actor=actor)
    return JSONResponse(data)


@router.get("/{workspace_id}/goal/versions", response_model=c.GoalVersions, responses=errors(404))
async def list_goal_versions(
    workspace_id: PathId,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """One page of the goal versions, oldest first."""
    data = await client.call_raw(c.GOAL_VERSIONS, {"workspace_id": workspace_id, **paging}, actor=actor)
    return JSONResponse(data)


@router.post("/{workspace_id}/archive", response_model=c.Workspace, responses=errors(404, 413))
async def archive_workspace(
    workspace_id: PathId, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """No new runs or associations until it is unarchived; admitted runs still finish."""
    return JSONResponse(await client.call_raw(c.ARCHIVE, {"workspace_id": workspace_id}, actor=actor))


@router.post("/{workspace_id}/unarchive", response_model=c.Workspace, responses=errors(404, 413))
async def unarchive_workspace(
    workspace_id: PathId, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """Undo an archive."""
    return JSONResponse(await client.call_raw(c.UNARCHIVE, {"workspace_id": workspace_id}, actor=actor))


@router.delete("/{workspace_id}", status_code=204, responses=errors(404))
async def delete_workspace(
    workspace_id: PathId, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> Response:
    """A tombstone: the id is never reused; what other services own stays."""
    await client.call_raw(c.DELETE, {"workspace_id": workspace_id}, actor=actor)
    return Response(status_code=204)


@router.get("/{workspace_id}/catalog", response_model=c.Catalog, responses=errors(404))
async def get_catalog(
    workspace_id: PathId,
    limit: int | None = Query(default=None, ge=1, le=c.CATALOG_LIMIT_MAX, description="At most this many items"),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """The bounded catalog: `complete` and `omitted` say what was left out."""
    # The service owns the default and may hold a lower maximum (its setting), which it answers itself.
    return JSONResponse(await client.call_raw(c.CATALOG, {"workspace_id": workspace_id, "limit": limit}, actor=actor))


@router.get("/{workspace_id}/drift", response_model=c.DriftList, responses=errors(404))
async def list_drift(
    workspace_id: PathId,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """Refs cited by the checkpoint or the associated publications that changed since, oldest first (a page)."""
    return JSONResponse(await client.call_raw(c.DRIFT, {"workspace_id": workspace_id, **paging}, actor=actor))


@router.post("/{workspace_id}/sources", status_code=201, response_model=c.Association, responses=errors(404, 409, 413))
async def associate_source(
    workspace_id: PathId,
    body: c.SourceAssociation,
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """Associate a source of the scope with the workspace."""
    data = await client.call_raw(c.ADD_SOURCE, {"workspace_id": workspace_id, "source_id": body.source_id}, actor=actor)
    return JSONResponse(data, status_code=201)


@router.post("/{workspace_id}/artifacts", status_code=201, response_model=c.PinReply, responses=errors(404, 409, 413))
async def pin_artifact(
    workspace_id: PathId, body: c.ArtifactPin, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """Retain an artifact and associate it; the two outcomes are reported apart."""
    data = await client.call_raw(
        c.PIN_ARTIFACT, {"workspace_id": workspace_id, "artifact_id": body.artifact_id}, actor=actor
    )
    return JSONResponse(data, status_code=201)
