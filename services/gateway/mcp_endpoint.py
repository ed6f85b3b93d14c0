"""The ASGI app at `/mcp`: the API's bearer auth in front of the SDK's streamable HTTP transport.

Every HTTP request is authenticated exactly as a `/v1` route authenticates it (the admin token is refused),
and its caller (actor, request id, bus) rides in the ASGI scope to the MCP server's handlers, which get the
HTTP request from the SDK.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from services.gateway.deps import current_actor
from services.gateway.errors import envelope
from services.gateway.limits import bearer_challenge
from shared.bus import BusClient
from shared.contracts.common import Actor
from shared.errors import DomainError
from shared.observe import new_request_id, request_id_var

log = logging.getLogger("dossier.gateway.mcp")

CALLER = "dossier.mcp.caller"


@dataclass(frozen=True)
class Caller:
    """Who sent this HTTP request, and the id its log lines carry."""

    actor: Actor
    request_id: str
    bus: BusClient


def current_request_id() -> str:
    """The id RequestIdAndMetrics bound for this HTTP request (the caller's X-Request-ID, or a new one)."""
    return request_id_var.get() or new_request_id()


class McpEndpoint:
    """The ASGI app at `/mcp`: bearer auth as on `/v1`, then the SDK's streamable HTTP transport.

    Stateless: every HTTP request carries its token and is authenticated on its own, so no MCP session
    can outlive a token or be used by another caller.
    """

    def __init__(self, server: Server[Any]):
        self._server = server
        self._manager: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run inside the gateway's lifespan; a session manager runs once, so each lifespan gets its own."""
        manager = StreamableHTTPSessionManager(app=self._server, stateless=True, json_response=True)
        async with manager.run():
            self._manager = manager
            try:
                yield
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        request_id = current_request_id()
        try:
            if self._manager is None:
                raise DomainError("the MCP server is not running", code="internal")
            actor = await current_actor(request)
        except DomainError as err:
            response = envelope(err.code, err.message, err.details)
            if err.code == "unauthenticated":
                response.headers["WWW-Authenticate"] = bearer_challenge(err.message)
            log.info("mcp request refused: %s", err.code, extra={"request_id": request_id})
            await response(scope, receive, send)
            return
        scope[CALLER] = Caller(actor=actor, request_id=request_id, bus=request.app.state.bus)
        await self._manager.handle_request(scope, receive, send)
