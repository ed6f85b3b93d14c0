"""FastAPI dependencies: the caller's actor from the bearer token, and the bus client."""

from __future__ import annotations

from fastapi import Request

from services.gateway.tokens import TokenService, bearer
from shared.bus import BusClient
from shared.contracts.common import Actor
from shared.errors import Unauthenticated


def _tokens(request: Request) -> TokenService:
    tokens: TokenService = request.app.state.tokens
    return tokens


async def current_actor(request: Request) -> Actor:
    token = bearer(request.headers.get("authorization"))
    tokens = _tokens(request)
    if tokens.is_admin(token):
        raise Unauthenticated("the admin token is accepted only on /v1/admin routes")
    return await tokens.resolve(token)


async def require_admin(request: Request) -> None:
    if not _tokens(request).is_admin(bearer(request.headers.get("authorization"))):
        raise Unauthenticated("this route needs the admin token")


def bus(request: Request) -> BusClient:
    client: BusClient = request.app.state.bus
    return client
