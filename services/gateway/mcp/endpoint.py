"""The ASGI app at `/mcp`: the API's bearer auth in front of the SDK's streamable HTTP transport.

Every HTTP request is authenticated exactly as a `/v1` route authenticates it (the admin token is refused),
and its caller (actor, request id, bus, MCP session) rides in the ASGI scope to the MCP server's handlers,
which get the HTTP request from the SDK.

MCP sessions: the transport is stateless, but the answer to `initialize` assigns an `Mcp-Session-Id`, which
the client sends with every later request and which names the session whose runs `RunBindings` holds
(services/gateway/mcp/run_bindings.py); `DELETE /mcp` with it ends the session. Protocol 2026-07-28 has no
`initialize` and no sessions: such a client gets a binding only by sending an `Mcp-Session-Id` of its own.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from services.gateway.deps import ActorBus, current_actor
from services.gateway.errors import envelope
from services.gateway.mcp.caller import CALLER, Caller
from services.gateway.mcp.run_bindings import SESSION_HEADER, McpSession, RunBindings, new_session_id, session_id_of
from services.gateway.tokens import bearer
from services.gateway.transport.limits import bearer_challenge
from shared.errors import DomainError, Invalid
from shared.observe import new_request_id, request_id_var

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger("dossier.gateway.mcp")

# How long a request that comes while the MCP server is still loading waits for it.
LOAD_WAIT_SECONDS = 30.0
# A client sends this header once it has negotiated a version; `initialize` is sent without it.
PROTOCOL_VERSION_HEADER = "mcp-protocol-version"


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

            from services.gateway.mcp.server import build_server

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
        bindings: RunBindings = request.app.state.run_bindings
        session_id = session_id_of(request.headers.get(SESSION_HEADER))
        try:
            actor = await current_actor(request)
            token = bearer(request.headers.get("authorization"))
            if request.method == "DELETE":
                await self._end_session(bindings, session_id, token)
                await Response(status_code=204)(scope, receive, send)
                return
            if self._manager is None:
                await self._loaded()
        except DomainError as err:
            response = envelope(err.code, err.message, err.details)
            if err.code == "unauthenticated":
                response.headers["WWW-Authenticate"] = bearer_challenge(err.message)
            log.info("mcp request refused: %s", err.code, extra={"request_id": request_id})
            await response(scope, receive, send)
            return
        if session_id is None and PROTOCOL_VERSION_HEADER not in request.headers:
            receive, initializing = await _peek_initialize(receive)
            if initializing:
                session_id = new_session_id()
                send = _with_session_id(send, session_id)
        session = McpSession.of(session_id, token) if session_id is not None else None
        bus = ActorBus(request.app.state.bus, actor)
        scope[CALLER] = Caller(bus=bus, request_id=request_id, bindings=bindings, session=session)
        assert self._manager is not None
        await self._manager.handle_request(scope, receive, send)

    @staticmethod
    async def _end_session(bindings: RunBindings, session_id: str | None, token: str) -> None:
        """The client ends its session: the runs it held go on (to be taken over), but not bound to it."""
        if session_id is None:
            raise Invalid(
                "DELETE /mcp ends the MCP session its Mcp-Session-Id header names", {"header": "Mcp-Session-Id"}
            )
        await bindings.forget(McpSession.of(session_id, token))

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


async def _peek_initialize(receive: Receive) -> tuple[Receive, bool]:
    """Whether the body is an `initialize` request, and a `receive` that gives the body again. (Only a
    request without a negotiated protocol version is read here: the handshake, or a client that keeps none.)"""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            break
    body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
    try:
        parsed = json.loads(body)
    except ValueError:
        parsed = None
    initializing = isinstance(parsed, dict) and parsed.get("method") == "initialize"

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return replay, initializing


def _with_session_id(send: Send, session_id: str) -> Send:
    """The answer to `initialize` assigns the session id (a refusal assigns none)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and 200 <= message["status"] < 300:
            headers = [*message.get("headers", []), (SESSION_HEADER.encode(), session_id.encode())]
            message = {**message, "headers": headers}
        await send(message)

    return sending


def _load_sdk() -> None:
    """The imports, on a thread: the event loop goes on answering requests meanwhile."""
    import mcp.server.streamable_http_manager  # noqa: F401

    import services.gateway.mcp.server  # noqa: F401
