"""After a restore, the outbox rows whose events no consumer applied are published again, and only those."""

from __future__ import annotations

import json
import uuid

import asyncpg

from shared.db import Database, ensure_database
from shared.redelivery import followed_types, redeliver
from tests.support.infra import Infra


async def test_only_published_events_no_consumer_applied_are_marked_again(infra: Infra) -> None:
    prefix = f"ws{uuid.uuid4().hex[:6]}"
    followed = followed_types(prefix)
    committed, durable = next((t, d) for t, d in followed.items() if t == "publication.committed")
    inbox_dsn, outbox_dsn = (infra.dsn(f"redelivery_{uuid.uuid4().hex[:10]}") for _ in range(2))
    bare_dsn = infra.dsn(f"redelivery_{uuid.uuid4().hex[:10]}")
    for dsn in (inbox_dsn, outbox_dsn):
        db = Database(dsn)
        await db.connect()  # the shared migrations: outbox and inbox
        await db.close()
    await ensure_database(bare_dsn)  # a database that has no outbox at all
    rows = {
        "applied": (committed, "now()", None),
        "unapplied": (committed, "now()", None),
        "unpublished": (committed, None, None),
        "parked": (committed, "now()", "now()"),
        "nobody follows": ("run.completed", "now()", None),
    }
    outbox = await asyncpg.connect(outbox_dsn)
    inbox = await asyncpg.connect(inbox_dsn)
    try:
        for name, (event_type, published, parked) in rows.items():
            await outbox.execute(
                "INSERT INTO outbox (id, type, scope, payload, published_at, parked_at)"
                f" VALUES ($1, $2, 's', $3, {published or 'NULL'}, {parked or 'NULL'})",
                name,
                event_type,
                json.dumps({}),
            )
        await inbox.execute("INSERT INTO inbox (consumer, event_id) VALUES ($1, 'applied')", durable)

        marked = await redeliver(inbox_dsn, [outbox_dsn, bare_dsn], prefix)

        assert sorted(marked.values()) == [0, 1]
        unpublished = {r["id"] for r in await outbox.fetch("SELECT id FROM outbox WHERE published_at IS NULL")}
        assert unpublished == {"unapplied", "unpublished"}
        # Again: nothing more to mark (the row waits for its relay).
        assert sorted((await redeliver(inbox_dsn, [outbox_dsn], prefix)).values()) == [0]
    finally:
        await outbox.close()
        await inbox.close()
