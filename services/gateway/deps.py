"""FastAPI dependencies: the caller's actor from the bearer token, and the bus client."""

from __future__ import annotations

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from services.gateway.tokens import TokenService, bearer
from shared.bus import BusClient
from shared.contracts.common import Actor
from shared.errors import Unauthenticated

# Declared for the OpenAPI document (Swagger's Authorize button); the header itself is parsed below, so a
# missing or malformed token answers the envelope rather than FastAPI's own 403.
BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="A token issued by POST /v1/admin/tokens; the admin token is accepted only on /v1/admin routes.",
)


def _tokens(request: Request) -> TokenService:
    tokens: TokenService = request.app.state.tokens
    return tokens


async def current_actor(request: Request, _: HTTPAuthorizationCredentials | None = Security(BEARER)) -> Actor:
    token = bearer(request.headers.get("authorization"))
    tokens = _tokens(request)
    if tokens.is_admin(token):
        raise Unauthenticated("the admin token is accepted only on /v1/admin routes")
    return await tokens.resolve(token)


async def require_admin(request: Request, _: HTTPAuthorizationCredentials | None = Security(BEARER)) -> None:
    if not _tokens(request).is_admin(bearer(request.headers.get("authorization"))):
        raise Unauthenticated("this route needs the admin token")


def bus(request: Request) -> BusClient:
    client: BusClient = request.app.state.bus
    return client
