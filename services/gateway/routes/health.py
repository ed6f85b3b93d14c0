from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse

from services.gateway.deps import bus
from shared.bus import BusClient
from shared.contracts.common import SERVICES

router = APIRouter()


@router.get("/v1/health")
async def health(client: BusClient = Depends(bus)) -> JSONResponse:
    answers = await asyncio.gather(*(client.ping(name) for name in SERVICES))
    services = {name: "ok" if ok else "unreachable" for name, ok in zip(SERVICES, answers, strict=True)}
    healthy = all(answers)
    return JSONResponse(
        {"status": "ok" if healthy else "degraded", "services": services}, status_code=200 if healthy else 503
    )
