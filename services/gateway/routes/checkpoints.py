from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import Field

from services.gateway.deps import bus, current_actor, page
from shared.bus import BusClient
from shared.contracts import workspace as c
from shared.contracts.common import INT32_MAX, Actor, Model

router = APIRouter(prefix="/v1/workspaces/{workspace_id}/checkpoint")


class CheckpointBody(Model):
    expected_revision: int = Field(ge=0, le=INT32_MAX)
    summary: str | None = None
    add_questions: list[str] = Field(default_factory=list)
    resolve_questions: list[str] = Field(default_factory=list)


@router.get("")
async def get(
    workspace_id: str, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    return JSONResponse(await client.call(c.CHECKPOINT_GET, {"workspace_id": workspace_id}, actor=actor))


@router.put("")
async def update(
    workspace_id: str, body: CheckpointBody, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    # exclude_unset: an omitted summary keeps the current one, an explicit null clears it.
    data = await client.call(
        c.CHECKPOINT_UPDATE, {"workspace_id": workspace_id, **body.model_dump(exclude_unset=True)}, actor=actor
    )
    return JSONResponse(data)


@router.get("/revisions")
async def revisions(
    workspace_id: str,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    data = await client.call(c.CHECKPOINT_REVISIONS, {"workspace_id": workspace_id, **paging}, actor=actor)
    return JSONResponse(data)
