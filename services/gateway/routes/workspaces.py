from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Response
from fastapi.responses import JSONResponse
from pydantic import Field

from services.gateway.deps import bus, current_actor, page
from shared.bus import BusClient
from shared.contracts import workspace as c
from shared.contracts.common import INT32_MAX, Actor, Model

router = APIRouter(prefix="/v1/workspaces")


class GoalBody(Model):
    text: str
    expected_version: int = Field(ge=1, le=INT32_MAX)


class SourceBody(Model):
    source_id: str = Field(min_length=1, max_length=200)


class ArtifactBody(Model):
    artifact_id: str = Field(min_length=1, max_length=200)


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status)


@router.post("", status_code=201)
async def create(
    body: c.CreateRequest, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    return _json(await client.call(c.CREATE, body, actor=actor), 201)


@router.get("")
async def list_workspaces(
    paging: dict[str, Any] = Depends(page), actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    return _json(await client.call(c.LIST, paging, actor=actor))


@router.get("/{workspace_id}")
async def get(
    workspace_id: str, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    return _json(await client.call(c.GET, {"workspace_id": workspace_id}, actor=actor))


@router.put("/{workspace_id}/goal")
async def revise_goal(
    workspace_id: str, body: GoalBody, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    data = await client.call(c.REVISE_GOAL, {"workspace_id": workspace_id, **body.model_dump()}, actor=actor)
    return _json(data)


@router.get("/{workspace_id}/goal/versions")
async def goal_versions(
    workspace_id: str,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    return _json(await client.call(c.GOAL_VERSIONS, {"workspace_id": workspace_id, **paging}, actor=actor))


@router.post("/{workspace_id}/archive")
async def archive(
    workspace_id: str, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    return _json(await client.call(c.ARCHIVE, {"workspace_id": workspace_id}, actor=actor))


@router.post("/{workspace_id}/unarchive")
async def unarchive(
    workspace_id: str, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    return _json(await client.call(c.UNARCHIVE, {"workspace_id": workspace_id}, actor=actor))


@router.delete("/{workspace_id}", status_code=204)
async def delete(
    workspace_id: str, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> Response:
    await client.call(c.DELETE, {"workspace_id": workspace_id}, actor=actor)
    return Response(status_code=204)


@router.get("/{workspace_id}/catalog")
async def catalog(
    workspace_id: str,
    limit: int | None = Query(default=None, ge=1, le=INT32_MAX),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    # The service owns the bounds (default and maximum), so the limit is passed through as given.
    return _json(await client.call(c.CATALOG, {"workspace_id": workspace_id, "limit": limit}, actor=actor))


@router.post("/{workspace_id}/sources", status_code=201)
async def add_source(
    workspace_id: str, body: SourceBody, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    data = await client.call(c.ADD_SOURCE, {"workspace_id": workspace_id, "source_id": body.source_id}, actor=actor)
    return _json(data, 201)


@router.post("/{workspace_id}/artifacts", status_code=201)
async def pin_artifact(
    workspace_id: str, body: ArtifactBody, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    data = await client.call(
        c.PIN_ARTIFACT, {"workspace_id": workspace_id, "artifact_id": body.artifact_id}, actor=actor
    )
    return _json(data, 201)
