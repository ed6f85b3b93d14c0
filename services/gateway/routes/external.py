"""Runs driven by an outside agent: the run-bound routes under `X-Run-Lease`, and the take-over.

Each route is one step of the run in runhost (services/runhost/external.py), which checks the lease.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Header, Query
from fastapi.responses import JSONResponse

from services.gateway.deps import PathId, bus, current_actor
from services.gateway.openapi import errors
from shared.bus import BusClient
from shared.contracts import runhost as c
from shared.contracts.common import NOT_BLANK, Actor
from shared.contracts.workspace import Catalog
from shared.errors import Forbidden

router = APIRouter(tags=["external runs"])
LEASE_ERRORS = errors(403, 404, 409)
LEASE_POST_ERRORS = errors(403, 404, 409, 413)


def lease_token(x_run_lease: str | None = Header(default=None, description="The run's lease token")) -> str:
    if not x_run_lease or len(x_run_lease) > 200:
        raise Forbidden("a run-bound call needs the run's lease token in X-Run-Lease", {"header": "X-Run-Lease"})
    return x_run_lease


@router.get("/v1/runs/{run_id}/catalog", response_model=Catalog, responses=LEASE_ERRORS)
async def external_catalog(
    run_id: PathId,
    lease: str = Depends(lease_token),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """The catalog as admitted; each item is recorded once as `listed`."""
    request = c.LeaseRequest(run_id=run_id, lease=lease)
    return JSONResponse(await client.call_raw(c.EXTERNAL_CATALOG, request, actor=actor))


@router.get("/v1/runs/{run_id}/search", response_model=c.ExternalSearch, responses=LEASE_ERRORS)
async def external_search(
    run_id: PathId,
    q: str = Query(min_length=1, max_length=1000, pattern=NOT_BLANK, description="What to search for"),
    limit: int = Query(default=10, ge=1, le=50),
    lease: str = Depends(lease_token),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """Evidence hits among what the run may read; each hit's ref is recorded once as `listed`."""
    request = c.ExternalSearchRequest(run_id=run_id, lease=lease, q=q, limit=limit)
    return JSONResponse(await client.call_raw(c.EXTERNAL_SEARCH, request, actor=actor))


@router.post("/v1/runs/{run_id}/read", response_model=c.ExternalRead, responses=LEASE_POST_ERRORS)
async def external_read(
    run_id: PathId,
    body: c.ReadBody,
    lease: str = Depends(lease_token),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """The material at that exact version, re-authorised by its owner, kept under `sources/`, read once."""
    request = c.ExternalReadRequest(run_id=run_id, lease=lease, ref=body.ref, locator=body.locator)
    return JSONResponse(await client.call_raw(c.EXTERNAL_READ, request, actor=actor))


@router.post("/v1/runs/{run_id}/lease", response_model=c.Lease, responses=LEASE_POST_ERRORS)
async def renew_lease(
    run_id: PathId,
    lease: str = Depends(lease_token),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """The same token, a later expiry."""
    request = c.LeaseRequest(run_id=run_id, lease=lease)
    return JSONResponse(await client.call_raw(c.EXTERNAL_RENEW, request, actor=actor))


@router.post("/v1/runs/{run_id}/finish", response_model=c.Run, responses=LEASE_POST_ERRORS)
async def finish_run(
    run_id: PathId,
    body: c.FinishBody,
    lease: str = Depends(lease_token),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """Publish the answer: its sources are exactly the refs it cites, each read by this run at that version."""
    request = c.ExternalFinishRequest(run_id=run_id, lease=lease, **body.model_dump())
    return JSONResponse(await client.call_raw(c.EXTERNAL_FINISH, request, actor=actor, timeout=60))


@router.post("/v1/runs/{run_id}/lease/take", response_model=c.TakeReply, responses=errors(404, 409, 413))
async def take_over_run(
    run_id: PathId,
    body: c.TakeBody | None = None,
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """Another session resumes the run under a new epoch (an expired lease, or `force`); the old token is fenced."""
    request = c.TakeRequest(run_id=run_id, force=body.force if body else False)
    return JSONResponse(await client.call_raw(c.EXTERNAL_TAKE, request, actor=actor))
