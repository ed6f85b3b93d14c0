"""FastAPI dependencies: the caller's actor from the bearer token, and the bus as that caller."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ParamSpec, TypeVar

from fastapi import Depends, Path, Query, Request, Response, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import ValidationError

from services.gateway.tokens import TokenService, bearer
from services.gateway.transport.limits import STREAMED_ROUTES, has_body
from shared.bus import BusClient, validation_details
from shared.contracts.common import (
    CURSOR_MAX_CHARS,
    ID_MAX_CHARS,
    INT32_MAX,
    PAGE_LIMIT_DEFAULT,
    PAGE_LIMIT_MAX,
    Actor,
    Model,
    PageRequest,
    Q,
    R,
    Subject,
)
from shared.errors import Invalid, Unauthenticated
from shared.storable import require_storable, unstorable_field

# Declared for the OpenAPI document (Swagger's Authorize button); the header itself is parsed below, so a
# missing or malformed token answers the envelope rather than FastAPI's own 403.
BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="A token issued by POST /v1/admin/tokens; the admin token is accepted only on /v1/admin routes.",
)


# A path's id and version, bounded as the owners' contracts bound them, so the OpenAPI document says what the
# server refuses (an id past 200 characters, version 0) instead of a bare string and integer.
PathId = Annotated[str, Path(min_length=1, max_length=ID_MAX_CHARS)]
PathVersion = Annotated[int, Path(ge=1, le=INT32_MAX)]


def _tokens(request: Request) -> TokenService:
    tokens: TokenService = request.app.state.tokens
    return tokens


async def current_actor(request: Request, _: HTTPAuthorizationCredentials | None = Security(BEARER)) -> Actor:
    # The `Authenticate` guard has already resolved the token of every /v1 request, before any body parse.
    checked = getattr(request.state, "actor", None)
    if isinstance(checked, Actor):
        return checked
    return await resolve_actor(_tokens(request), request.headers.get("authorization"))


async def resolve_actor(tokens: TokenService, authorization: str | None) -> Actor:
    token = bearer(authorization)
    if tokens.is_admin(token):
        raise Unauthenticated("the admin token is accepted only on /v1/admin routes")
    return await tokens.resolve(token)


async def check_token(tokens: TokenService, path: str, authorization: str | None) -> Actor | None:
    """What the `Authenticate` guard asks: the admin token on /v1/admin routes, a user's token elsewhere."""
    if path == "/v1/admin" or path.startswith("/v1/admin/"):
        if not tokens.is_admin(bearer(authorization)):
            raise Unauthenticated("this route needs the admin token")
        return None
    return await resolve_actor(tokens, authorization)


async def require_admin(request: Request, _: HTTPAuthorizationCredentials | None = Security(BEARER)) -> None:
    if not _tokens(request).is_admin(bearer(request.headers.get("authorization"))):
        raise Unauthenticated("this route needs the admin token")


async def reject_unstorable(request: Request) -> None:
    """The API's error rules (docs/api.md): U+0000 or a lone surrogate in a path id, a query parameter or a JSON field is
    `invalid`, naming it, on every route (multipart fields are checked as they are parsed); so is a /v1 query
    parameter given twice."""
    for name, value in request.path_params.items():
        require_storable(value, name)
    path = request.url.path
    # No /v1 parameter is a list, so one given twice has no meaning to pick (the workbench's `picked` is).
    seen: set[str] = set()
    for key, value in request.query_params.multi_items():
        if unstorable_field(key) is not None:
            raise Invalid("a query parameter's name cannot be stored", {"field": "query"})
        require_storable(value, key)
        if key in seen and path.startswith("/v1/"):
            raise Invalid(f"the query parameter {key[:100]!r} is given more than once; give it once", {"field": key})
        seen.add(key)
    # A GET has no body, and parsing nothing as JSON only fails (a twentieth of the hottest read, profiled).
    # The workbench's pages read forms, never JSON: parsing a JSON body sent to one (before anyone is
    # known) would only copy it twice more.
    if (
        not has_body(request.scope["headers"])
        or (request.method, path) in STREAMED_ROUTES
        or not path.startswith("/v1/")
    ):
        return
    media = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        try:
            # FastAPI has parsed a JSON body already (before dependencies), and Starlette caches it.
            body = await request.json()
        except (ValueError, UnicodeDecodeError):
            return  # not JSON: the body's own validation answers
        require_storable(body)


# async for the same reason as `bus` below: a plain `def` dependency costs a thread-pool hop per request.
async def page(
    limit: int = Query(default=PAGE_LIMIT_DEFAULT, ge=1, le=PAGE_LIMIT_MAX),
    cursor: str | None = Query(default=None, min_length=1, max_length=CURSOR_MAX_CHARS),
) -> PageRequest:
    """The paging parameters of every list route (docs/api.md); the owner service decodes the cursor."""
    return PageRequest(limit=limit, cursor=cursor)


# async, though it awaits nothing: FastAPI runs a plain `def` dependency in its thread pool, a thread hop
# on every request.
async def bus(request: Request) -> BusClient:
    client: BusClient = request.app.state.bus
    return client


def json_response(body: bytes | str, status_code: int = 200) -> Response:
    """JSON already encoded (an owner's reply, a reply model's dump), sent as it is."""
    return Response(body, status_code=status_code, media_type="application/json")


@dataclass(frozen=True, slots=True)
class ActorBus:
    """The bus as one caller: every request it sends carries that caller's actor."""

    client: BusClient
    actor: Actor

    async def call(self, subject: Subject[Q, R], request: Q, *, timeout: float | None = None) -> R:
        """The owner's reply, as the subject's reply model."""
        return await self.client.call(subject, request, actor=self.actor, timeout=timeout)

    async def relay(
        self, subject: Subject[Q, Any], request: Q, *, status_code: int = 200, timeout: float | None = None
    ) -> Response:
        """The owner's reply passed on as the JSON it wrote: no model, no dict, no second encoding."""
        return json_response(
            await self.client.call_json(subject, request, actor=self.actor, timeout=timeout), status_code
        )


# Two dependencies, as `current_actor` and `bus` were: the bus is read here, not through a third.
async def actor_bus(request: Request, actor: Actor = Depends(current_actor)) -> ActorBus:
    return ActorBus(request.app.state.bus, actor)


# The caller's bus, and a list's page, as route parameters (FastAPI's Annotated dependencies).
Bus = Annotated[ActorBus, Depends(actor_bus)]
Paging = Annotated[PageRequest, Depends(page)]


P = ParamSpec("P")
M = TypeVar("M", bound=Model)


def build(model: Callable[P, M], *args: P.args, **kwargs: P.kwargs) -> M:
    """A bus request made of what the route took; a value its owner would refuse answers `invalid`, naming
    the field, as the owner itself answers it (shared/bus.py)."""
    try:
        return model(*args, **kwargs)
    except ValidationError as exc:
        raise Invalid("the request is malformed", validation_details(exc)) from exc
