"""Writes held for a backup: while a hold lasts, every write request waits at the gateway; reads go on.

An admin starts a hold (`POST /v1/admin/writes/hold` with `seconds`) and ends it (`DELETE`), or it ends by
itself when its seconds are up, so a backup that dies never leaves the API refusing to write. Every gateway
process (each worker of each replica) must hold, not just the one that took the request: each keeps one
connection to the gateway's database LISTENing on `HOLD_CHANNEL`, and the route NOTIFYs it. Each process
answers on `ACK_CHANNEL` once it holds, and the route waits for as many answers as there are listening
connections (named `LISTENER_NAME` in `pg_stat_activity`), so when it answers, every process that was
listening holds new writes. A write already past this point when the hold begins finishes as it would
have; the backup's copy of the databases is one point in time whatever it catches (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid

import asyncpg
from starlette.types import ASGIApp, Receive, Scope, Send

from services.gateway.repository import HoldRepository
from shared.aio import wait_event
from shared.db import Database

log = logging.getLogger("dossier.gateway.holds")
SQL = HoldRepository()

HOLD_CHANNEL = "dossier_write_hold"
ACK_CHANNEL = "dossier_write_hold_ack"
LISTENER_NAME = "dossier-write-hold"
HOLD_PATH = "/v1/admin/writes/hold"
# A request that only reads; any other method is a write and waits out a hold.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# How long the route waits for every gateway process to say it holds (a process that died says nothing).
ACK_SECONDS = 5.0


class WriteHold:
    """This process's hold: until when new writes wait (monotonic), and an event that wakes them."""

    def __init__(self) -> None:
        self._until = 0.0
        self._changed = asyncio.Event()

    def set(self, seconds: float) -> None:
        """Hold for `seconds` from now; 0 releases."""
        self._until = time.monotonic() + seconds if seconds > 0 else 0.0
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def remaining(self) -> float:
        return max(0.0, self._until - time.monotonic())

    async def wait(self) -> None:
        """Return once no hold is in force (released, or its time is up)."""
        while (left := self.remaining()) > 0:
            await wait_event(self._changed, left)


def _payload(hold_id: str, seconds: float) -> str:
    return json.dumps({"id": hold_id, "seconds": seconds})


async def follow_holds(db: Database, hold: WriteHold) -> None:
    """Apply every hold NOTIFYed on the gateway's database to this process, and say so; for ever."""
    while True:
        try:
            async with db.statement() as conn:
                await _listen(conn, hold)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("the write-hold listener lost its database connection; listening again", exc_info=True)
            await asyncio.sleep(1.0)


async def _listen(conn: asyncpg.Connection, hold: WriteHold) -> None:
    lost = asyncio.Event()
    acks: asyncio.Queue[str] = asyncio.Queue()

    def on_hold(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        try:
            notice = json.loads(payload)
            hold.set(float(notice["seconds"]))
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a malformed write hold: %r", payload[:200])
            return
        acks.put_nowait(str(notice.get("id", "")))

    conn.add_termination_listener(lambda _conn: lost.set())
    await SQL.name_listener(conn, name=LISTENER_NAME)
    await conn.add_listener(HOLD_CHANNEL, on_hold)
    while not lost.is_set():
        ack = asyncio.ensure_future(acks.get())
        gone = asyncio.ensure_future(lost.wait())
        try:
            await asyncio.wait({ack, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (ack, gone):
                task.cancel()
        if ack.done() and not ack.cancelled():
            await SQL.notify(conn, channel=ACK_CHANNEL, payload=ack.result())


async def announce(db: Database, seconds: float) -> int:
    """NOTIFY every gateway process of a hold of `seconds` (0: release); returns how many said they hold
    within `ACK_SECONDS` (a release waits for nobody and returns 0)."""
    hold_id = uuid.uuid4().hex
    answered: asyncio.Queue[str] = asyncio.Queue()

    def on_ack(_conn: object, _pid: int, _channel: str, payload: str) -> None:
        answered.put_nowait(payload)

    async with db.statement() as conn:
        await conn.add_listener(ACK_CHANNEL, on_ack)
        try:
            listening = await SQL.count_listeners(conn, name=LISTENER_NAME)
            await SQL.notify(conn, channel=HOLD_CHANNEL, payload=_payload(hold_id, seconds))
            return await _count_acks(answered, hold_id, listening) if seconds > 0 else 0
        finally:
            await conn.remove_listener(ACK_CHANNEL, on_ack)


async def _count_acks(answered: asyncio.Queue[str], hold_id: str, wanted: int) -> int:
    acked = 0
    deadline = time.monotonic() + ACK_SECONDS
    while acked < wanted and (left := deadline - time.monotonic()) > 0:
        try:
            async with asyncio.timeout(left):
                payload = await answered.get()
        except TimeoutError:
            break
        acked += payload == hold_id
    if acked < wanted:
        log.warning("%d of %d gateway processes said they hold writes", acked, wanted)
    return acked


class HeldWrites:
    """Pure ASGI: a write (any method but GET, HEAD, OPTIONS) waits while this process holds; the hold's own
    route never waits (it is how a hold ends)."""

    def __init__(self, app: ASGIApp, *, hold: WriteHold):
        self.app = app
        self.hold = hold

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] not in READ_METHODS
            and self.hold.remaining() > 0
            and scope["path"] != HOLD_PATH
        ):
            await self.hold.wait()
        await self.app(scope, receive, send)
