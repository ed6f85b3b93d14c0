"""The two JetStream streams: events (`dossier.events.>`) and dead letters (`dossier.dlq.>`).

Publishing to a stream that does not exist fails, so every process that publishes declares the stream it
needs at start-up. On a cluster each stream has `replicas` copies: a write is acknowledged once a majority
holds it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.js import api
from nats.js.errors import NotFoundError

from shared.contracts.common import EVENT_SUBJECT_PREFIX, STREAM_NAME
from shared.metrics import DEAD_LETTERS

log = logging.getLogger("dossier.outbox")

DLQ_STREAM = "DOSSIER_DLQ"
DLQ_SUBJECT_PREFIX = "dossier.dlq"


async def ensure_stream(nc: NATS, *, replicas: int = 1) -> None:
    """The event stream; its duplicate window drops an outbox row published twice (Nats-Msg-Id)."""
    config = api.StreamConfig(
        name=STREAM_NAME,
        subjects=[f"{EVENT_SUBJECT_PREFIX}.>"],
        storage=api.StorageType.FILE,
        duplicate_window=120.0,
        num_replicas=replicas,
    )
    await _declare(nc.jetstream(), config)


async def ensure_dlq_stream(js: Any, *, replicas: int = 1) -> None:
    config = api.StreamConfig(
        name=DLQ_STREAM, subjects=[f"{DLQ_SUBJECT_PREFIX}.>"], storage=api.StorageType.FILE, num_replicas=replicas
    )
    await _declare(js, config)


async def _declare(js: Any, config: api.StreamConfig) -> None:
    try:
        await js.stream_info(config.name)
    except NotFoundError:
        try:
            await js.add_stream(config)
        except Exception:
            # Another process created it between our look and our add; that is the same outcome.
            await js.stream_info(config.name)


def dlq_subject(consumer: str, event_type: str) -> str:
    """`dossier.dlq.<consumer>.<event type>`; a type that is not a clean token is named `unknown`."""
    safe = event_type if all(part.isidentifier() for part in event_type.split(".")) else "unknown"
    return f"{DLQ_SUBJECT_PREFIX}.{consumer}.{safe}"


async def dead_letter(js: Any, msg: Any, *, consumer: str, event_type: str, error: str) -> None:
    """Keep the event and its error on the dead-letter stream, count it, then let the consumer move on."""
    body = {
        "consumer": consumer,
        "subject": msg.subject,
        "error": error[:4000],
        "deliveries": msg.metadata.num_delivered,
        "event": msg.data.decode("utf-8", "replace"),
    }
    # If this publish fails the message is not acked: it comes back, and dead-lettering is tried again.
    await js.publish(dlq_subject(consumer, event_type), json.dumps(body).encode(), stream=DLQ_STREAM)
    DEAD_LETTERS.labels(consumer).inc()
    log.error("consumer %s dead-lettered an event on %s: %s", consumer, msg.subject, error)
    await msg.term()


async def declare_streams(servers: list[str], options: dict[str, Any], replicas: int, timeout: float = 60.0) -> None:
    """Create the event and dead-letter streams with `replicas` copies once the cluster has a leader."""

    async def declare(nc: NATS) -> None:
        await ensure_stream(nc, replicas=replicas)
        js = nc.jetstream()
        await ensure_dlq_stream(js, replicas=replicas)
        await js.stream_info(DLQ_STREAM)

    await with_leader(servers, options, declare, timeout)


async def with_leader(
    servers: list[str], options: dict[str, Any], declare: Callable[[NATS], Awaitable[None]], timeout: float
) -> None:
    """A fresh cluster elects its JetStream meta leader a few seconds after its nodes meet; until then
    stream creation fails, so this retries until the deadline instead of letting every service crash."""
    deadline = time.monotonic() + timeout
    while True:
        nc = None
        try:
            nc = await nats.connect(servers, connect_timeout=2, max_reconnect_attempts=1, **options)
            await declare(nc)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
        finally:
            if nc is not None:
                await nc.close()
