from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response

from services.gateway.deps import ActorBus, Bus, Paging, PathId, PathVersion, actor_bus, json_response
from services.gateway.openapi import errors
from services.gateway.transport.hot import HotRoute, route_named
from shared.bus import BusClient
from shared.contracts import publication as c
from shared.contracts.common import INT32_MAX, Actor

router = APIRouter(prefix="/v1/publications", tags=["publications"])


@router.post("", status_code=201, response_model=c.PublicationVersion, responses=errors(404, 409, 413))
async def create_publication(body: c.NewPublication, bus: Bus) -> Response:
    """Publish version 1 of a new publication; associated with the workspace when one is named."""
    request = c.CommitRequest(title=body.title, body=body.body, workspace_id=body.workspace_id)
    return await bus.relay(c.COMMIT, request, status_code=201)


@router.get("/{pub_id}", response_model=c.Publication, responses=errors(404))
async def get_publication(pub_id: PathId, paging: Paging, bus: Bus) -> Response:
    """The publication with one page of its version summaries, oldest first; `next_cursor` pages on."""
    return await bus.relay(c.GET, c.GetRequest(id=pub_id, limit=paging.limit, cursor=paging.cursor))


@router.get("/{pub_id}/versions/{version}", response_model=c.PublicationVersion, responses=errors(404, 409))
async def read_publication_version(pub_id: PathId, version: PathVersion, bus: Bus) -> Response:
    """One exact version; a withdrawn one answers 409 `unavailable`."""
    return json_response(await read_version(bus.client, bus.actor, {"pub_id": pub_id, "version": version}))


async def read_version(client: BusClient, actor: Actor, params: dict[str, Any]) -> bytes:
    """The hottest read, for the route above and for services/gateway/transport/hot.py: the service's JSON is passed
    on as bytes, not rebuilt as a dict and re-encoded."""
    return await client.call_json(c.READ, c.ReadRequest(id=params["pub_id"], version=params["version"]), actor=actor)


HOT_READS = [HotRoute(route_named(router.routes, "read_publication_version"), read_version, frozenset({"version"}))]


@router.get("/{pub_id}/versions/{version}/claims", response_model=c.ClaimList, responses=errors(404, 409))
async def list_publication_claims(pub_id: PathId, version: PathVersion, paging: Paging, bus: Bus) -> Response:
    """One page of the cited sentences of a run's answer, each checked against the exact passage it cites."""
    request = c.ClaimsRequest(id=pub_id, version=version, limit=paging.limit, cursor=paging.cursor)
    return await bus.relay(c.CLAIMS, request)


@router.post(
    "/{pub_id}/versions", status_code=201, response_model=c.PublicationVersion, responses=errors(404, 409, 413)
)
async def revise_publication(pub_id: PathId, body: c.Revision, bus: Bus) -> Response:
    """A new version, made only when `expected_latest_version` is still the latest (CAS)."""
    request = c.ReviseRequest(
        id=pub_id, body=body.body, title=body.title, expected_latest_version=body.expected_latest_version
    )
    return await bus.relay(c.REVISE, request, status_code=201)


@router.post(
    "/{pub_id}/versions/{version}/withdraw", response_model=c.PublicationVersion, responses=errors(404, 409, 413)
)
async def withdraw_publication_version(pub_id: PathId, version: PathVersion, body: c.Withdrawal, bus: Bus) -> Response:
    """Withdraw one version; reads of it answer `unavailable(withdrawn)` from then on."""
    return await bus.relay(c.WITHDRAW, c.WithdrawRequest(id=pub_id, version=version, reason=body.reason))


@router.get("/{pub_id}/diff", response_model=c.Diff, responses=errors(404, 409))
async def diff_publication_versions(
    pub_id: PathId,
    from_: int = Query(alias="from", ge=1, le=INT32_MAX),
    to: int = Query(ge=1, le=INT32_MAX),
    bus: ActorBus = Depends(actor_bus),
) -> Response:
    """A line diff of two versions' bodies; each is read under the rules of a version read."""
    # By the field's alias: `from` cannot be a keyword argument.
    return await bus.relay(c.DIFF, c.DiffRequest.model_validate({"id": pub_id, "from": from_, "to": to}))
