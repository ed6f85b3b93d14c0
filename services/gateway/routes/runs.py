from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import Field

from services.gateway.deps import bus, current_actor, page
from shared.bus import BusClient
from shared.contracts import runhost as c
from shared.contracts.common import Actor, Model
from shared.errors import Invalid
from shared.storable import require_storable

router = APIRouter()


class RunBody(Model):
    question: str = Field(min_length=1, max_length=4000)
    request_id: str = Field(min_length=1, max_length=200)
    history: list[c.HistoryRef] = Field(default_factory=list, max_length=50)
    model: str | None = Field(default=None, max_length=100)
    conversation_id: str | None = Field(default=None, max_length=200)
    limits: c.RunLimits | None = None


@router.post("/v1/workspaces/{workspace_id}/runs", status_code=202)
async def start_run(
    workspace_id: str, body: RunBody, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    reply = await client.call(c.ADMIT, c.AdmitRequest(workspace_id=workspace_id, **body.model_dump()), actor=actor)
    return JSONResponse(reply["run"], status_code=202 if reply["created"] else 200)


@router.get("/v1/workspaces/{workspace_id}/runs")
async def list_runs(
    workspace_id: str,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    return JSONResponse(await client.call(c.LIST_RUNS, {"workspace_id": workspace_id, **paging}, actor=actor))


@router.get("/v1/runs/{run_id}")
async def get_run(run_id: str, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)) -> JSONResponse:
    return JSONResponse(await client.call(c.GET_RUN, {"run_id": run_id}, actor=actor))


@router.post("/v1/runs/{run_id}/cancel")
async def cancel_run(
    run_id: str, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    return JSONResponse(await client.call(c.CANCEL, {"run_id": run_id}, actor=actor))


@router.get("/v1/conversations/{conversation_id}")
async def get_conversation(
    conversation_id: str,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    data = await client.call(c.GET_CONVERSATION, {"conversation_id": conversation_id, **paging}, actor=actor)
    return JSONResponse(data)


@router.get("/v1/runs/{run_id}/ledger")
async def get_ledger(
    run_id: str,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    return JSONResponse(await client.call(c.LEDGER, {"run_id": run_id, **paging}, actor=actor))


@router.get("/v1/runs/{run_id}/files")
async def list_files(
    run_id: str,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    return JSONResponse(await client.call(c.LIST_FILES, {"run_id": run_id, **paging}, actor=actor))


@router.get("/v1/runs/{run_id}/files/{path:path}")
async def read_file(
    run_id: str, path: str, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> PlainTextResponse:
    reply = await client.call(c.READ_FILE, {"run_id": run_id, "path": path}, actor=actor)
    return PlainTextResponse(reply["text"], media_type="text/plain; charset=utf-8")


@router.put("/v1/runs/{run_id}/files/plan.md", status_code=204)
async def write_plan(
    run_id: str, request: Request, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> Response:
    media = request.headers.get("content-type", "text/plain").split(";")[0].strip()
    if media != "text/plain":
        raise Invalid("the plan must be sent as text/plain", {"field": "body"})
    try:
        text = (await request.body()).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Invalid("the plan is not UTF-8 text", {"field": "body"}) from exc
    require_storable(text, "body")
    await client.call(c.WRITE_PLAN, {"run_id": run_id, "text": text}, actor=actor)
    return Response(status_code=204)
