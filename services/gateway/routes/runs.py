from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Header, Path, Request, Response
from fastapi.responses import PlainTextResponse
from pydantic import TypeAdapter

from services.gateway.deps import ActorBus, Bus, Paging, PathId, actor_bus, build, json_response
from services.gateway.openapi import errors
from shared.contracts import runhost as c
from shared.contracts.common import Text
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
async def start_run(workspace_id: PathId, body: c.RunRequest, bus: Bus) -> Response:
    """Admit a run, idempotently on `request_id`."""
    reply = await bus.call(c.ADMIT, c.AdmitRequest(workspace_id=workspace_id, **body.model_dump()))
    return json_response(reply.run.model_dump_json(), 202 if reply.created else 200)


@router.get("/v1/workspaces/{workspace_id}/runs", response_model=c.RunList, responses=errors(404))
async def list_runs(workspace_id: PathId, paging: Paging, bus: Bus) -> Response:
    """One page of the workspace's runs, newest first."""
    return await bus.relay(
        c.LIST_RUNS, c.ListRunsRequest(workspace_id=workspace_id, limit=paging.limit, cursor=paging.cursor)
    )


@router.get("/v1/runs/{run_id}", response_model=c.Run, responses=errors(404))
async def get_run(run_id: PathId, bus: Bus) -> Response:
    """One run: status, frozen admission, outcome and `stats`."""
    return await bus.relay(c.GET_RUN, c.RunIdRequest(run_id=run_id))


@router.post("/v1/runs/{run_id}/cancel", response_model=c.Run, responses=errors(404, 413))
async def cancel_run(run_id: PathId, bus: Bus) -> Response:
    """Ask the run to stop; the worker stops at its next step."""
    return await bus.relay(c.CANCEL, c.RunIdRequest(run_id=run_id))


@router.get("/v1/conversations/{conversation_id}", response_model=c.Conversation, responses=errors(404))
async def get_conversation(conversation_id: PathId, paging: Paging, bus: Bus) -> Response:
    """A conversation and one page of its runs, oldest first; `next_cursor` pages on through the runs."""
    request = c.ConversationRequest(conversation_id=conversation_id, limit=paging.limit, cursor=paging.cursor)
    return await bus.relay(c.GET_CONVERSATION, request)


@router.get("/v1/runs/{run_id}/ledger", response_model=c.Ledger, responses=errors(404))
async def get_ledger(run_id: PathId, paging: Paging, bus: Bus) -> Response:
    """One page (in `seq` order) of what the run listed, read, included in a model request, and found unavailable."""
    return await bus.relay(c.LEDGER, c.RunPageRequest(run_id=run_id, limit=paging.limit, cursor=paging.cursor))


@router.get("/v1/runs/{run_id}/prov", response_model=c.ProvDocument, responses=errors(404))
async def get_run_prov(run_id: PathId, bus: Bus) -> Response:
    """The run's lineage as W3C PROV-JSON: the run, what it used at which version, what it generated, who."""
    return await bus.relay(c.PROV, c.RunIdRequest(run_id=run_id))


@router.get("/v1/runs/{run_id}/files", response_model=c.FileList, responses=errors(404))
async def list_run_files(run_id: PathId, paging: Paging, bus: Bus) -> Response:
    """One page (by path) of the run's working files: plan.md, sources/, notes/, draft.md."""
    return await bus.relay(c.LIST_FILES, c.RunPageRequest(run_id=run_id, limit=paging.limit, cursor=paging.cursor))


@router.get(
    "/v1/runs/{run_id}/files/{path:path}",
    response_model=None,
    responses={
        **errors(404),
        200: {"content": {"text/plain": {"schema": {"type": "string"}}}, "description": "The file"},
    },
)
async def read_run_file(run_id: PathId, path: RunFile, bus: Bus) -> PlainTextResponse:
    """One working file as UTF-8 text."""
    file = await bus.call(c.READ_FILE, c.ReadFileRequest(run_id=run_id, path=path))
    return PlainTextResponse(file.text, media_type="text/plain; charset=utf-8")


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
    bus: ActorBus = Depends(actor_bus),
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
    # Built with `build`: a blank text or an over-long lease answers `invalid` naming the field, as the owner would.
    if x_run_lease:
        await bus.call(
            c.EXTERNAL_WRITE, build(c.ExternalWriteRequest, run_id=run_id, lease=x_run_lease, path=path, text=text)
        )
    elif path == "plan.md":
        await bus.call(c.WRITE_PLAN, build(c.WritePlanRequest, run_id=run_id, text=text))
    else:
        # Whose the file is, not its shape: the run's own files are its lease holder's to write.
        raise Forbidden("without the run's lease, only plan.md can be written", {"field": "path"})
    return Response(status_code=204)
