"""The two JetStream streams: events (`dossier.events.>`) and dead letters (`dossier.dlq.>`).

Publishing to a stream that does not exist fails, so every process that publishes declares the stream it
needs at start-up. On a cluster each stream has `replicas` copies: a write is acknowledged once a majority
holds it.
"""

from __future__ import annotations

from typing import Any

import nats
from nats.js import api
from nats.js.errors import NotFoundError

from shared.contracts.common import EVENT_SUBJECT_PREFIX, STREAM_NAME

DLQ_STREAM = "DOSSIER_DLQ"
DLQ_SUBJECT_PREFIX = "dossier.dlq"


async def ensure_stream(nc: nats.NATS, *, replicas: int = 1) -> None:
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
