"""Pure-ASGI guards that run before FastAPI sees a request: the body-size limit, then the bearer token.

FastAPI parses a JSON body before it solves a route's dependencies, so both checks live here, outside it:
an unauthenticated caller can never make the gateway parse a body, and no body over its limit is parsed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from shared.errors import HTTP_STATUS, DomainError, TooLarge

# The only routes whose body streams (multipart uploads, bounded per file while they stream); every other
# body gets the JSON limit. Matched exactly: `/v1/assets/import` takes JSON like any other route.
STREAMED_ROUTES = frozenset({("POST", "/v1/assets"), ("POST", "/v1/artifacts")})


class BodyTooLarge(TooLarge):
    """A streamed (multipart) body went over its limit while a route was reading it."""


class BodyLimit:
    """`limit_for(method, path)` names a request's byte limit, and whether its body may stream.

    A body that may not stream (JSON, text) is read whole, up to the limit, before the application runs:
    over it, the answer is 413 `too_large` whether the body was sent with a Content-Length or chunked.
    A streamed body (a multipart upload, whose route hashes and spools it) is counted as it is read.
    """

    def __init__(self, app: ASGIApp, limit_for: Callable[[str, str], tuple[int, bool]]):
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared, chunked = _framing(scope["headers"])
        if declared is None and not chunked:
            # No Content-Length and no Transfer-Encoding: HTTP/1.1 says there is no body to read or bound.
            await self.app(scope, receive, send)
            return
        limit, streams = self.limit_for(scope["method"], scope["path"])
        if declared is not None and declared.isdigit() and int(declared) > limit:
            await send_envelope(send, TooLarge("the request body is over the limit", {"limit": limit}))
            return
        if streams:
            await self._streamed(scope, receive, send, limit)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body was complete
            body += message.get("body", b"")
            if len(body) > limit:
                await send_envelope(send, TooLarge("the request body is over the limit", {"limit": limit}))
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(bytes(body), receive), send)

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


def _framing(headers: list[tuple[bytes, bytes]]) -> tuple[bytes | None, bool]:
    """The request's Content-Length value, and whether it declares a Transfer-Encoding."""
    declared, chunked = None, False
    for name, value in headers:
        if name == b"content-length":
            declared = value
        elif name == b"transfer-encoding":
            chunked = True
    return declared, chunked


def has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether a request sent a body at all: a Content-Length other than 0, or a Transfer-Encoding."""
    declared, chunked = _framing(headers)
    return chunked or (declared is not None and declared != b"0")


def _replay(body: bytes, receive: Receive) -> Receive:
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class Authenticate:
    """Every `/v1` route but `/v1/health` needs a bearer token, checked before the application runs.

    `check(path, authorization)` returns the actor (None on admin routes) or raises `Unauthenticated`;
    the actor is left in the request's state for the `current_actor` dependency.
    """

    def __init__(self, app: ASGIApp, check: Callable[[str, str | None], Awaitable[Any]]):
        self.app = app
        self.check = check

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith("/v1/") or path == "/v1/health":
            await self.app(scope, receive, send)
            return
        header = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                header = value  # the last one, as a dict of the headers would keep
        try:
            actor = await self.check(path, header.decode("latin-1") if header is not None else None)
        except DomainError as err:
            await send_envelope(send, err)
            return
        scope.setdefault("state", {})["actor"] = actor
        await self.app(scope, receive, send)


async def send_envelope(send: Send, err: DomainError) -> None:
    """The error envelope of CONTRACT.md, sent from outside FastAPI's exception handlers."""
    body = json.dumps(err.envelope()).encode()
    await send(
        {
            "type": "http.response.start",
            "status": HTTP_STATUS[err.code],
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
