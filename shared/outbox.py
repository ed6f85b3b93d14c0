"""Transactional outbox (enqueue + relay to JetStream) and inbox (effectively-once consumers).

The relay publishes each row with `Nats-Msg-Id = event id`, so a crash between publish and marking
the row published only causes a duplicate that the stream drops within its duplicate window. A row that
fails to publish while the bus is up is retried a few times, then parked with its error; the rows
behind it never wait on it. A published row is kept for DOSSIER_OUTBOX_KEEP_SECONDS (a day by default):
long enough for a restore to publish again what no consumer had applied when the backup was taken
(shared/redelivery.py), and then deleted, so the outbox holds about a day of events however long the
service lives. Parked and unpublished rows are never deleted.

A consumer retries a failing event with growing delays; after the last try the event goes, with its
error, to the dead-letter stream (`dossier.dlq.<consumer>.<event type>`) and is counted. Nothing is
dropped silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import asyncpg
import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.errors import ConnectionClosedError, NoRespondersError, OutboundBufferLimitError
from nats.errors import TimeoutError as NatsTimeoutError
from nats.js import api
from nats.js.errors import NoStreamResponseError, ServiceUnavailableError

from shared import tracing
from shared.aio import wait_event
from shared.contracts.common import STREAM_NAME, Event, EventType, P, event_subject
from shared.db import Database
from shared.metrics import (
    CONSUMER_PENDING,
    DEAD_LETTER_EVENTS,
    DEAD_LETTERS,
    EVENTS_CONSUMED,
    OUTBOX_LAG,
    OUTBOX_PARKED,
    OUTBOX_PENDING,
    from_zero,
)
from shared.observe import HandledLog, bound, request_id_var
from shared.streams import DLQ_STREAM, dead_letter, ensure_dlq_stream

log = logging.getLogger("dossier.outbox")
# One line per consumed event, beside the request lines of shared/bus.py under the same logger.
HANDLED = HandledLog(logging.getLogger("dossier.handled"))
NOTIFY_CHANNEL = "dossier_outbox"

# The delays between a consumer's tries of one event; after the last, the event is dead-lettered.
RETRY_BACKOFF: tuple[float, ...] = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0)
# Tries of one outbox row while the bus is up before the row is parked.
PUBLISH_ATTEMPTS = 3
# How often a consumer reads its backlog and the dead-letter stream's depth for the gauges: two JetStream
# API requests, rare enough to cost nothing on an idle stack.
BACKLOG_SECONDS = 15.0
# What a bus that is down (or slow) looks like; such a failure says nothing about the row. On a cluster
# the stream answers "no response" (503) while it elects a new leader after a node died.
_TRANSIENT = (
    NatsTimeoutError,
    TimeoutError,
    NoRespondersError,
    ConnectionClosedError,
    OutboundBufferLimitError,
    NoStreamResponseError,
    ServiceUnavailableError,
)

# Published rows deleted per statement, and the longest wait between two sweeps of them.
PRUNE_BATCH = 1000
PRUNE_SECONDS = 60.0

# The advisory lock key the relays of one database share (any constant; each service has its own database).
RELAY_LOCK = 0x0D055_1E2

_SUBJECT = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")


def new_event_id() -> str:
    return f"evt_{uuid.uuid4().hex}"


def new_event(event_type: EventType[P], payload: P, *, scope: str) -> Event:
    """An event of `event_type` happening now, in the current request; `payload` is exactly its declared model."""
    if type(payload) is not event_type.payload:
        raise TypeError(f"a {event_type} event carries a {event_type.payload.__name__}, not a {type(payload).__name__}")
    return Event(
        id=new_event_id(),
        type=event_type.name,
        scope=scope,
        occurred_at=datetime.now(UTC),
        data=payload.model_dump(mode="json"),
        request_id=request_id_var.get(),
    )


async def enqueue(conn: asyncpg.Connection, event_type: EventType[P], payload: P, *, scope: str) -> Event:
    """Record an event inside the caller's transaction. It becomes visible to the relay at commit.

    `payload` is the model the event type declares (shared/contracts), exactly: a subscriber reads `data` as that.
    """
    event = new_event(event_type, payload, scope=scope)
    await conn.execute(
        "INSERT INTO outbox (id, type, scope, payload, trace_headers) VALUES ($1, $2, $3, $4, $5)",
        event.id,
        event.type,
        event.scope,
        event.model_dump(mode="json"),
        # The trace this change belongs to: the relay publishes the event inside it (shared/tracing.py).
        tracing.current_headers() if tracing.enabled() else None,
    )
    await conn.execute(f"NOTIFY {NOTIFY_CHANNEL}")
    return event


class OutboxRelay:
    def __init__(
        self,
        db: Database,
        nc: NATS,
        *,
        batch: int = 100,
        idle_seconds: float = 1.0,
        keep_seconds: float = 86400.0,
    ):
        self._db = db
        self._js = nc.jetstream()
        self._batch = batch
        self._idle = idle_seconds
        self._keep = keep_seconds
        self._pruned_at = 0.0
        self._wake = asyncio.Event()

    async def publish_row(self, row: asyncpg.Record) -> None:
        event = Event.model_validate(row["payload"])
        subject = event_subject(event.type)
        # A bad subject is a protocol error that costs the whole connection; refuse it here instead.
        if not _SUBJECT.fullmatch(subject):
            raise ValueError(f"the event type {event.type[:200]!r} does not make a valid subject")
        body = event.model_dump_json().encode()
        traced = row.get("trace_headers") if tracing.enabled() else None
        if traced:
            with tracing.publish_span(subject, traced, message_id=event.id, request_id=event.request_id) as headers:
                await self._js.publish(subject, body, stream=STREAM_NAME, headers={**headers, "Nats-Msg-Id": event.id})
            return
        await self._js.publish(subject, body, stream=STREAM_NAME, headers={"Nats-Msg-Id": event.id})

    async def flush(self) -> int:
        """Publish one batch of unpublished rows in order; returns how many were published or parked."""
        async with self._db.transaction() as conn:
            # One relay of a database publishes at a time (the others stand by): two replicas taking
            # neighbouring batches would publish one aggregate's events out of order.
            if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", RELAY_LOCK):
                return 0
            rows = await conn.fetch(
                "SELECT seq, id, type, payload, attempts, trace_headers FROM outbox WHERE published_at IS NULL AND parked_at IS NULL"
                " ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED",
                self._batch,
            )
            published: list[int] = []
            handled = 0
            for row in rows:
                try:
                    await self.publish_row(row)
                except _TRANSIENT:
                    # The bus is down or slow: keep what is done, try the rest later, blame no row.
                    break
                except Exception as exc:
                    handled += await self._failed(conn, row, exc)
                    continue
                published.append(row["seq"])
            if published:
                await conn.execute("UPDATE outbox SET published_at = now() WHERE seq = ANY($1::bigint[])", published)
        return len(published) + handled

    async def _failed(self, conn: asyncpg.Connection, row: asyncpg.Record, exc: Exception) -> int:
        """Count a failed try of one row; park it after its last. Returns 1 when the row was parked."""
        error = f"{type(exc).__name__}: {exc}"[:2000]
        park = row["attempts"] + 1 >= PUBLISH_ATTEMPTS
        await conn.execute(
            "UPDATE outbox SET attempts = attempts + 1, last_error = $2,"
            " parked_at = CASE WHEN $3 THEN now() END WHERE seq = $1",
            row["seq"],
            error,
            park,
        )
        if park:
            OUTBOX_PARKED.labels(row["type"]).inc()
            log.error("outbox row %s parked after %d tries: %s", row["id"], PUBLISH_ATTEMPTS, error)
            return 1
        log.warning("outbox row %s failed to publish (try %d): %s", row["id"], row["attempts"] + 1, error)
        return 0

    async def prune(self) -> int:
        """Delete the rows published longer ago than the keep period; returns how many."""
        deleted = 0
        while True:
            async with self._db.statement() as conn:
                status = await conn.execute(
                    "DELETE FROM outbox WHERE seq IN (SELECT seq FROM outbox WHERE published_at IS NOT NULL"
                    " AND published_at < now() - make_interval(secs => $1) ORDER BY seq LIMIT $2)",
                    self._keep,
                    PRUNE_BATCH,
                )
            count = int(status.split()[-1])
            deleted += count
            if count < PRUNE_BATCH:
                return deleted

    async def _prune_when_due(self) -> None:
        if time.monotonic() - self._pruned_at < min(PRUNE_SECONDS, max(self._keep, self._idle)):
            return
        self._pruned_at = time.monotonic()
        with contextlib.suppress(asyncpg.PostgresError, OSError):
            await self.prune()

    async def measure_lag(self) -> None:
        """Outbox lag for the metrics: how many committed events wait, and since when."""
        async with self._db.statement() as conn:
            row = await conn.fetchrow(
                "SELECT count(*) AS pending, coalesce(extract(epoch FROM now() - min(created_at)), 0) AS lag"
                " FROM outbox WHERE published_at IS NULL AND parked_at IS NULL"
            )
        OUTBOX_PENDING.set(row["pending"])
        OUTBOX_LAG.set(float(row["lag"]))

    async def run(self) -> None:
        # A committed event wakes the relay at once, also after PostgreSQL restarted; `idle_seconds` is the backstop.
        async with self._db.listening(NOTIFY_CHANNEL, self._wake.set):
            await self._relay_forever()

    async def _relay_forever(self) -> None:
        while True:
            # Cleared before the flush looks: a commit notified during this round (after the flush, while the lag
            # is measured) keeps the event set, and the next round starts at once instead of after the idle poll.
            self._wake.clear()
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
            await self._prune_when_due()
            await wait_event(self._wake, self._idle)


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
    nc: NATS,
    db: Database,
    *,
    consumer: str,
    filter_subject: str,
    handler: EventHandler,
    batch: int = 50,
    backoff: tuple[float, ...] = RETRY_BACKOFF,
    replicas: int = 1,
) -> None:
    """A durable pull consumer: each event's effect and its inbox row commit together, then it is acked.

    A failure is retried after `backoff[n]` seconds; after `len(backoff) + 1` tries the event is
    dead-lettered with its error and acknowledged, so the events behind it are handled.
    """
    from_zero(EVENTS_CONSUMED, [consumer], ["handled", "failed"])
    from_zero(DEAD_LETTERS, [consumer])
    js = nc.jetstream()
    await ensure_dlq_stream(js, replicas=replicas)
    tries = len(backoff) + 1
    sub = await js.pull_subscribe(
        filter_subject,
        durable=consumer,
        stream=STREAM_NAME,
        # The server's own limit sits above ours, so our dead-letter step always runs first.
        # On a cluster the consumer's state (acks, redeliveries) is replicated like the stream.
        config=api.ConsumerConfig(ack_wait=30, max_deliver=tries + 5, num_replicas=replicas),
    )
    measured = 0.0
    while True:
        if time.monotonic() - measured >= BACKLOG_SECONDS:
            measured = time.monotonic()
            await measure_backlog(js, sub, consumer)
        try:
            msgs = await sub.fetch(batch, timeout=1.0)
        except (nats.errors.TimeoutError, TimeoutError):
            continue
        except ServiceUnavailableError:
            # A cluster electing the consumer's leader (a node just died or the consumer is new): wait it out.
            await asyncio.sleep(0.5)
            continue
        for msg in msgs:
            if tracing.enabled():
                # A child of the relay's publish: the request that caused the event, its publish and this
                # handling are one trace.
                with tracing.event_span(msg.subject, msg.headers, consumer=consumer):
                    await _handle(js, db, msg, consumer, handler, backoff, tries)
            else:
                await _handle(js, db, msg, consumer, handler, backoff, tries)


async def _handle(
    js: Any,
    db: Database,
    msg: Msg,
    consumer: str,
    handler: EventHandler,
    backoff: tuple[float, ...],
    tries: int,
) -> None:
    """One delivered event: its effect and inbox row in one transaction, then the ack (or a retry later, or
    the dead-letter stream after the last try)."""
    try:
        event = Event.model_validate_json(msg.data)
    except ValueError as exc:
        await dead_letter(js, msg, consumer=consumer, event_type="unknown", error=f"malformed event: {exc}")
        return
    started = time.perf_counter()
    try:
        outcome = await apply(db, consumer, event, handler)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        tracing.record_failure(exc)
        EVENTS_CONSUMED.labels(consumer, "failed").inc()
        _consumed(consumer, event, "failed", started)
        delivered = msg.metadata.num_delivered or 1
        if delivered >= tries:
            error = f"{type(exc).__name__}: {exc}"
            await dead_letter(js, msg, consumer=consumer, event_type=event.type, error=error)
            return
        delay = backoff[min(delivered - 1, len(backoff) - 1)]
        log.warning(
            "consumer %s failed on event %s (try %d of %d); retrying in %.0fs",
            consumer,
            event.id,
            delivered,
            tries,
            delay,
            exc_info=True,
        )
        await msg.nak(delay=delay)
        return
    EVENTS_CONSUMED.labels(consumer, "handled").inc()
    _consumed(consumer, event, outcome, started)
    await msg.ack()


async def apply(db: Database, consumer: str, event: Event, handler: EventHandler) -> str:
    """Apply one event once: the handler's effect and `consumer`'s inbox row commit together. Returns
    `handled`, or `duplicate` for an event the inbox already holds (nothing runs); a failure raises."""
    # The event's own request id and scope in the context: the handler's lines, and the events it enqueues,
    # carry the request that caused it.
    with bound(request_id=event.request_id, scope=event.scope):
        async with db.transaction() as conn:
            if not await claim_inbox(conn, consumer=consumer, event_id=event.id):
                return "duplicate"
            await handler(conn, event)
            return "handled"


async def measure_backlog(js: Any, sub: Any, consumer: str) -> None:
    """The consumer's undelivered events and the dead-letter stream's depth, for the gauges; a bus that does
    not answer leaves the last figures (the consumer's own fetch reports the outage)."""
    try:
        info = await sub.consumer_info()
        dlq = await js.stream_info(DLQ_STREAM)
    except (nats.errors.Error, TimeoutError):
        return
    CONSUMER_PENDING.labels(consumer).set(info.num_pending or 0)
    DEAD_LETTER_EVENTS.set(dlq.state.messages)


def _consumed(consumer: str, event: Event, outcome: str, started: float) -> None:
    ms = round((time.perf_counter() - started) * 1000, 2)
    fields = {
        "consumer": consumer,
        "event_type": event.type,
        "event_id": event.id,
        "outcome": outcome,
        "duration_ms": ms,
        "request_id": event.request_id,
        "scope": event.scope,
    }
    key = f"{consumer} {event.type}"
    HANDLED.write(
        key, fields, "%s consumed %s %s: %s", consumer, event.type, event.id, outcome, routine=outcome != "failed"
    )
