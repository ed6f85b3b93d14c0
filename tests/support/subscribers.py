"""Reading events as an outside subscriber does: a pull consumer named `ext-*` on the outside mirror.

The outside credentials may make only consumers whose name is in the API subject (shared.outside), so
nats-py's ordered consumers (nameless) are refused; this is the smallest form that is allowed.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import nats
from nats.js import api

from shared.contracts.common import STREAM_NAME


async def ext_subscription(nc: nats.NATS, subject: str) -> Any:
    """A pull subscription from the stream's first event; the server drops the consumer a minute after
    its last use."""
    config = api.ConsumerConfig(deliver_policy=api.DeliverPolicy.ALL, inactive_threshold=60.0)
    return await nc.jetstream().pull_subscribe(
        subject, durable=f"ext-{uuid.uuid4().hex[:12]}", stream=STREAM_NAME, config=config
    )


async def read_until_quiet(sub: Any, quiet: float = 1.0) -> list[dict[str, Any]]:
    """Every event the subscription holds, until none arrives for `quiet` seconds."""
    events: list[dict[str, Any]] = []
    while True:
        try:
            batch = await sub.fetch(256, timeout=quiet)
        except (nats.errors.TimeoutError, TimeoutError):
            # nats-py raises either when nothing came: its own, or asyncio's once the deadline passed mid-fetch.
            return events
        for msg in batch:
            events.append(json.loads(msg.data))
            await msg.ack()
