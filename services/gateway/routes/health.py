from __future__ import annotations

import asyncio
from typing import Literal

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse
from pydantic import Field

from services.gateway.deps import bus
from shared.bus import BusClient
from shared.contracts.common import SERVICES, Model

router = APIRouter(tags=["operations"])


class Health(Model):
    status: Literal["ok", "degraded"]
    services: dict[str, Literal["ok", "degraded", "unreachable"]]
    # For each degraded service, why (e.g. the assets service refusing to parse where parsers cannot be confined).
    reasons: dict[str, str] = Field(default_factory=dict)


@router.get(
    "/v1/health",
    response_model=Health,
    responses={
        503: {"model": Health, "description": "Some service does not answer on the bus, or says it is degraded"}
    },
)
async def health(client: BusClient = Depends(bus)) -> JSONResponse:
    """200 once every service answers on the bus and says it is ok, 503 with the same shape otherwise. No token needed."""
    replies = await asyncio.gather(*(client.health(name) for name in SERVICES))
    services = {
        name: "unreachable" if reply is None else reply.status for name, reply in zip(SERVICES, replies, strict=True)
    }
    reasons = {name: reply.reason for name, reply in zip(SERVICES, replies, strict=True) if reply and reply.reason}
    healthy = all(status == "ok" for status in services.values())
    return JSONResponse(
        {"status": "ok" if healthy else "degraded", "services": services, "reasons": reasons},
        status_code=200 if healthy else 503,
    )
