"""The ASGI app at `/mcp`: the API's bearer auth in front of the SDK's streamable HTTP transport.

Every HTTP request is authenticated exactly as a `/v1` route authenticates it (the admin token is refused),
and its caller (actor, request id, bus) rides in the ASGI scope to the MCP server's handlers, which get the
HTTP request from the SDK.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from services.gateway.deps import ActorBus, current_actor
from services.gateway.errors import envelope
from services.gateway.limits import bearer_challenge
from services.gateway.mcp_caller import CALLER, Caller
from shared.errors import DomainError
from shared.observe import new_request_id, request_id_var

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger("dossier.gateway.mcp")

# How long a request that comes while the MCP server is still loading waits for it.
LOAD_WAIT_SECONDS = 30.0


def current_request_id() -> str:
    """The id RequestIdAndMetrics bound for this HTTP request (the caller's X-Request-ID, or a new one)."""
    return request_id_var.get() or new_request_id()


class McpEndpoint:
    """The ASGI app at `/mcp`: bearer auth as on `/v1`, then the SDK's streamable HTTP transport.

    Stateless: every HTTP request carries its token and is authenticated on its own, so no MCP session
    can outlive a token or be used by another caller, and a request may land on any gateway worker.

    The SDK and the server's models are about half a second of imports, as much as the rest of the
    gateway: loaded before the gateway serves, or even in the background as it starts, they held up the
    whole stack's start, which every process spends its CPU on. So the first MCP request a process gets
    loads them (on a thread: the event loop goes on answering other requests), and requests that come
    meanwhile wait for it.
    """

    def __init__(self, version: str):
        self._version = version
        self._manager: StreamableHTTPSessionManager | None = None
        self._ready = asyncio.Event()
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run inside the gateway's lifespan; a session manager runs once, so each lifespan gets its own."""
        self._ready, self._stop, self._task = asyncio.Event(), asyncio.Event(), None
        try:
            yield
        finally:
            self._stop.set()
            if self._task is not None:
                await self._task
            self._stop = None

    async def _serve(self, stop: asyncio.Event) -> None:
        try:
            await asyncio.to_thread(_load_sdk)
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

            from services.gateway.mcp_server import build_server

            manager = StreamableHTTPSessionManager(
                app=build_server(version=self._version), stateless=True, json_response=True
            )
        except Exception:
            log.exception("the MCP server could not be loaded")
            self._ready.set()  # requests are answered `internal` at once rather than after a wait
            return
        async with manager.run():
            self._manager = manager
            self._ready.set()
            try:
                await stop.wait()
            finally:
                self._manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        request_id = current_request_id()
        try:
            actor = await current_actor(request)
            if self._manager is None:
                await self._loaded()
        except DomainError as err:
            response = envelope(err.code, err.message, err.details)
            if err.code == "unauthenticated":
                response.headers["WWW-Authenticate"] = bearer_challenge(err.message)
            log.info("mcp request refused: %s", err.code, extra={"request_id": request_id})
            await response(scope, receive, send)
            return
        scope[CALLER] = Caller(bus=ActorBus(request.app.state.bus, actor), request_id=request_id)
        assert self._manager is not None
        await self._manager.handle_request(scope, receive, send)

    async def _loaded(self) -> None:
        if self._stop is None or self._stop.is_set():
            raise DomainError("the MCP server is not running", code="internal")
        if self._task is None:
            self._task = asyncio.create_task(self._serve(self._stop))
        try:
            async with asyncio.timeout(LOAD_WAIT_SECONDS):
                await self._ready.wait()
        except TimeoutError:
            raise DomainError("the MCP server is not running", code="internal") from None
        if self._manager is None:
            raise DomainError("the MCP server is not running", code="internal")


def _load_sdk() -> None:
    """The imports, on a thread: the event loop goes on answering requests meanwhile."""
    import mcp.server.streamable_http_manager  # noqa: F401

    import services.gateway.mcp_server  # noqa: F401
