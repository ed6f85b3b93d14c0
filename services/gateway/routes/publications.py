from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse, Response

from services.gateway.deps import PathId, PathVersion, bus, current_actor, page
from services.gateway.hot import HotRoute, route_named
from services.gateway.openapi import errors
from shared.bus import BusClient
from shared.contracts import publication as c
from shared.contracts.common import INT32_MAX, Actor

router = APIRouter(prefix="/v1/publications", tags=["publications"])


@router.post("", status_code=201, response_model=c.PublicationVersion, responses=errors(404, 409, 413))
async def create_publication(
    body: c.NewPublication, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """Publish version 1 of a new publication; associated with the workspace when one is named."""
    data = await client.call_raw(c.COMMIT, c.CommitRequest(**body.model_dump()), actor=actor)
    return JSONResponse(data, status_code=201)


@router.get("/{pub_id}", response_model=c.Publication, responses=errors(404))
async def get_publication(
    pub_id: PathId,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """The publication with one page of its version summaries, oldest first; `next_cursor` pages on."""
    return JSONResponse(await client.call_raw(c.GET, {"id": pub_id, **paging}, actor=actor))


@router.get("/{pub_id}/versions/{version}", response_model=c.PublicationVersion, responses=errors(404, 409))
async def read_publication_version(
    pub_id: PathId, version: PathVersion, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> Response:
    """One exact version; a withdrawn one answers 409 `unavailable`."""
    return Response(
        await read_version(client, actor, {"pub_id": pub_id, "version": version}), media_type="application/json"
    )


async def read_version(client: BusClient, actor: Actor, params: dict[str, Any]) -> bytes:
    """The hottest read, for the route above and for services/gateway/hot.py: the service's JSON is passed
    on as bytes, not rebuilt as a dict and re-encoded."""
    return await client.call_json_raw(c.READ, {"id": params["pub_id"], "version": params["version"]}, actor=actor)


HOT_READS = [HotRoute(route_named(router.routes, "read_publication_version"), read_version, frozenset({"version"}))]


@router.get("/{pub_id}/versions/{version}/claims", response_model=c.ClaimList, responses=errors(404, 409))
async def list_publication_claims(
    pub_id: PathId,
    version: PathVersion,
    paging: dict[str, Any] = Depends(page),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """One page of the cited sentences of a run's answer, each checked against the exact passage it cites."""
    return JSONResponse(await client.call_raw(c.CLAIMS, {"id": pub_id, "version": version, **paging}, actor=actor))


@router.post(
    "/{pub_id}/versions", status_code=201, response_model=c.PublicationVersion, responses=errors(404, 409, 413)
)
async def revise_publication(
    pub_id: PathId, body: c.Revision, actor: Actor = Depends(current_actor), client: BusClient = Depends(bus)
) -> JSONResponse:
    """A new version, made only when `expected_latest_version` is still the latest (CAS)."""
    data = await client.call_raw(c.REVISE, c.ReviseRequest(id=pub_id, **body.model_dump()), actor=actor)
    return JSONResponse(data, status_code=201)


@router.post(
    "/{pub_id}/versions/{version}/withdraw", response_model=c.PublicationVersion, responses=errors(404, 409, 413)
)
async def withdraw_publication_version(
    pub_id: PathId,
    version: PathVersion,
    body: c.Withdrawal,
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """Withdraw one version; reads of it answer `unavailable(withdrawn)` from then on."""
    data = await client.call_raw(c.WITHDRAW, {"id": pub_id, "version": version, "reason": body.reason}, actor=actor)
    return JSONResponse(data)


@router.get("/{pub_id}/diff", response_model=c.Diff, responses=errors(404, 409))
async def diff_publication_versions(
    pub_id: PathId,
    from_: int = Query(alias="from", ge=1, le=INT32_MAX),
    to: int = Query(ge=1, le=INT32_MAX),
    actor: Actor = Depends(current_actor),
    client: BusClient = Depends(bus),
) -> JSONResponse:
    """A line diff of two versions' bodies; each is read under the rules of a version read."""
    req = c.DiffRequest.model_validate({"id": pub_id, "from": from_, "to": to})
    return JSONResponse(await client.call_raw(c.DIFF, req, actor=actor))
