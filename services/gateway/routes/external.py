"""Runs driven by an outside agent: the run-bound routes under `X-Run-Lease`, and the take-over; and the
run's catalog as admitted, which a person reads without a lease when the run host's policy drives the run.

Each route is one step of the run in runhost (services/runhost/external.py), which checks the lease.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Header, Query, Response

from services.gateway.deps import ActorBus, PathId, actor_bus
from services.gateway.openapi import errors
from shared.contracts import runhost as c
from shared.contracts.common import NOT_BLANK
from shared.contracts.workspace import CURSOR_MAX_CHARS, Catalog
from shared.errors import Forbidden

router = APIRouter(tags=["external runs"])
LEASE_ERRORS = errors(403, 404, 409)
LEASE_POST_ERRORS = errors(403, 404, 409, 413)


async def lease_token(x_run_lease: str | None = Header(default=None, description="The run's lease token")) -> str:
    if not x_run_lease or len(x_run_lease) > 200:
        raise Forbidden("a run-bound call needs the run's lease token in X-Run-Lease", {"header": "X-Run-Lease"})
    return x_run_lease


async def run_lease(run_id: PathId, lease: str = Depends(lease_token)) -> c.LeaseRequest:
    """The run a run-bound route names, and the lease its caller holds (checked first: no lease, 403)."""
    return c.LeaseRequest(run_id=run_id, lease=lease)


@router.get("/v1/runs/{run_id}/catalog", response_model=Catalog, responses=errors(403, 404, 409, 422))
async def run_catalog(
    run_id: PathId,
    cursor: str | None = Query(
        default=None, min_length=1, max_length=CURSOR_MAX_CHARS, description="A page's `next_cursor`"
    ),
    x_run_lease: str | None = Header(default=None, description="The run's lease token (an external run's agent)"),
    bus: ActorBus = Depends(actor_bus),
) -> Response:
    """A page of the run's catalog as admitted (the first without `cursor`). With `X-Run-Lease` it is a step of
    an external run (each item recorded once as `listed`); without, a person reads a run the run host drives
    (an external run's catalog needs its lease: 403)."""
    if x_run_lease is None:
        return await bus.relay(c.RUN_CATALOG, c.RunCatalogRequest(run_id=run_id, cursor=cursor))
    lease = await run_lease(run_id, await lease_token(x_run_lease))
    request = c.ExternalCatalogRequest(run_id=lease.run_id, lease=lease.lease, cursor=cursor)
    return await bus.relay(c.EXTERNAL_CATALOG, request)


@router.get("/v1/runs/{run_id}/search", response_model=c.ExternalSearch, responses=LEASE_ERRORS)
async def external_search(
    q: str = Query(min_length=1, max_length=1000, pattern=NOT_BLANK, description="What to search for"),
    limit: int = Query(
        default=10, ge=1, le=50, description="The most hits to answer, passages and publications together"
    ),
    cursor: str | None = Query(
        default=None, min_length=1, max_length=200, description="The `next_cursor` of the previous page"
    ),
    lease: c.LeaseRequest = Depends(run_lease),
    bus: ActorBus = Depends(actor_bus),
) -> Response:
    """A page of at most `limit` hits among what the run may read: evidence passages, then earlier
    publications of the workspace, and `next_cursor` for the next page; exactly the hits answered are
    recorded (once) as `listed`."""
    request = c.ExternalSearchRequest(run_id=lease.run_id, lease=lease.lease, q=q, limit=limit, cursor=cursor)
    return await bus.relay(c.EXTERNAL_SEARCH, request)


@router.post("/v1/runs/{run_id}/read", response_model=c.ExternalRead, responses=LEASE_POST_ERRORS)
async def external_read(
    body: c.ReadBody, lease: c.LeaseRequest = Depends(run_lease), bus: ActorBus = Depends(actor_bus)
) -> Response:
    """The material at that exact version, re-authorised by its owner, kept under `sources/`, read once."""
    request = c.ExternalReadRequest(run_id=lease.run_id, lease=lease.lease, ref=body.ref, locator=body.locator)
    return await bus.relay(c.EXTERNAL_READ, request)


@router.post("/v1/runs/{run_id}/lease", response_model=c.Lease, responses=LEASE_POST_ERRORS)
async def renew_lease(lease: c.LeaseRequest = Depends(run_lease), bus: ActorBus = Depends(actor_bus)) -> Response:
    """The same token, a later expiry."""
    return await bus.relay(c.EXTERNAL_RENEW, lease)


@router.post("/v1/runs/{run_id}/finish", response_model=c.Run, responses=LEASE_POST_ERRORS)
async def finish_run(
    body: c.FinishBody, lease: c.LeaseRequest = Depends(run_lease), bus: ActorBus = Depends(actor_bus)
) -> Response:
    """Publish the answer: its sources are exactly the refs it cites, each read by this run at that version."""
    request = c.ExternalFinishRequest(
        run_id=lease.run_id, lease=lease.lease, answer=body.answer, title=body.title, checkpoint=body.checkpoint
    )
    return await bus.relay(c.EXTERNAL_FINISH, request, timeout=60)


@router.post("/v1/runs/{run_id}/lease/take", response_model=c.TakeReply, responses=errors(404, 409, 413))
async def take_over_run(run_id: PathId, body: c.TakeBody | None = None, bus: ActorBus = Depends(actor_bus)) -> Response:
    """Another session resumes the run under a new epoch (an expired lease, or `force`); the old token is fenced.
    A finish under way is waited for (a few seconds at most): if it wins the run, the take-over answers 409."""
    request = c.TakeRequest(run_id=run_id, force=body.force if body else False)
    # Longer than the bus's default: the run host may wait for a finish under way before it answers.
    return await bus.relay(c.EXTERNAL_TAKE, request, timeout=c.TAKE_TIMEOUT_SECONDS)
