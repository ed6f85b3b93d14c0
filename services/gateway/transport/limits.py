"""The pure-ASGI guard that runs before FastAPI sees a request: body size, bearer token, request rate.

FastAPI parses a JSON body before it solves a route's dependencies, so these checks live here, outside it.
A header a request carries once (`SINGLE_HEADERS`) given twice is refused before anything reads either
copy (422 naming it): each layer reads one copy, and which one it takes (a dict keeps the last, Starlette's
`headers.get` the first) must not decide who the caller is or what its body means.
The order is the contract's: a body declared over its limit is refused first (413, before the token);
then the token, from the headers, before a byte of the body is read, so an unauthenticated body is never
buffered (a chunked one, whose size only its end tells, is read and dropped to tell 413 from 401); then
the token's rate. Routes that learn their caller only while they run (the workbench's forms, /v1/health)
read their body within the pre-auth budget (services.gateway.transport.admission). Whether a body is a caller's
with a valid token is told to the connection (`tell_connection`), which holds it to that caller's
deadlines and closes the others' first when it must make room.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.gateway.tokens import bearer, token_digest
from services.gateway.transport.admission import PreauthBudget, TokenBuckets
from shared.errors import HTTP_STATUS, DomainError, Invalid, Overloaded, RateLimited, TooLarge, Unsupported

# The only routes whose body streams (multipart uploads, bounded per file while they stream); every other
# body gets the JSON limit. Matched exactly: `/v1/assets/import` takes JSON like any other route.
STREAMED_ROUTES = frozenset({("POST", "/v1/assets"), ("POST", "/v1/artifacts")})
MCP_PATH = "/mcp"
# The ASGI extension through which the connection that carries a request (services.gateway.transport.protocol)
# learns whether its body is a caller's with a valid token: the deadline the body is held to, and whether
# the connection is among the first closed when the gateway must make room, depend on it.
CALLER_EXTENSION = "dossier.caller"
# Headers a request carries once: the credentials (the token, a run's lease, an MCP session) and the
# singletons that say what the request is (RFC 9110). Not the cookie: a browser on HTTP/2 may send it in
# pieces, which a proxy in front can pass on as several headers (Starlette reads them all).
SINGLE_HEADERS = {
    name.lower().encode(): name for name in ("Authorization", "X-Run-Lease", "Mcp-Session-Id", "Content-Type", "Host")
}


class BodyTooLarge(TooLarge):
    """A streamed (multipart) body went over its limit while a route was reading it."""


def needs_token(path: str) -> bool:
    """Every `/v1` route but `/v1/health`, and the MCP endpoint, take a bearer token."""
    return (path.startswith("/v1/") and path != "/v1/health") or path == MCP_PATH


class Admission:
    """`limit_for(method, path)` names a request's byte limit and whether its body may stream;
    `check(path, authorization)` returns the actor (None on admin routes) or raises `Unauthenticated`.

    A body that may not stream (JSON, text) is read whole, up to the limit, before the application runs:
    over it, 413 `too_large`, sent with a Content-Length or chunked. A streamed body (a multipart upload,
    whose route hashes and spools it) is counted as it is read. The actor is left in the request's state
    for the `current_actor` dependency.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        limit_for: Callable[[str, str], tuple[int, bool]],
        check: Callable[[str, str | None], Awaitable[Any]],
        rates: TokenBuckets,
        budget: PreauthBudget,
    ):
        self.app = app
        self.limit_for = limit_for
        self.check = check
        self.rates = rates
        self.budget = budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        repeated = _repeated(scope["headers"])
        if repeated is not None:
            await send_envelope(
                send, Invalid(f"the {repeated} header is given more than once; send it once", {"header": repeated})
            )
            return
        declared, chunked = _framing(scope["headers"])
        # No Content-Length and no Transfer-Encoding: HTTP/1.1 says there is no body to read or bound.
        body = chunked or (declared is not None and declared != b"0")
        limit, streams = self.limit_for(scope["method"], scope["path"]) if body else (0, False)
        if body and _encoded(scope["headers"]):
            # A compressed body would pass the byte limit and grow past it when decoded: refused, unread.
            await send_envelope(
                send,
                Unsupported(
                    "an encoded body (Content-Encoding) is not accepted; send it plain", {"header": "Content-Encoding"}
                ),
            )
            return
        if body and declared is not None and declared.isdigit() and int(declared) > limit:
            await send_envelope(send, _too_large(limit))
            return
        if needs_token(scope["path"]):
            await self._authenticated(scope, receive, send, body=body, chunked=chunked, limit=limit, streams=streams)
        elif not body or streams:
            # A streamed form (the workbench's upload) says who sent it once its route knows (tell_connection).
            await self._pass(scope, receive, send, body=body, limit=limit, streams=streams)
        else:
            # The caller is known only once the route runs: the body is held within the pre-auth budget,
            # and to the pre-auth deadline.
            tell_connection(scope, authenticated=False)
            size = int(declared) if declared is not None and declared.isdigit() else limit
            if not await self.budget.reserve(size):
                await send_envelope(
                    send, Overloaded("the server holds as many unauthenticated bodies as it may; retry")
                )
                return
            try:
                await self._pass(scope, receive, send, body=True, limit=limit, streams=False)
            finally:
                await self.budget.release(size)

    async def _authenticated(
        self, scope: Scope, receive: Receive, send: Send, *, body: bool, chunked: bool, limit: int, streams: bool
    ) -> None:
        header = next((value.decode("latin-1") for name, value in scope["headers"] if name == b"authorization"), None)
        try:
            actor = await self.check(scope["path"], header)
        except DomainError as exc:
            tell_connection(scope, authenticated=False)
            refusal = _too_large(limit) if chunked and not streams and not await _within(receive, limit) else exc
            challenge = scope["path"] == MCP_PATH and refusal.code == "unauthenticated"
            extra = [(b"www-authenticate", bearer_challenge(refusal.message).encode("latin-1"))] if challenge else []
            await send_envelope(send, refusal, extra=extra)
            return
        scope.setdefault("state", {})["actor"] = actor
        tell_connection(scope, authenticated=True)
        # Keyed by the token's digest, the key its workbench sessions know too (web/security.py).
        retry_after = self.rates.take(token_digest(bearer(header)))
        if retry_after:
            err = RateLimited("this token is over its request rate; retry later", retry_after=retry_after)
            await send_envelope(send, err, extra=[(b"retry-after", str(retry_after).encode())])
            return
        await self._pass(scope, receive, send, body=body, limit=limit, streams=streams)

    async def _pass(self, scope: Scope, receive: Receive, send: Send, *, body: bool, limit: int, streams: bool) -> None:
        if not body:
            await self.app(scope, receive, send)
        elif streams:
            await self._streamed(scope, receive, send, limit)
        else:
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away before its body was complete
                chunk = message.get("body", b"")
                chunks.append(chunk)
                size += len(chunk)
                if size > limit:
                    await send_envelope(send, _too_large(limit))
                    return
                if not message.get("more_body", False):
                    break
            await self.app(scope, _replay(chunks, receive), send)

    async def _streamed(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge("the request body is over the limit", {"limit": limit})
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except BodyTooLarge as exc:
            if not started:
                await send_envelope(send, exc)


def tell_connection(scope: Scope, *, authenticated: bool) -> None:
    """Tells the connection whether this request's caller holds a valid token (or session), when it is
    one that listens (services.gateway.transport.protocol); an ASGI server without the extension is told nothing."""
    extension = scope.get("extensions", {}).get(CALLER_EXTENSION)
    if extension is not None:
        extension["tell"](scope, authenticated)


def _repeated(headers: list[tuple[bytes, bytes]]) -> str | None:
    """The first of `SINGLE_HEADERS` the request gives more than once, if any."""
    seen: set[bytes] = set()
    for name, _ in headers:
        if name in SINGLE_HEADERS:
            if name in seen:
                return SINGLE_HEADERS[name]
            seen.add(name)
    return None


def _framing(headers: list[tuple[bytes, bytes]]) -> tuple[bytes | None, bool]:
    """The request's Content-Length value, and whether it declares a Transfer-Encoding."""
    declared, chunked = None, False
    for name, value in headers:
        if name == b"content-length":
            declared = value
        elif name == b"transfer-encoding":
            chunked = True
    return declared, chunked


def _encoded(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(
        name == b"content-encoding" and value.strip().lower() not in (b"", b"identity") for name, value in headers
    )


def has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a request sent a body at all: a Content-Length other than 0, or a Transfer-Encoding."""
    declared, chunked = _framing(headers)
    return chunked or (declared is not None and declared != b"0")


def _replay(chunks: list[bytes], receive: Receive) -> Receive:
    """The body read ahead, given to the application as it arrived (no joined copy), each chunk let go
    of once given; then the connection's own messages (a disconnect)."""
    chunks.reverse()

    async def replay() -> Message:
        if chunks:
            body = chunks.pop()
            return {"type": "http.request", "body": body, "more_body": bool(chunks)}
        return await receive()

    return replay


async def _within(receive: Receive, limit: int) -> bool:
    """Reads a body to its end, keeping none of it: whether it stayed within `limit` bytes."""
    seen = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return True  # gone: whatever is answered goes nowhere
        seen += len(message.get("body", b""))
        if seen > limit:
            return False
        if not message.get("more_body", False):
            return True


def _too_large(limit: int) -> TooLarge:
    return TooLarge("the request body is over the limit", {"limit": limit})


async def send_envelope(send: Send, err: DomainError, *, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    """The error envelope (docs/api.md), sent from outside FastAPI's exception handlers. A body it leaves
    unread is drained and dropped by the connection (services.gateway.transport.protocol), never buffered."""
    body = json.dumps(err.envelope()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": HTTP_STATUS[err.code], "headers": headers})
    await send({"type": "http.response.body", "body": body})


def bearer_challenge(reason: str) -> str:
    """RFC 6750's challenge with the reason, so an MCP client shows it instead of starting an OAuth flow."""
    safe = "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\' else " " for ch in reason)[:200]
    return f'Bearer error="invalid_token", error_description="{safe}"'
