"""The hottest read, answered beside FastAPI's router rather than through it.

An exact-version read is one bus call whose reply passes through as bytes. Through FastAPI it also paid
for route matching across every router, dependency solving, path-parameter validation and the response
class: about half of the gateway's time per read in the profile of issue 14. `HotReads` answers the
requests it is sure about itself, with the same bus call (the function the route calls too), the same
error envelope, and the route's template in metrics and logs. It sits inside the request-id, body-limit
and token guards, so those apply as before.

Anything out of the ordinary goes on to FastAPI, which answers it as it always did: a query string, a
body, a method other than GET, a version that is not plain digits, or text that cannot be stored.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi.routing import APIRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.errors import envelope
from services.gateway.transport.limits import has_body
from shared.bus import BusClient
from shared.contracts.common import ID_MAX_CHARS, Actor
from shared.errors import DomainError
from shared.storable import unstorable_field

# Nine digits always fit the int32 a version is; longer numbers, a version 0 and ids of the wrong length
# are left to the route's own validation (services/gateway/deps.py PathVersion, PathId), which words them.
_PLAIN_INT = re.compile(r"[0-9]{1,9}")
_JSON = [(b"content-type", b"application/json")]

Answer = Callable[[BusClient, Actor, dict[str, Any]], Awaitable[bytes]]


@dataclass(frozen=True)
class HotRoute:
    """A GET route whose answer is one bus call: `answer(bus, actor, path_params)` gives the JSON bytes."""

    route: APIRoute
    answer: Answer
    int_params: frozenset[str] = frozenset()

    def match(self, scope: Scope) -> dict[str, Any] | None:
        """The typed path parameters when this request is plainly this route's, else None."""
        if scope["method"] != "GET" or scope.get("query_string") or has_body(scope["headers"]):
            return None
        found = self.route.path_regex.match(scope["path"])
        if found is None:
            return None
        params: dict[str, Any] = {}
        for name, value in found.groupdict().items():
            if unstorable_field(value) is not None:
                return None
            if name in self.int_params:
                if not _PLAIN_INT.fullmatch(value) or int(value) < 1:
                    return None
                params[name] = int(value)
            elif len(value) > ID_MAX_CHARS:
                return None
            else:
                params[name] = value
        return params


class HotReads:
    """Pure ASGI: answers its `routes`' plain requests, hands every other request to `app` unchanged."""

    def __init__(self, app: ASGIApp, routes: list[HotRoute], bus: Callable[[], BusClient]):
        self.app = app
        self.routes = routes
        self.bus = bus

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            actor = scope.get("state", {}).get("actor")
            if isinstance(actor, Actor):
                for hot in self.routes:
                    params = hot.match(scope)
                    if params is not None:
                        await self._answer(hot, actor, params, scope, receive, send)
                        return
        await self.app(scope, receive, send)

    async def _answer(
        self, hot: HotRoute, actor: Actor, params: dict[str, Any], scope: Scope, receive: Receive, send: Send
    ) -> None:
        # What FastAPI leaves in the scope for the layers outside: the route (its template names the
        # request in metrics and the access log) and its parameters.
        scope["route"] = hot.route
        scope["path_params"] = params
        try:
            body = await hot.answer(self.bus(), actor, params)
        except DomainError as err:
            await envelope(err.code, err.message, err.details)(scope, receive, send)
            return
        headers = [(b"content-length", str(len(body)).encode()), *_JSON]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def route_named(routes: list[Any], name: str) -> APIRoute:
    """The APIRoute of the handler called `name` (the operation id) among a router's routes."""
    for route in routes:
        if isinstance(route, APIRoute) and route.name == name:
            return route
    raise LookupError(f"no route named {name}")
