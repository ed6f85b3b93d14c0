from __future__ import annotations

import asyncio
from typing import Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from pydantic import Field

from services.gateway.deps import bus
from shared.bus import BusClient
from shared.children import service_of
from shared.contracts.common import SERVICES, Model
from shared.restarts import Restarts, crash_loop_reason, read_restarts

router = APIRouter(tags=["operations"])


async def supervisor_record(request: Request) -> Restarts:
    """The local supervisor's record of restarts (none outside a local stack)."""
    return read_restarts(request.app.state.settings.restarts_file)


class Health(Model):
    status: Literal["ok", "degraded"]
    services: dict[str, Literal["ok", "degraded", "unreachable"]]
    # For each degraded service, why (e.g. the assets service refusing to parse where parsers cannot be confined),
    # and for each process of the local stack restarted more than 5 times in 5 minutes, that (keyed by process).
    reasons: dict[str, str] = Field(default_factory=dict)


@router.get(
    "/v1/health",
    response_model=Health,
    responses={
        503: {
            "model": Health,
            "description": "Some service does not answer on the bus or says it is degraded, or a process crash-loops",
        }
    },
)
async def health(client: BusClient = Depends(bus), restarts: Restarts = Depends(supervisor_record)) -> JSONResponse:
    """200 once every service answers on the bus and says it is ok, 503 with the same shape otherwise. No token needed."""
    replies = await asyncio.gather(*(client.health(name) for name in SERVICES))
    services = {
        name: "unreachable" if reply is None else reply.status for name, reply in zip(SERVICES, replies, strict=True)
    }
    reasons = {name: reply.reason for name, reply in zip(SERVICES, replies, strict=True) if reply and reply.reason}
    # A process that keeps dying may answer between its deaths; the supervisor's record says what the bus cannot.
    loops = restarts.crash_loops()
    for process, count in loops.items():
        reasons[process] = crash_loop_reason(count)
        if services.get(service_of(process)) == "ok":
            services[service_of(process)] = "degraded"
    healthy = not loops and all(status == "ok" for status in services.values())
    return JSONResponse(
        {"status": "ok" if healthy else "degraded", "services": services, "reasons": reasons},
        status_code=200 if healthy else 503,
    )
