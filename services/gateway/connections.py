"""The gateway's connections: how many it holds (in all and per peer address) and for how long.

uvicorn holds a connection for as long as its client likes: until the headers end, and while a body
trickles in. A client that never finishes (slowloris, or a chunked body that promises more than it
sends) kept a file descriptor for ever, until the process had none left and every request got an empty
reply. `GuardedConnection` is uvicorn's protocol with the deadlines it lacks and a cap on connections:

- a request's line and headers must all arrive within `header_timeout` of its first byte (or of the
  connection, for its first request), and an idle keep-alive connection goes after as long;
- a body may pause no longer than `body_timeout` while the server is reading it (not while the
  application is slow to take it, which pauses reading);
- past either deadline the client gets 408 (the error envelope, `timeout`) when no answer to that request
  has begun, and the connection is closed;
- a connection over `max_per_peer` from its peer's address is closed as soon as it is accepted, so one
  address cannot take every descriptor;
- over `max_total` in all, the connection that has waited longest without a request in progress (its
  headers still unfinished, or idle between requests) is closed to make room, and only when there is none
  is the new one refused: half-sent headers from many addresses cannot keep a caller elsewhere out.

Refusals are counted (`dossier_gateway_refused_total`) and logged once an interval, never once each.
"""

from __future__ import annotations

import asyncio
import json
import logging
import resource
import time
from collections import Counter
from typing import ClassVar

from services.gateway.admission import Tally
from services.gateway.limits import has_body
from services.gateway.writes import CombinedWrites
from shared.metrics import GATEWAY_CONNECTIONS
from shared.observe import new_request_id

log = logging.getLogger("dossier.gateway.connections")

# Descriptors kept for what is not a client connection: the database pool, NATS, the object store, logs,
# spooled uploads.
RESERVED_DESCRIPTORS = 512
# A body answered before it was read (a refusal) is read on and dropped, so the client, still sending,
# can read the answer; past this many bytes the connection is closed instead.
DRAIN_BYTES = 4 * 1024 * 1024

HEADERS, BODY, BUSY, IDLE = "headers", "body", "busy", "idle"


class Connections:
    """Every open connection of this process, the caps, and one sweep a moment that enforces deadlines."""

    def __init__(self, *, max_total: int, max_per_peer: int, header_timeout: float, body_timeout: float):
        self.max_total = max_total
        self.max_per_peer = max_per_peer
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.open: set[GuardedConnection] = set()
        # Connections without a request in progress, longest waiting first (dicts keep insertion order).
        self.waiting: dict[GuardedConnection, None] = {}
        self.per_peer: Counter[str] = Counter()
        self._interval = min(1.0, header_timeout / 4, body_timeout / 4)
        self._sweep_handle: asyncio.TimerHandle | None = None
        self._over_total = Tally("connections", "connections refused: the gateway holds its most")
        self._shed = Tally("connections_shed", "waiting connections closed to make room for new ones")
        self._over_peer = Tally("connections_per_peer", "connections refused: their address holds its most")
        self.late_headers = Tally("header_timeout", "connections closed: headers not complete in time")
        self.late_body = Tally("body_timeout", "connections closed: a body paused too long")
        self.idle = Tally("idle_timeout", "idle connections closed")

    def admit(self, conn: GuardedConnection, peer: str, loop: asyncio.AbstractEventLoop) -> bool:
        if self.per_peer[peer] >= self.max_per_peer:
            self._over_peer.count(f"{peer} holds {self.per_peer[peer]}")
            return False
        if len(self.open) >= self.max_total:
            if not self.waiting:
                self._over_total.count(f"{len(self.open)} open")
                return False
            oldest = next(iter(self.waiting))
            self._shed.count(f"{len(self.open)} open")
            self.leave(oldest, oldest.peer)
            oldest.shed()
        self.open.add(conn)
        self.per_peer[peer] += 1
        GATEWAY_CONNECTIONS.set(len(self.open))
        if self._sweep_handle is None:
            self._sweep_handle = loop.call_later(self._interval, self._sweep, loop)
        return True

    def leave(self, conn: GuardedConnection, peer: str) -> None:
        self.waiting.pop(conn, None)
        if conn in self.open:
            self.open.discard(conn)
            self.per_peer[peer] -= 1
            if self.per_peer[peer] <= 0:
                del self.per_peer[peer]
            GATEWAY_CONNECTIONS.set(len(self.open))

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        now = time.monotonic()
        for conn in list(self.open):
            conn.enforce(now)
        self._sweep_handle = loop.call_later(self._interval, self._sweep, loop) if self.open else None


