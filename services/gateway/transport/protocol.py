"""uvicorn's HTTP protocol held to the gateway's deadlines and connection caps (services.gateway.transport.connections
says which and why): each connection knows its request's phase, whose body it carries, and its place in
the order in which connections are closed to make room."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, ClassVar

from services.gateway.transport.connections import KNOWN_WAITING, UNKNOWN_BODY, UNKNOWN_WAITING, Connections, Guarded
from services.gateway.transport.limits import CALLER_EXTENSION, has_body
from services.gateway.transport.writes import CombinedWrites
from shared.observe import new_request_id

log = logging.getLogger("dossier.gateway.connections")

# A body answered before it was read (a refusal) is read on and dropped, so the client, still sending,
# can read the answer; past this many bytes (or `drain_timeout`) the connection is closed instead.
DRAIN_BYTES = 4 * 1024 * 1024

HEADERS, BODY, BUSY, IDLE, DRAIN = "headers", "body", "busy", "idle", "drain"


class GuardedConnection(CombinedWrites):
    """uvicorn's httptools protocol (with combined writes), admitted by and held to `limits`."""

    limits: ClassVar[Connections]
    _admitted = False
    peer = ""
    _phase = HEADERS
    _since = 0.0
    _drained = 0
    # Whether the current request's caller holds a valid token: None until the application says
    # (services.gateway.transport.limits.tell_connection). `_trusted` once any request of this connection did.
    _caller: bool | None = None
    _trusted = False
    # Its place in the shed order (connections.ShedOrder, which sets both once it is admitted).
    shed_line: int | None = None
    shed_lines_of_peer: list[dict[Guarded, None]]
    # The current body: when its headers ended, the bytes read, and the seconds spent reading it (not
    # those the application paused reading for), as of the sweep at `_checked`.
    _body_since = 0.0
    _received = 0
    _reading = 0.0
    _checked = 0.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peername = transport.get_extra_info("peername")
        self.peer = str(peername[0]) if isinstance(peername, tuple) and peername else ""
        self._admitted = self.limits.admit(self, self.peer, self.loop)
        if not self._admitted:
            transport.abort()
            return
        # What each request's scope carries under CALLER_EXTENSION, made once per connection.
        self._caller_extension: dict[object, object] = {"tell": self._told}
        self._enter(HEADERS)
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._admitted:
            return
        self.limits.leave(self, self.peer)
        super().connection_lost(exc)

    def _enter(self, phase: str) -> None:
        self._phase = phase
        self._since = time.monotonic()
        self._line_up()

    def _line_up(self) -> None:
        """To the end of its line in the shed order, or out of it: a request in progress is closed for
        room only when it carries the body of a caller without a valid token."""
        if self not in self.limits.open:
            return  # closed, or being shed
        phase, line = self._phase, None
        if phase == DRAIN or (phase == BODY and self._caller is False):
            line = UNKNOWN_BODY
        elif phase in (HEADERS, IDLE):
            line = KNOWN_WAITING if self._trusted else UNKNOWN_WAITING
        self.limits.sheddable.put(self, line)

    def _told(self, scope: Any, authenticated: bool) -> None:
        if scope.get("headers") is not self.headers:
            # About a request before a pipelined one, whose body has ended. (uvicorn gives each request a
            # new headers list, which a copy of the scope made on the way to a route still shares.)
            return
        self._caller = authenticated
        self._trusted = self._trusted or authenticated
        if self._phase == BODY:
            self._line_up()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._drained = 0
        self._caller = None
        self.scope["extensions"] = {CALLER_EXTENSION: self._caller_extension}
        self._enter(HEADERS)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if has_body(self.headers):
            # Nothing of a body is read until the application asks for it (uvicorn resumes reading then):
            # a body refused from its headers, or waiting for room in the pre-auth budget, stays in the
            # kernel's buffers, not in this process.
            self.flow.pause_reading()
            self._body_since = self._checked = time.monotonic()
            self._received, self._reading = 0, 0.0
            self._enter(BODY)
        else:
            self._enter(BUSY)

    def on_body(self, body: bytes) -> None:
        if self.cycle is not None and self.cycle.response_complete:
            # Drained: uvicorn drops it, and the drain's deadline does not move.
            self._drained += len(body)
            if self._drained > DRAIN_BYTES and not self.transport.is_closing():
                self.transport.close()
        else:
            self._received += len(body)
            self._since = time.monotonic()
        super().on_body(body)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        # Answered before its body ended (a refusal): nothing is left to wait for.
        self._enter(IDLE if self.cycle is not None and self.cycle.response_complete else BUSY)

    def on_response_complete(self) -> None:
        if self.cycle is not None and self.cycle.body:
            # What arrived with the headers of a body that was never read (a refusal): no one will read it,
            # and a connection that goes on draining the rest must not keep it.
            self.cycle.body = bytearray()
        super().on_response_complete()
        if self._phase == BUSY:
            self._enter(IDLE)
        elif self._phase == BODY:
            self._enter(DRAIN)  # answered before its body ended

    def enforce(self, now: float) -> None:
        """Closes this connection if it is past its phase's deadline (called by the sweep)."""
        if self.transport is None or self.transport.is_closing():
            return
        limits = self.limits
        waited = now - self._since
        if self._phase == HEADERS and waited > limits.header_timeout:
            limits.late_headers.count()
            previous_done = self.cycle is None or self.cycle.response_complete
            self._close("the request's headers did not arrive in time", limits.header_timeout, previous_done)
        elif self._phase == BODY:
            self._enforce_body(now, waited)
        elif self._phase == DRAIN and waited > limits.drain_timeout:
            limits.late_drain.count()
            self.transport.close()  # its answer is sent
        elif self._phase == IDLE and waited > limits.header_timeout:
            limits.idle.count()
            self.transport.close()

    def _enforce_body(self, now: float, waited: float) -> None:
        limits = self.limits
        elapsed, self._checked = now - self._checked, now
        reply = self.cycle is not None and not self.cycle.response_started
        if self._caller is False and now - self._body_since > limits.preauth_body_timeout:
            limits.late_preauth.count()
            self._close("the request's body did not arrive in time", limits.preauth_body_timeout, reply)
        elif self.flow.read_paused:
            self._since = now  # the application is taking its time, not the client
        elif waited > limits.body_timeout:
            limits.late_body.count()
            self._close("the request's body stopped arriving", limits.body_timeout, reply)
        else:
            self._reading += elapsed
            rate = limits.min_body_rate
            if rate and self._reading > limits.body_timeout and self._received < rate * self._reading:
                limits.slow_body.count()
                self._close("the request's body arrives too slowly", limits.body_timeout, reply, rate=rate)

    def shed(self) -> None:
        """Closed to make room: 408 when its request has begun and has no answer yet, else just closed."""
        if self._phase == HEADERS and (self.cycle is None or self.cycle.response_complete):
            self._close("the server made room for other connections", self.limits.header_timeout, True)
        elif self._phase == BODY and self.cycle is not None and not self.cycle.response_started:
            self._close("the server made room for other connections", self.limits.body_timeout, True)
        else:
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """A request the HTTP parser refuses (a malformed request line or chunk, a URL too long) is answered
        in the envelope with its request id, like every other reply, and logged as one JSON line."""
        request_id = new_request_id()
        log.info("malformed HTTP request refused: %s", msg, extra={"request_id": request_id})
        body = json.dumps(
            {"error": {"code": "invalid", "message": "the request is not valid HTTP/1.1", "details": {}}}
        ).encode()
        head = (
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
            + b"content-length: %d\r\nx-request-id: %s\r\nconnection: close\r\n\r\n" % (len(body), request_id.encode())
        )
        self.transport.write(head + body)
        self.transport.close()

    def _close(self, message: str, limit: float, reply: bool, *, rate: int | None = None) -> None:
        if reply:
            details: dict[str, float] = {"limit_seconds": limit}
            if rate is not None:
                details["min_bytes_per_second"] = rate
            body = json.dumps({"error": {"code": "timeout", "message": message, "details": details}}).encode()
            head = (
                b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                + b"content-length: %d\r\nx-request-id: %s\r\nconnection: close\r\n\r\n"
                % (len(body), new_request_id().encode())
            )
            self.transport.write(head + body)
        self.transport.close()


def guarded(limits: Connections) -> type[GuardedConnection]:
    """The protocol class uvicorn builds a connection with, bound to this process's `limits`."""
    return type("Guarded", (GuardedConnection,), {"limits": limits})
