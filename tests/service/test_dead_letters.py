"""Poison events and poison outbox rows on real NATS and PostgreSQL: neither blocks what comes behind it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import nats
import pytest
from prometheus_client import REGISTRY

from shared.contracts.common import STREAM_NAME, Event, EventType, Model, event_subject
from shared.db import Database
from shared.outbox import OutboxRelay, consume, enqueue
from shared.streams import DLQ_STREAM, dlq_subject, ensure_stream
from tests.support.infra import Infra
from tests.support.probe import probe_until


@pytest.fixture
async def nc(infra: Infra) -> AsyncIterator[nats.NATS]:
    conn = await infra.connect()
    await ensure_stream(conn)
    try:
        yield conn
    finally:
        await conn.close()


@pytest.fixture
async def db(infra: Infra) -> AsyncIterator[Database]:
    database = Database(infra.dsn(f"dlq_{uuid.uuid4().hex[:10]}"))
    await database.connect()
    try:
        yield database
    finally:
        await database.close()


def dead_letters(consumer: str) -> float:
    return REGISTRY.get_sample_value("dossier_dead_letters_total", {"consumer": consumer}) or 0.0


class Numbered(Model):
    n: int


class Blob(Model):
    blob: str


def parked(kind: str) -> float:
    return REGISTRY.get_sample_value("dossier_outbox_parked_total", {"type": kind}) or 0.0


def event(kind: str, **data: object) -> Event:
    return Event(id=f"evt_{uuid.uuid4().hex}", type=kind, scope="s", occurred_at=datetime.now(UTC), data=data)


async def dead_lettered(nc: nats.NATS, subject: str) -> dict[str, object] | None:
    js = nc.jetstream()
    try:
        msg = await js.get_last_msg(DLQ_STREAM, subject)
    except Exception:
        return None
    return dict(json.loads(msg.data))


async def test_a_poison_event_is_dead_lettered_while_the_next_is_handled(nc: nats.NATS, db: Database) -> None:
    kind = f"t{uuid.uuid4().hex[:8]}.thing"
    consumer = f"dlq_{uuid.uuid4().hex[:8]}"
    async with db.transaction() as conn:
        await conn.execute("CREATE TABLE received (event_id text PRIMARY KEY, n int)")
    attempts: list[str] = []

    async def handle(conn: asyncpg.Connection, evt: Event) -> None:
        if evt.data.get("poison"):
            attempts.append(evt.id)
            raise ValueError("this event can never be handled")
        await conn.execute("INSERT INTO received (event_id, n) VALUES ($1, $2)", evt.id, evt.data["n"])

    js = nc.jetstream()
    poison, good = event(kind, poison=True), event(kind, n=2)
    for evt in (poison, good):
        await js.publish(event_subject(kind), evt.model_dump_json().encode(), stream=STREAM_NAME)
    await js.publish(event_subject(kind), b"not an event", stream=STREAM_NAME)

    async def received() -> list[str]:
        async with db.pool.acquire() as conn:
            return [r["event_id"] for r in await conn.fetch("SELECT event_id FROM received")]

    task = asyncio.create_task(
        consume(nc, db, consumer=consumer, filter_subject=event_subject(kind), handler=handle, backoff=(0.5, 1.0))
    )
    try:
        assert await probe_until(received, timeout=30) == [good.id]
        assert dead_letters(consumer) <= 1, "the poison event was still being retried when the next was handled"
        letter = await probe_until(lambda: dead_lettered(nc, dlq_subject(consumer, kind)), timeout=30)
        assert letter["consumer"] == consumer and letter["deliveries"] == 3
        assert "ValueError: this event can never be handled" in str(letter["error"])
        assert json.loads(str(letter["event"]))["id"] == poison.id
        assert attempts == [poison.id] * 3, "tried once, then twice more after the backoff"
        malformed = await probe_until(lambda: dead_lettered(nc, dlq_subject(consumer, "unknown")), timeout=30)
        assert malformed["event"] == "not an event" and "malformed" in str(malformed["error"])
        assert dead_letters(consumer) == 2
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_poison_outbox_row_is_parked_while_the_rows_behind_it_publish(nc: nats.NATS, db: Database) -> None:
    kind = f"t{uuid.uuid4().hex[:8]}.thing"
    async with db.transaction() as conn:
        bad_subject = event("bad type", n=0)
        await conn.execute(
            "INSERT INTO outbox (id, type, scope, payload) VALUES ($1, $2, 's', $3)",
            bad_subject.id,
            bad_subject.type,
            bad_subject.model_dump(mode="json"),
        )
        too_large = await enqueue(
            conn, EventType(kind, Blob, "too large"), Blob(blob="x" * (9 * 1024 * 1024)), scope="s"
        )
        good = await enqueue(conn, EventType(kind, Numbered, "fits"), Numbered(n=1), scope="s")

    sub = await nc.jetstream().subscribe(event_subject(kind), ordered_consumer=True)
    relay = OutboxRelay(db, nc, idle_seconds=0.1)
    task = asyncio.create_task(relay.run())
    try:
        msg = await sub.next_msg(timeout=30)
        assert json.loads(msg.data)["id"] == good.id

        async def parked_rows() -> list[asyncpg.Record]:
            async with db.pool.acquire() as conn:
                rows = await conn.fetch("SELECT id, attempts, last_error FROM outbox WHERE parked_at IS NOT NULL")
            return rows if len(rows) == 2 else []

        rows = {r["id"]: r for r in await probe_until(parked_rows, timeout=30)}
        assert rows[bad_subject.id]["attempts"] == 3 and "valid subject" in rows[bad_subject.id]["last_error"]
        assert rows[too_large.id]["attempts"] == 3 and "payload" in rows[too_large.id]["last_error"].lower()
        assert parked("bad type") >= 1 and parked(kind) == 1
        async with db.pool.acquire() as conn:
            assert await conn.fetchval("SELECT published_at IS NOT NULL FROM outbox WHERE id = $1", good.id)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await sub.unsubscribe()
