from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import Field

from services.gateway.deps import bus, current_actor, page
from shared.bus import BusClient
from shared.contracts import publication as c
from shared.contracts.common import INT32_MAX, Actor, Model

router = APIRouter(prefix="/v1/publications")


class CreateBody(Model):
    title: str = Field(min_length=1)
    body: str
    workspace_id: str | None = Field(default=None, max_length=200)


class ReviseBody(Model):
    body: str
    title: str | None = Field(default=None, min_length=1)
    expected_latest_version: int = Field(ge=1, le=INT32_MAX)


class WithdrawBody(Model):
    reason: str = Field(min_length=1, max_length=2000)


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status)


@router.post("", status_code=201)
async def create(
    body: CreateBody, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    data = await client.call(c.COMMIT, c.CommitRequest(**body.model_dump()), actor=actor)
    return _json(data, 201)


@router.get("/{pub_id}")
async def get(
    pub_id: str,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    return _json(await client.call(c.GET, {"id": pub_id, **paging}, actor=actor))


@router.get("/{pub_id}/versions/{version}")
async def read_version(
    pub_id: str, version: int, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    return _json(await client.call(c.READ, {"id": pub_id, "version": version}, actor=actor))


@router.post("/{pub_id}/versions", status_code=201)
async def revise(
    pub_id: str, body: ReviseBody, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    data = await client.call(c.REVISE, c.ReviseRequest(id=pub_id, **body.model_dump()), actor=actor)
    return _json(data, 201)


@router.post("/{pub_id}/versions/{version}/withdraw")
async def withdraw(
    pub_id: str,
    version: int,
    body: WithdrawBody,
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    data = await client.call(c.WITHDRAW, {"id": pub_id, "version": version, "reason": body.reason}, actor=actor)
    return _json(data)
