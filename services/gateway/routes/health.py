from __future__ import annotations

import asyncio
from typing import Literal

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from services.gateway.deps import bus
from shared.bus import BusClient
from shared.contracts.common import SERVICES, Model

router = APIRouter(tags=["operations"])


class Health(Model):
    status: Literal["ok", "degraded"]
    services: dict[str, Literal["ok", "unreachable"]]


@router.get(
    "/v1/health",
    response_model=Health,
    responses={503: {"model": Health, "description": "Some service does not answer on the bus"}},
)
async def health(client: BusClient = Depends(bus)) -> JSONResponse:
    """200 once every service answers on the bus, 503 with the same shape otherwise. No token needed."""
    answers = await asyncio.gather(*(client.ping(name) for name in SERVICES))
    services = {name: "ok" if ok else "unreachable" for name, ok in zip(SERVICES, answers, strict=True)}
    healthy = all(answers)
    return JSONResponse(
        {"status": "ok" if healthy else "degraded", "services": services}, status_code=200 if healthy else 503
    )
