from __future__ import annotations

from fastapi import APIRouter, Response

from services.gateway.deps import Bus, Paging, PathId
from services.gateway.openapi import errors
from shared.contracts import workspace as c

router = APIRouter(prefix="/v1/workspaces/{workspace_id}/checkpoint", tags=["checkpoints"])


@router.get("", response_model=c.Checkpoint, responses=errors(404))
async def get_checkpoint(workspace_id: PathId, bus: Bus) -> Response:
    """The current checkpoint, every source re-validated; 404 when none exists yet."""
    return await bus.relay(c.CHECKPOINT_GET, c.WorkspaceIdRequest(workspace_id=workspace_id))


@router.put("", response_model=c.Checkpoint, responses=errors(404, 409, 413))
async def update_checkpoint(workspace_id: PathId, body: c.CheckpointEdit, bus: Bus) -> Response:
    """A person's edit under CAS; the first revision is made with `expected_revision: 0`."""
    # Only the fields the body set: an omitted summary keeps the current one, an explicit null clears it.
    request = c.UpdateCheckpointRequest(workspace_id=workspace_id, **body.model_dump(exclude_unset=True))
    return await bus.relay(c.CHECKPOINT_UPDATE, request)


@router.get("/revisions", response_model=c.CheckpointRevisions, responses=errors(404))
async def list_checkpoint_revisions(workspace_id: PathId, paging: Paging, bus: Bus) -> Response:
    """One page of the revisions of the checkpoint, oldest first."""
    request = c.WorkspacePageRequest(workspace_id=workspace_id, limit=paging.limit, cursor=paging.cursor)
    return await bus.relay(c.CHECKPOINT_REVISIONS, request)
