"""The gateway's connections: how many it holds (in all and per peer address) and for how long.

uvicorn holds a connection for as long as its client likes: until the headers end, and while a body
trickles in. A client that never finishes (slowloris, or a chunked body that promises more than it
sends) kept a file descriptor for ever, until the process had none left and every request got an empty
reply. `GuardedConnection` (services.gateway.transport.protocol) is uvicorn's protocol with the deadlines it lacks,
held to the caps kept here:

- a request's line and headers must all arrive within `header_timeout` of its first byte (or of the
  connection, for its first request), and an idle keep-alive connection goes after as long;
- a body may pause no longer than `body_timeout` while the server is reading it (not while the
  application is slow to take it, which pauses reading);
- a pause limit restarts with every byte, so a body sent a byte at a time would never meet it; three
  deadlines do not restart. The rest of a body answered before it ended (a refusal: 401, 413) is read and
  dropped for `drain_timeout` from the answer, then the connection is closed. A body read before its
  caller is known to hold a valid token (the route learns it, or the token was refused and a chunked
  body is read to its end) must end within `preauth_body_timeout` of its headers. Every body, once
  read for `body_timeout`, must have averaged `min_body_rate` bytes a second of reading;
- past a deadline the client gets 408 (the error envelope, `timeout`) when no answer to that request
  has begun, and the connection is closed;
- over `max_per_peer` from one address, or over `max_total` in all, a connection is closed to make
  room (`ShedOrder`): first one draining a body already answered (a refusal) or reading one before its
  caller is known to hold a valid token, then one waiting without a request in progress (its
  headers unfinished, or idle) that never carried a valid token, then any other waiting one; the
  longest waiting first within each. A request in progress for a caller with a token is never closed
  for room: only when there is nothing else is the new connection refused, so trickles and half-sent
  headers from many addresses cannot keep a caller with a token out.

Refusals are counted (`dossier_gateway_refused_total`) and logged once an interval, never once each.
The application says whose body a request carries through the `dossier.caller` ASGI extension
(services.gateway.transport.limits).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import Counter
from typing import Protocol

from services.gateway.transport.admission import Tally
from shared.metrics import GATEWAY_CONNECTIONS


class Guarded(Protocol):
    """What the caps need of a connection (services.gateway.transport.protocol's, which imports this module): its
    peer, its place in the shedding order, and the two ways it is ended."""

    peer: str
    shed_line: int | None
    shed_lines_of_peer: list[dict[Guarded, None]]

    def shed(self) -> None: ...

    def enforce(self, now: float) -> None: ...


log = logging.getLogger("dossier.gateway.connections")

# Descriptors kept for what is not a client connection: the database pool, NATS, the object store, logs,
# spooled uploads.
RESERVED_DESCRIPTORS = 512
# The lines of the shed order, the first closed first: bodies drained after their answer or read before
# auth, waiting connections that never carried a valid token, waiting connections that did.
UNKNOWN_BODY, UNKNOWN_WAITING, KNOWN_WAITING = range(3)


class Connections:
    """Every open connection of this process, the caps, and one sweep a moment that enforces deadlines."""

    def __init__(
        self,
        *,
        max_total: int,
        max_per_peer: int,
        header_timeout: float,
        body_timeout: float,
        drain_timeout: float,
        preauth_body_timeout: float,
        min_body_rate: int,
    ):
        self.max_total = max_total
        self.max_per_peer = max_per_peer
        self.header_timeout = header_timeout
        self.body_timeout = body_timeout
        self.drain_timeout = drain_timeout
        self.preauth_body_timeout = preauth_body_timeout
        self.min_body_rate = min_body_rate
        self.open: set[Guarded] = set()
        self.sheddable = ShedOrder()
        self.per_peer: Counter[str] = Counter()
        self._interval = min(1.0, *(t / 4 for t in (header_timeout, body_timeout, drain_timeout, preauth_body_timeout)))
        self._sweep_handle: asyncio.TimerHandle | None = None
        self._over_total = Tally("connections", "connections refused: the gateway holds its most")
        self._shed = Tally("connections_shed", "connections closed to make room for new ones")
        self._over_peer = Tally("connections_per_peer", "connections refused: their address holds its most")
        self.late_headers = Tally("header_timeout", "connections closed: headers not complete in time")
        self.late_body = Tally("body_timeout", "connections closed: a body paused too long")
        self.slow_body = Tally("body_rate", "connections closed: a body arriving under the minimum rate")
        self.late_preauth = Tally("preauth_body_timeout", "connections closed: a body before auth not whole in time")
        self.late_drain = Tally("drain_timeout", "connections closed: a refused body still arriving at its deadline")
        self.idle = Tally("idle_timeout", "idle connections closed")

    def admit(self, conn: Guarded, peer: str, loop: asyncio.AbstractEventLoop) -> bool:
        if self.per_peer[peer] >= self.max_per_peer and not self._make_room(peer):
            self._over_peer.count(f"{peer} holds {self.per_peer[peer]}")
            return False
        if len(self.open) >= self.max_total and not self._make_room(None):
            self._over_total.count(f"{len(self.open)} open")
            return False
        self.open.add(conn)
        self.per_peer[peer] += 1
        self.sheddable.join(conn)
        GATEWAY_CONNECTIONS.set(len(self.open))
        if self._sweep_handle is None:
            self._sweep_handle = loop.call_later(self._interval, self._sweep, loop)
        return True

    def _make_room(self, peer: str | None) -> bool:
        """Closes the first in the shed order (of `peer`'s connections, or of all); False when there is none."""
        victim = self.sheddable.first(peer)
        if victim is None:
            return False
        self._shed.count(f"{len(self.open)} open" if peer is None else f"{peer} holds {self.per_peer[peer]}")
        self.leave(victim, victim.peer)
        victim.shed()
        return True

    def leave(self, conn: Guarded, peer: str) -> None:
        self.sheddable.drop(conn)
        if conn in self.open:
            self.open.discard(conn)
            self.per_peer[peer] -= 1
            if self.per_peer[peer] <= 0:
                del self.per_peer[peer]
                self.sheddable.forget(peer)
            GATEWAY_CONNECTIONS.set(len(self.open))

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        now = time.monotonic()
        for conn in list(self.open):
            conn.enforce(now)
        self._sweep_handle = loop.call_later(self._interval, self._sweep, loop) if self.open else None


class ShedOrder:
    """The connections that may be closed to make room, in the order they go: line by line (`UNKNOWN_BODY`
    first), the longest waiting first within a line; kept for all and for each peer address. Where a
    connection stands is kept on it (`shed_line`, `shed_lines_of_peer`): every request moves its
    connection two or three times, and attributes cost it less than another table would."""

    LINES = 3

    def __init__(self) -> None:
        self._lines: list[dict[Guarded, None]] = [{} for _ in range(self.LINES)]
        self._of_peer: dict[str, list[dict[Guarded, None]]] = {}

    def join(self, conn: Guarded) -> None:
        """A connection just admitted, in no line yet."""
        lines = self._of_peer.get(conn.peer)
        if lines is None:
            lines = self._of_peer[conn.peer] = [{} for _ in range(self.LINES)]
        conn.shed_line, conn.shed_lines_of_peer = None, lines

    def put(self, conn: Guarded, line: int | None) -> None:
        """To the end of `line` (dicts keep insertion order); out of every line for None."""
        was = conn.shed_line
        if was is not None:
            del self._lines[was][conn]
            del conn.shed_lines_of_peer[was][conn]
        conn.shed_line = line
        if line is not None:
            self._lines[line][conn] = None
            conn.shed_lines_of_peer[line][conn] = None

    def drop(self, conn: Guarded) -> None:
        self.put(conn, None)

    def forget(self, peer: str) -> None:
        """A peer address that holds no connection any more."""
        self._of_peer.pop(peer, None)

    def first(self, peer: str | None = None) -> Guarded | None:
        for line in self._lines if peer is None else self._of_peer.get(peer, ()):
            for conn in line:
                return conn
        return None


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
