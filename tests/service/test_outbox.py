"""Transactional outbox and inbox through a real crash of the publishing process."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import nats
import pytest

from shared.bus import BusClient
from shared.contracts import publication as c
from shared.contracts.common import STREAM_NAME, Actor, Event, EventType, Model, event_subject
from shared.db import Database
from shared.outbox import OutboxRelay, consume, enqueue
from shared.streams import ensure_stream
from tests.support.databases import listener_session
from tests.support.infra import Infra
from tests.support.probe import probe_until
from tests.support.service import service_process


class Counted(Model):
    """The payload of the events these tests make up."""

    n: int


async def wait_healthy(bus: BusClient) -> None:
    await probe_until(lambda: bus.ping("publication", timeout=0.5), timeout=30)


async def count_received(db: Database, pub_id: str) -> int:
    async with db.pool.acquire() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM received WHERE publication_id = $1", pub_id))


async def test_event_committed_before_a_crash_is_delivered_once(infra: Infra, bus: BusClient, tmp_path: Path) -> None:
    env = infra.settings_env("publication")
    stalled = service_process("publication", env | {"DOSSIER_OUTBOX_RELAY": "false"}, tmp_path)
    stalled.start()
    consumer_db = Database(infra.dsn(f"consumer_{uuid.uuid4().hex[:8]}"))
    consumer_task: asyncio.Task[None] | None = None
    restarted = None
    try:
        await wait_healthy(bus)
        who = Actor(scope=f"s{uuid.uuid4().hex[:8]}", principal="alice")
        pub = await bus.call_raw(
            c.COMMIT, {"title": "A", "body": "committed, not relayed", "workspace_id": "ws_1"}, actor=who
        )

        # Committed with its outbox row, not yet relayed: then the publisher dies hard.
        pub_db = await asyncpg.connect(env["DOSSIER_DATABASE_URL"])
        try:
            pending = await pub_db.fetch(
                "SELECT id, published_at FROM outbox WHERE payload->'data'->>'id' = $1", pub["id"]
            )
        finally:
            await pub_db.close()
        assert len(pending) == 1 and pending[0]["published_at"] is None
        stalled.proc.kill()  # type: ignore[union-attr]
        stalled.proc.wait(10)  # type: ignore[union-attr]

        await consumer_db.connect()
        async with consumer_db.transaction() as conn:
            await conn.execute("CREATE TABLE received (event_id text, publication_id text)")

        async def record(conn: asyncpg.Connection, event: Event) -> None:
            await conn.execute(
                "INSERT INTO received (event_id, publication_id) VALUES ($1, $2)", event.id, event.data["id"]
            )

        nc = bus._nc
        consumer_task = asyncio.create_task(
            consume(
                nc,
                consumer_db,
                consumer=f"test_{uuid.uuid4().hex[:8]}",
                filter_subject=event_subject(c.EVT_COMMITTED),
                handler=record,
            )
        )
        await asyncio.sleep(0.5)
        assert await count_received(consumer_db, pub["id"]) == 0

        restarted = service_process("publication", env, tmp_path)
        restarted.start()
        await probe_until(lambda: count_received(consumer_db, pub["id"]), timeout=30)

        # At-least-once delivery: the same event arrives again under a new message id; the inbox absorbs it.
        js = nc.jetstream()
        event = Event.model_validate(pending_event := await fetch_event(env, pub["id"]))
        await js.publish(
            event_subject(c.EVT_COMMITTED),
            event.model_dump_json().encode(),
            stream=STREAM_NAME,
            headers={"Nats-Msg-Id": f"redelivery-{uuid.uuid4().hex}"},
        )
        await asyncio.sleep(1.5)
        assert await count_received(consumer_db, pub["id"]) == 1
        assert pending_event["id"] == pending[0]["id"]
    finally:
        if consumer_task is not None:
            consumer_task.cancel()
            await asyncio.gather(consumer_task, return_exceptions=True)
        await consumer_db.close()
        stalled.stop()
        if restarted is not None:
            restarted.stop()


async def fetch_event(env: dict[str, str], pub_id: str) -> dict:
    """The relayed outbox row. The relay marks it published when its transaction commits, which can be just
    after a consumer already received the event, so wait for the mark."""

    async def published() -> asyncpg.Record | None:
        conn = await asyncpg.connect(env["DOSSIER_DATABASE_URL"])
        try:
            row = await conn.fetchrow(
                "SELECT payload, published_at FROM outbox WHERE payload->'data'->>'id' = $1", pub_id
            )
        finally:
            await conn.close()
        return row if row is not None and row["published_at"] is not None else None

    row = await probe_until(published, timeout=10)
    payload = row["payload"]
    return payload if isinstance(payload, dict) else json.loads(payload)


async def test_relay_publishing_twice_is_deduplicated_by_message_id(infra: Infra) -> None:
    db = Database(infra.dsn(f"relay_{uuid.uuid4().hex[:8]}"))
    await db.connect()
    nc = await infra.connect()
    try:
        await ensure_stream(nc)
        scope = f"s{uuid.uuid4().hex[:8]}"
        async with db.transaction() as conn:
            event = await enqueue(conn, EventType("test.happened", Counted, "a test's"), Counted(n=1), scope=scope)
        relay = OutboxRelay(db, nc)
        async with db.pool.acquire() as conn:
            row = await conn.fetchrow("SELECT seq, id, payload FROM outbox WHERE id = $1", event.id)
        # A relay that dies between publish and marking the row publishes the same row again.
        await relay.publish_row(row)
        assert await relay.flush() == 1
        assert await relay.flush() == 0
        js = nc.jetstream()
        sub = await js.pull_subscribe(
            event_subject("test.happened"), durable=f"d{uuid.uuid4().hex[:8]}", stream=STREAM_NAME
        )
        seen: list[str] = []
        try:
            while True:
                for msg in await sub.fetch(100, timeout=1.0):
                    seen.append(Event.model_validate_json(msg.data).id)
                    await msg.ack()
        except (nats.errors.TimeoutError, TimeoutError):
            pass
        assert seen.count(event.id) == 1
    finally:
        await nc.close()
        await db.close()


@pytest.mark.parametrize("n", [3])
async def test_enqueue_rolls_back_with_the_change(infra: Infra, n: int) -> None:
    db = Database(infra.dsn(f"rollback_{uuid.uuid4().hex[:8]}"))
    await db.connect()
    try:
        with pytest.raises(RuntimeError):
            async with db.transaction() as conn:
                for i in range(n):
                    await enqueue(conn, EventType("test.rolled_back", Counted, "a test's"), Counted(n=i), scope="s")
                raise RuntimeError("the change failed")
        async with db.pool.acquire() as conn:
            assert await conn.fetchval("SELECT count(*) FROM outbox") == 0
    finally:
        await db.close()


async def test_two_relays_publish_each_event_once_in_commit_order(infra: Infra) -> None:
    """Two processes of one service relay the same outbox: every event once, in the order committed."""
    db = Database(infra.dsn(f"relays_{uuid.uuid4().hex[:8]}"))
    await db.connect()
    nc = await infra.connect()
    relays: list[asyncio.Task[None]] = []
    try:
        await ensure_stream(nc)
        kind = EventType(f"test.relayed_{uuid.uuid4().hex[:8]}", Counted, "a test's")
        committed: list[str] = []
        for i in range(120):
            async with db.transaction() as conn:
                committed.append((await enqueue(conn, kind, Counted(n=i), scope="s")).id)
        # Both start on a full outbox, as after an outage: each could take its own batch.
        relays = [asyncio.create_task(OutboxRelay(db, nc, batch=7, idle_seconds=0.05).run()) for _ in range(2)]

        async def all_published() -> bool:
            async with db.pool.acquire() as conn:
                return bool(await conn.fetchval("SELECT count(*) = 0 FROM outbox WHERE published_at IS NULL"))

        await probe_until(all_published, timeout=30)
        sub = await nc.jetstream().pull_subscribe(
            event_subject(kind), durable=f"d{uuid.uuid4().hex[:8]}", stream=STREAM_NAME
        )
        seen: list[str] = []
        while len(seen) < len(committed):
            seen += [Event.model_validate_json(m.data).id for m in await sub.fetch(200, timeout=5.0)]
        assert seen == committed
    finally:
        for task in relays:
            task.cancel()
        await asyncio.gather(*relays, return_exceptions=True)
        await nc.close()
        await db.close()


async def test_published_rows_are_deleted_after_the_keep_period_and_others_stay(infra: Infra) -> None:
    """The outbox holds the keep period's events, not every event the service ever sent: published rows
    older than it go; rows published within it, waiting rows and parked rows stay."""
    db = Database(infra.dsn(f"prune_{uuid.uuid4().hex[:8]}"))
    await db.connect()
    nc = await infra.connect()
    try:
        await ensure_stream(nc)
        kind = EventType(f"test.pruned_{uuid.uuid4().hex[:8]}", Counted, "a test's")
        ids = []
        for i in range(5):
            async with db.transaction() as conn:
                ids.append((await enqueue(conn, kind, Counted(n=i), scope="s")).id)
        relay = OutboxRelay(db, nc, keep_seconds=3600)
        assert await relay.flush() == 5
        async with db.pool.acquire() as conn:
            # Two published a day ago, one parked a day ago, one waiting since a day ago, one just published.
            await conn.execute("UPDATE outbox SET published_at = now() - interval '1 day' WHERE id = ANY($1)", ids[:2])
            await conn.execute(
                "UPDATE outbox SET published_at = NULL, parked_at = now() - interval '1 day' WHERE id = $1", ids[2]
            )
            await conn.execute(
                "UPDATE outbox SET published_at = NULL, created_at = now() - interval '1 day' WHERE id = $1", ids[3]
            )
        assert await relay.prune() == 2
        async with db.pool.acquire() as conn:
            kept = {r["id"] for r in await conn.fetch("SELECT id FROM outbox")}
        assert kept == set(ids[2:])
        assert await relay.prune() == 0
    finally:
        await nc.close()
        await db.close()


@contextlib.asynccontextmanager
async def relay_setting(infra: Infra, name: str) -> AsyncIterator[tuple[Database, nats.NATS, EventType[Counted]]]:
    """A database of its own for a relay, a NATS connection with the event stream, and an event kind."""
    db = Database(infra.dsn(f"{name}_{uuid.uuid4().hex[:8]}"))
    await db.connect()
    nc = await infra.connect()
    try:
        await ensure_stream(nc)
        yield db, nc, EventType(f"test.{name}_{uuid.uuid4().hex[:8]}", Counted, "a test's")
    finally:
        await nc.close()
        await db.close()


async def published(db: Database, event_id: str) -> None:
    """Waits (10 s at most) until the relay has published the outbox's event `event_id`."""

    async def done() -> bool:
        async with db.pool.acquire() as conn:
            return bool(await conn.fetchval("SELECT published_at FROM outbox WHERE id = $1", event_id))

    await probe_until(done, timeout=10)


