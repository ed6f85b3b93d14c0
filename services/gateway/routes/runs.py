from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import TypeAdapter

from services.gateway.deps import PathId, bus, current_actor, page
from services.gateway.openapi import errors
from shared.bus import BusClient
from shared.contracts import runhost as c
from shared.contracts.common import Actor, Text
from shared.errors import Forbidden, Invalid
from shared.storable import require_storable

router = APIRouter(tags=["runs"])

RunFile = Annotated[str, Path(pattern=c.RUN_FILE_PATTERN, description="A working file: plan.md, sources/<name>.txt …")]
WritableFile = Annotated[
    str, Path(pattern=c.WRITABLE_FILE_PATTERN, description="plan.md; with the run's lease also draft.md, notes/…")
]

TEXT_BODY = {
    "requestBody": {
        "required": True,
        # The schema of the file's text as the run host takes it: not blank.
        "content": {"text/plain": {"schema": TypeAdapter(Text).json_schema()}},
        "description": "The whole new file, UTF-8",
    }
}


@router.post(
    "/v1/workspaces/{workspace_id}/runs",
    status_code=202,
    response_model=c.Run,
    responses={**errors(404, 409, 413), 200: {"model": c.Run, "description": "The same request_id again: that run"}},
)
async def start_run(
    workspace_id: PathId, body: c.RunRequest, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """Admit a run, idempotently on `request_id`."""
    reply = await client.call_raw(c.ADMIT, c.AdmitRequest(workspace_id=workspace_id, **body.model_dump()), actor=actor)
    return JSONResponse(reply["run"], status_code=202 if reply["created"] else 200)


@router.get("/v1/workspaces/{workspace_id}/runs", response_model=c.RunList, responses=errors(404))
async def list_runs(
    workspace_id: PathId,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """One page of the workspace's runs, newest first."""
    return JSONResponse(await client.call_raw(c.LIST_RUNS, {"workspace_id": workspace_id, **paging}, actor=actor))


@router.get("/v1/runs/{run_id}", response_model=c.Run, responses=errors(404))
async def get_run(
    run_id: PathId, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """One run: status, frozen admission, outcome and `stats`."""
    return JSONResponse(await client.call_raw(c.GET_RUN, {"run_id": run_id}, actor=actor))


@router.post("/v1/runs/{run_id}/cancel", response_model=c.Run, responses=errors(404, 413))
async def cancel_run(
    run_id: PathId, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """Ask the run to stop; the worker stops at its next step."""
    return JSONResponse(await client.call_raw(c.CANCEL, {"run_id": run_id}, actor=actor))


@router.get("/v1/conversations/{conversation_id}", response_model=c.Conversation, responses=errors(404))
async def get_conversation(
    conversation_id: PathId,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """A conversation and one page of its runs, oldest first; `next_cursor` pages on through the runs."""
    data = await client.call_raw(c.GET_CONVERSATION, {"conversation_id": conversation_id, **paging}, actor=actor)
    return JSONResponse(data)


@router.get("/v1/runs/{run_id}/ledger", response_model=c.Ledger, responses=errors(404))
async def get_ledger(
    run_id: PathId,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """One page (in `seq` order) of what the run listed, read, included in a model request, and found unavailable."""
    return JSONResponse(await client.call_raw(c.LEDGER, {"run_id": run_id, **paging}, actor=actor))


@router.get("/v1/runs/{run_id}/prov", response_model=c.ProvDocument, responses=errors(404))
async def get_run_prov(
    run_id: PathId, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """The run's lineage as W3C PROV-JSON: the run, what it used at which version, what it generated, who."""
    return JSONResponse(await client.call_raw(c.PROV, {"run_id": run_id}, actor=actor))


@router.get("/v1/runs/{run_id}/files", response_model=c.FileList, responses=errors(404))
async def list_run_files(
    run_id: PathId,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """One page (by path) of the run's working files: plan.md, sources/, notes/, draft.md."""
    return JSONResponse(await client.call_raw(c.LIST_FILES, {"run_id": run_id, **paging}, actor=actor))


@router.get(
    "/v1/runs/{run_id}/files/{path:path}",
    response_model=None,
    responses={
        **errors(404),
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "The file"},
    },
)
async def read_run_file(
    run_id: PathId, path: RunFile, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> PlainTextResponse:
    """One working file as UTF-8 text."""
    reply = await client.call_raw(c.READ_FILE, {"run_id": run_id, "path": path}, actor=actor)
    return PlainTextResponse(reply["text"], media_type="text/plain; charset=utf-8")


@router.put(
    "/v1/runs/{run_id}/files/{path:path}",
    status_code=204,
    responses=errors(403, 404, 409, 413),
    openapi_extra=TEXT_BODY,
)
async def write_run_file(
    run_id: PathId,
    path: WritableFile,
    request: Request,
    x_run_lease: str | None = Header(default=None, description="An external run's lease token"),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> Response:
    """A person edits plan.md mid-run (the next step recites the edit); an outside agent holding the run's
    lease writes plan.md, draft.md and notes/<name>.md."""
    media = request.headers.get("content-type", "text/plain").split(";")[0].strip()
    if media != "text/plain":
        raise Invalid("a working file must be sent as text/plain", {"field": "body"})
    try:
        text = (await request.body()).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Invalid("the file is not UTF-8 text", {"field": "body"}) from exc
    require_storable(text, "body")
    if x_run_lease:
        # A dict, as for the plan below: the owner validates it and answers `invalid` naming the field.
        request_ = {"run_id": run_id, "lease": x_run_lease, "path": path, "text": text}
        await client.call_raw(c.EXTERNAL_WRITE, request_, actor=actor)
    elif path == "plan.md":
        await client.call_raw(c.WRITE_PLAN, {"run_id": run_id, "text": text}, actor=actor)
    else:
        # Whose the file is, not its shape: the run's own files are its lease holder's to write.
        raise Forbidden("without the run's lease, only plan.md can be written", {"field": "path"})
    return Response(status_code=204)
