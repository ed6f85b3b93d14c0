"""Scale-out of the local stack: a NATS cluster (`DOSSIER_NATS_CLUSTER`) and replicas of every process
(`DOSSIER_REPLICAS`), as docs/operations.md names them.

Replica 1 of a service keeps the plain name (`workspace`, `pids/workspace.pid`); replica n is
`workspace.n` (`pids/workspace.n.pid`, `health/workspace.n.json`, `logs/workspace.n.log`). NATS nodes
are `nats`, `nats.2`, `nats.3`. Gateway replica n listens on `DOSSIER_HTTP_PORT + n - 1`, with
`DOSSIER_GATEWAY_WORKERS` processes sharing that port: `gateway`, `gateway-w2`, … (services/gateway/workers.py).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats

from shared.outside import ensure_outside_stream
from shared.streams import DLQ_STREAM, ensure_dlq_stream, ensure_stream

# The stream declarations need a user allowed to create both streams: the one service that consumes events.
STREAM_DECLARER = "workspace"


def process_name(service: str, replica: int) -> str:
    return service if replica == 1 else f"{service}.{replica}"


def worker_name(process: str, worker: int) -> str:
    """Worker 1 of a gateway keeps its process's name (`gateway`, `gateway.2`); worker w is `<name>-w<w>`."""
    return process if worker == 1 else f"{process}-w{worker}"


def count_setting(env: dict[str, str], name: str, allowed: tuple[int, ...]) -> int:
    raw = env.get(name) or "1"
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value not in allowed:
        raise SystemExit(f"{name}={raw!r}: expected one of {', '.join(map(str, allowed))}")
    return value


async def declare_streams(servers: list[str], options: dict[str, Any], replicas: int, timeout: float = 60.0) -> None:
    """Create the event and dead-letter streams with `replicas` copies once the cluster has a leader."""

    async def declare(nc: nats.NATS) -> None:
        await ensure_stream(nc, replicas=replicas)
        js = nc.jetstream()
        await ensure_dlq_stream(js, replicas=replicas)
        await js.stream_info(DLQ_STREAM)

    await _with_leader(servers, options, declare, timeout)


async def declare_outside_stream(
    servers: list[str], options: dict[str, Any], replicas: int, timeout: float = 60.0
) -> None:
    """The outside subscribers' mirror of the event stream (shared.outside), as many copies as the stream."""

    async def declare(nc: nats.NATS) -> None:
        await ensure_outside_stream(nc, replicas=replicas)

    await _with_leader(servers, options, declare, timeout)


async def _with_leader(
    servers: list[str], options: dict[str, Any], declare: Callable[[nats.NATS], Awaitable[None]], timeout: float
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
