"""After a restore: the events no consumer had applied yet, published again from the outboxes.

A backup copies the databases at one point in time but not the event stream: a restored stack starts with
an empty one. An event enqueued before that point and not yet published is still an unpublished outbox row,
and its relay publishes it. An event published before that point but not yet applied by its consumer
(the workspace's durable consumers, shared.natsauth.CONSUMES) was only on the stream; its outbox row says
published. For each such row, that is one whose consumer's inbox (in the workspace's database) does not
hold its id, this clears `published_at`, so the relay publishes it again under the same id and the
consumer applies it once (the inbox drops what it had applied). Rows of types no consumer follows, and
parked rows, stay as they are. A relay deletes a row DOSSIER_OUTBOX_KEEP_SECONDS (a day) after it was
published (shared/outbox.py): an event its consumer had still not applied a day after it was published,
when the backup was taken, is not published again.

`python -m shared.redelivery --inbox DSN OUTBOX_DSN...`: the workspace's database, then every database
with an outbox (each service's, the gateway's included); run it on the restored databases before the
services start. docs/operations.md, "Backup and restore".
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

import asyncpg

from shared.contracts.common import EVENT_SUBJECT_PREFIX
from shared.natsauth import workspace_durables

# Ids asked about at once: the rows of a long history are compared with the inbox a slice at a time.
SLICE = 10_000


def followed_types(prefix: str = "workspace") -> dict[str, str]:
    """Event type → the durable consumer that applies it."""
    return {
        subject.removeprefix(f"{EVENT_SUBJECT_PREFIX}."): durable
        for durable, subject in workspace_durables(prefix).items()
    }


async def unapplied(inbox: asyncpg.Connection, durable: str, event_ids: list[str]) -> list[str]:
    """The ids among `event_ids` that `durable` has not applied."""
    rows = await inbox.fetch(
        "SELECT id FROM unnest($1::text[]) AS id"
        " WHERE NOT EXISTS (SELECT 1 FROM inbox WHERE consumer = $2 AND event_id = id)",
        event_ids,
        durable,
    )
    return [row["id"] for row in rows]


async def redeliver_outbox(inbox: asyncpg.Connection, outbox: asyncpg.Connection, prefix: str = "workspace") -> int:
    """Mark this outbox's published, unapplied events for publishing again; returns how many."""
    if await outbox.fetchval("SELECT to_regclass('outbox')") is None:
        return 0  # a database whose service never started
    marked = 0
    for event_type, durable in followed_types(prefix).items():
        rows = await outbox.fetch(
            "SELECT id FROM outbox WHERE type = $1 AND published_at IS NOT NULL AND parked_at IS NULL ORDER BY seq",
            event_type,
        )
        ids = [row["id"] for row in rows]
        for start in range(0, len(ids), SLICE):
            missing = await unapplied(inbox, durable, ids[start : start + SLICE])
            if missing:
                await outbox.execute("UPDATE outbox SET published_at = NULL WHERE id = ANY($1::text[])", missing)
                marked += len(missing)
    return marked


async def redeliver(inbox_dsn: str, outbox_dsns: Sequence[str], prefix: str = "workspace") -> dict[str, int]:
    """Every outbox's unapplied events marked again; `{database: rows marked}`."""
    inbox = await asyncpg.connect(inbox_dsn)
    try:
        marked: dict[str, int] = {}
        for dsn in outbox_dsns:
            outbox = await asyncpg.connect(dsn)
            try:
                async with outbox.transaction():
                    database = str(await outbox.fetchval("SELECT current_database()"))
                    marked[database] = await redeliver_outbox(inbox, outbox, prefix)
            finally:
                await outbox.close()
        return marked
    finally:
        await inbox.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.redelivery", description=__doc__.split("\n\n")[0])
    parser.add_argument("--inbox", required=True, metavar="DSN", help="the workspace's database (its inbox)")
    parser.add_argument("--consumer-prefix", default="workspace", help="DOSSIER_CONSUMER_PREFIX of the workspace")
    parser.add_argument("outboxes", nargs="+", metavar="OUTBOX_DSN", help="each database with an outbox")
    args = parser.parse_args(argv)
    marked = asyncio.run(redeliver(args.inbox, args.outboxes, args.consumer_prefix))
    for database, count in marked.items():
        print(f"{database}: {count} events to publish again", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