async def stopped(task: asyncio.Task[None] | None) -> None:
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_relay_whose_listening_session_ends_is_woken_by_the_next_commit(infra: Infra) -> None:
    """After its session for NOTIFY ends (PostgreSQL restarted, an operator's terminate), a relay still
    relays a commit at once, not at its next idle poll (here a minute away)."""
    relay: asyncio.Task[None] | None = None
    async with relay_setting(infra, "relisten") as (db, nc, kind):
        try:

            async def committed_and_relayed(n: int) -> None:
                async with db.transaction() as conn:
                    event = await enqueue(conn, kind, Counted(n=n), scope="s")
                await published(db, event.id)

            relay = asyncio.create_task(OutboxRelay(db, nc, idle_seconds=60).run())
            first = await probe_until(lambda: listener_session(db), timeout=30)
            await committed_and_relayed(1)
            async with db.pool.acquire() as conn:
                assert await conn.fetchval("SELECT pg_terminate_backend($1, 5000)", first)
            await probe_until(lambda: listener_session(db), timeout=30)
            await committed_and_relayed(2)
        finally:
            await stopped(relay)


class HeldLag(OutboxRelay):
    """A relay whose lag measure (the step after a flush that found nothing) waits for the test's word."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.measuring, self.go_on = asyncio.Event(), asyncio.Event()

    async def measure_lag(self) -> None:
        self.measuring.set()
        await self.go_on.wait()
        await super().measure_lag()

    async def woken(self) -> bool:
        return self._wake.is_set()


async def test_a_commit_notified_while_the_relay_finishes_a_round_is_relayed_at_once(infra: Infra) -> None:
    """A commit whose notification arrives after the relay's flush looked, while the round goes on, starts
    the next round at once: it does not wait out the idle poll (here a minute)."""
    relay_task: asyncio.Task[None] | None = None
    async with relay_setting(infra, "midround") as (db, nc, kind):
        try:
            relay = HeldLag(db, nc, idle_seconds=60)
            relay_task = asyncio.create_task(relay.run())
            await probe_until(lambda: listener_session(db), timeout=30)
            async with asyncio.timeout(10):
                await relay.measuring.wait()  # the first round's flush found nothing
            async with db.transaction() as conn:
                event = await enqueue(conn, kind, Counted(n=1), scope="s")
            await probe_until(relay.woken, timeout=10)
            relay.go_on.set()
            await published(db, event.id)
        finally:
            await stopped(relay_task)
