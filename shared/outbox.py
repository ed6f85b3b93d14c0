"""Transactional outbox (enqueue + relay to JetStream) and inbox (effectively-once consumers).

The relay publishes each row with `Nats-Msg-Id = event id`, so a crash between publish and marking
the row published only causes a duplicate that the stream drops within its duplicate window.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg
import nats
from nats.js import api

from shared.contracts.common import STREAM_NAME, Event, event_subject
from shared.db import Database
from shared.metrics import EVENTS_CONSUMED, OUTBOX_LAG, OUTBOX_PENDING

log = logging.getLogger("dossier.outbox")
NOTIFY_CHANNEL = "dossier_outbox"


def new_event_id() -> str:
    return f"evt_{uuid.uuid4().hex}"


async def enqueue(conn: asyncpg.Connection, *, type: str, scope: str, data: dict[str, Any]) -> Event:
    """Record an event inside the caller's transaction. It becomes visible to the relay at commit."""
    event = Event(id=new_event_id(), type=type, scope=scope, occurred_at=datetime.now(UTC), data=data)
    await conn.execute(
        "INSERT INTO outbox (id, type, scope, payload) VALUES ($1, $2, $3, $4)",
        event.id,
        event.type,
        event.scope,
        event.model_dump(mode="json"),
    )
    await conn.execute(f"NOTIFY {NOTIFY_CHANNEL}")
    return event


class OutboxRelay:
    def __init__(self, db: Database, nc: nats.NATS, *, batch: int = 100, idle_seconds: float = 1.0):
        self._db = db
        self._js = nc.jetstream()
        self._batch = batch
        self._idle = idle_seconds
        self._wake = asyncio.Event()

    async def publish_row(self, row: asyncpg.Record) -> None:
        event = Event.model_validate(row["payload"])
        await self._js.publish(
            event_subject(event.type),
            event.model_dump_json().encode(),
            stream=STREAM_NAME,
            headers={"Nats-Msg-Id": event.id},
        )

    async def flush(self) -> int:
        """Publish one batch of unpublished rows in order; returns how many were published."""
        async with self._db.transaction() as conn:
            rows = await conn.fetch(
                "SELECT seq, id, payload FROM outbox WHERE published_at IS NULL"
                " ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED",
                self._batch,
            )
            for row in rows:
                await self.publish_row(row)
            if rows:
                await conn.execute(
                    "UPDATE outbox SET published_at = now() WHERE seq = ANY($1::bigint[])",
                    [r["seq"] for r in rows],
                )
        return len(rows)

    async def measure_lag(self) -> None:
        """Outbox lag for the metrics: how many committed events wait, and since when."""
        async with self._db.pool.acquire() as conn:
            row = await conn.fetchrow(
                "SELECT count(*) AS pending, coalesce(extract(epoch FROM now() - min(created_at)), 0) AS lag"
                " FROM outbox WHERE published_at IS NULL"
            )
        OUTBOX_PENDING.set(row["pending"])
        OUTBOX_LAG.set(float(row["lag"]))

    async def run(self) -> None:
        def on_notify(*_: object) -> None:
            self._wake.set()

        # The context manager gives the connection back however the loop ends (cancellation included).
        async with self._db.pool.acquire() as listener:
            await listener.add_listener(NOTIFY_CHANNEL, on_notify)
            try:
                await self._relay_forever()
            finally:
                with contextlib.suppress(Exception):
                    await listener.remove_listener(NOTIFY_CHANNEL, on_notify)

    async def _relay_forever(self) -> None:
        while True:
            try:
                published = await self.flush()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("outbox relay failed; retrying")
                published = 0
                await asyncio.sleep(self._idle)
            if published:
                continue
            with contextlib.suppress(asyncpg.PostgresError, OSError):
                await self.measure_lag()
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), self._idle)
            except TimeoutError:
                pass


EventHandler = Callable[[asyncpg.Connection, Event], Awaitable[None]]


async def claim_inbox(conn: asyncpg.Connection, *, consumer: str, event_id: str) -> bool:
    """True the first time `consumer` sees `event_id`; false for a redelivery. Same transaction as the effect."""
    inserted = await conn.fetchval(
        "INSERT INTO inbox (consumer, event_id) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING 1",
        consumer,
        event_id,
    )
    return inserted is not None


async def consume(
    nc: nats.NATS,
    db: Database,
    *,
    consumer: str,
    filter_subject: str,
    handler: EventHandler,
    batch: int = 50,
) -> None:
    """A durable pull consumer: each event's effect and its inbox row commit together, then it is acked."""
    js = nc.jetstream()
    sub = await js.pull_subscribe(
        filter_subject,
        durable=consumer,
        stream=STREAM_NAME,
        config=api.ConsumerConfig(ack_wait=30, max_deliver=20),
    )
    while True:
        try:
            msgs = await sub.fetch(batch, timeout=1.0)
        except (nats.errors.TimeoutError, TimeoutError):
            continue
        for msg in msgs:
            try:
                event = Event.model_validate_json(msg.data)
            except ValueError:
                log.error("dropping a malformed event on %s", msg.subject)
                await msg.term()
                continue
            try:
                async with db.transaction() as conn:
                    if await claim_inbox(conn, consumer=consumer, event_id=event.id):
                        await handler(conn, event)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("consumer %s failed on event %s; it will be redelivered", consumer, event.id)
                EVENTS_CONSUMED.labels(consumer, "failed").inc()
                await msg.nak(delay=1.0)
                continue
            EVENTS_CONSUMED.labels(consumer, "handled").inc()
            await msg.ack()