class GuardedConnection(CombinedWrites):
    """uvicorn's httptools protocol (with combined writes), admitted by and held to `limits`."""

    limits: ClassVar[Connections]
    _admitted = False
    peer = ""
    _phase = HEADERS
    _since = 0.0
    _drained = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        peername = transport.get_extra_info("peername")
        self.peer = str(peername[0]) if isinstance(peername, tuple) and peername else ""
        self._admitted = self.limits.admit(self, self.peer, self.loop)
        if not self._admitted:
            transport.abort()
            return
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
        waiting = self.limits.waiting
        waiting.pop(self, None)
        if phase in (HEADERS, IDLE) and self in self.limits.open:
            waiting[self] = None  # to the end of the line

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._drained = 0
        self._enter(HEADERS)

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if has_body(self.headers):
            # Nothing of a body is read until the application asks for it (uvicorn resumes reading then):
            # a body refused from its headers, or waiting for room in the pre-auth budget, stays in the
            # kernel's buffers, not in this process.
            self.flow.pause_reading()
            self._enter(BODY)
        else:
            self._enter(BUSY)

    def on_body(self, body: bytes) -> None:
        if self.cycle is not None and self.cycle.response_complete:
            self._drained += len(body)  # uvicorn drops it
            if self._drained > DRAIN_BYTES and not self.transport.is_closing():
                self.transport.close()
        super().on_body(body)
        self._since = time.monotonic()

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

    def enforce(self, now: float) -> None:
        """Closes this connection if it is past its phase's deadline (called by the sweep)."""
        if self.transport is None or self.transport.is_closing():
            return
        waited = now - self._since
        if self._phase == HEADERS and waited > self.limits.header_timeout:
            self.limits.late_headers.count()
            previous_done = self.cycle is None or self.cycle.response_complete
            self._close("the request's headers did not arrive in time", self.limits.header_timeout, previous_done)
        elif self._phase == BODY:
            if self.flow.read_paused:
                self._since = now  # the application is taking its time, not the client
            elif waited > self.limits.body_timeout:
                self.limits.late_body.count()
                reply = self.cycle is not None and not self.cycle.response_started
                self._close("the request's body stopped arriving", self.limits.body_timeout, reply)
        elif self._phase == IDLE and waited > self.limits.header_timeout:
            self.limits.idle.count()
            self.transport.close()

    def shed(self) -> None:
        """Closed to make room: 408 if its request had begun (its headers unfinished), else just closed."""
        if self._phase == HEADERS and (self.cycle is None or self.cycle.response_complete):
            self._close("the server made room for other connections", self.limits.header_timeout, True)
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

    def _close(self, message: str, limit: float, reply: bool) -> None:
        if reply:
            body = json.dumps(
                {"error": {"code": "timeout", "message": message, "details": {"limit_seconds": limit}}}
            ).encode()
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


def fit_descriptors(max_total: int) -> int:
    """Raises this process's open-file limit to its hard limit, and returns the connection cap that fits
    under it (with room for everything that is not a client)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            log.warning("could not raise the open-file limit from %d to %d", soft, target)
    fitting = max(1, soft - RESERVED_DESCRIPTORS)
    if fitting < max_total:
        log.warning(
            "at most %d connections fit under the open-file limit of %d (asked for %d)", fitting, soft, max_total
        )
    return min(max_total, fitting)
