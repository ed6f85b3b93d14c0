from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request, Response

from services.gateway.deps import PathId, require_admin
from services.gateway.holds import HOLD_PATH, WriteHold, announce
from services.gateway.openapi import errors
from services.gateway.tokens import TokenService
from shared.contracts.common import SCOPE_PATTERN
from shared.contracts.gateway import (
    PAGE_DEFAULT,
    PAGE_MAX,
    HoldWritesRequest,
    IssuedToken,
    IssueTokenRequest,
    TokenPage,
    WriteHoldState,
)

router = APIRouter(prefix="/v1/admin", dependencies=[Depends(require_admin)], tags=["admin"])


def _tokens(request: Request) -> TokenService:
    tokens: TokenService = request.app.state.tokens
    return tokens


@router.post("/tokens", status_code=201, response_model=IssuedToken, responses=errors(413))
async def issue_token(body: IssueTokenRequest, request: Request) -> IssuedToken:
    """Issue a token for a scope and principal, optionally expiring (admin token). The secret is shown once."""
    return await _tokens(request).issue(body)


@router.get("/tokens", response_model=TokenPage)
async def list_tokens(
    request: Request,
    scope: str | None = Query(default=None, pattern=SCOPE_PATTERN),
    limit: int = Query(default=PAGE_DEFAULT, ge=1, le=PAGE_MAX),
    cursor: str | None = Query(default=None, min_length=1, max_length=500),
) -> TokenPage:
    """Tokens that are not revoked, oldest first, a page at a time (never their secrets)."""
    return await _tokens(request).list_page(scope=scope, limit=limit, cursor=cursor)


@router.delete("/tokens/{token_id}", status_code=204, responses=errors(404))
async def revoke_token(token_id: PathId, request: Request) -> Response:
    """Revoke a token: every gateway process refuses it within 5 seconds."""
    await _tokens(request).revoke(token_id)
    return Response(status_code=204)


def _hold(request: Request) -> WriteHold:
    hold: WriteHold = request.app.state.write_hold
    return hold


HOLD_ROUTE = HOLD_PATH.removeprefix(router.prefix)


@router.post(HOLD_ROUTE, response_model=WriteHoldState, responses=errors(413))
async def hold_writes(body: HoldWritesRequest, request: Request) -> WriteHoldState:
    """Hold every write (any method but GET, HEAD, OPTIONS) at every gateway process for `seconds`, or until
    released; reads go on (admin token). Answers once every listening gateway process holds: `processes`
    counts them. For backups (docs/operations.md)."""
    processes = await announce(request.app.state.db, body.seconds)
    _hold(request).set(body.seconds)
    left = _hold(request).remaining()
    return WriteHoldState(held=left > 0, seconds_left=round(left, 3), processes=processes)


@router.delete(HOLD_ROUTE, response_model=WriteHoldState)
async def release_writes(request: Request) -> WriteHoldState:
    """End a hold at every gateway process: held writes go on at once (admin token)."""
    await announce(request.app.state.db, 0)
    _hold(request).set(0)
    return WriteHoldState(held=False, seconds_left=0.0, processes=0)
