from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from services.gateway.deps import PathId, bus, current_actor, page
from services.gateway.openapi import errors
from shared.bus import BusClient
from shared.contracts import workspace as c
from shared.contracts.common import Actor

router = APIRouter(prefix="/v1/workspaces/{workspace_id}/checkpoint", tags=["checkpoints"])


@router.get("", response_model=c.Checkpoint, responses=errors(404))
async def get_checkpoint(
    workspace_id: PathId, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """The current checkpoint, every source re-validated; 404 when none exists yet."""
    return JSONResponse(await client.call_raw(c.CHECKPOINT_GET, {"workspace_id": workspace_id}, actor=actor))


@router.put("", response_model=c.Checkpoint, responses=errors(404, 409, 413))
async def update_checkpoint(
    workspace_id: PathId,
    body: c.CheckpointEdit,
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """A person's edit under CAS; the first revision is made with `expected_revision: 0`."""
    # exclude_unset: an omitted summary keeps the current one, an explicit null clears it.
    data = await client.call_raw(
        c.CHECKPOINT_UPDATE, {"workspace_id": workspace_id, **body.model_dump(exclude_unset=True)}, actor=actor
    )
    return JSONResponse(data)


@router.get("/revisions", response_model=c.CheckpointRevisions, responses=errors(404))
async def list_checkpoint_revisions(
    workspace_id: PathId,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """One page of the revisions of the checkpoint, oldest first."""
    data = await client.call_raw(c.CHECKPOINT_REVISIONS, {"workspace_id": workspace_id, **paging}, actor=actor)
    return JSONResponse(data)
