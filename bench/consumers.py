"""Events handled per second by a durable pull consumer, and how long one event waits on an idle consumer: the
runtime's own (shared/outbox.py `consume`) against FastStream's JetStream pull subscriber, configured as the
runtime would configure it.

Both read the same events from a stream of their own on a local nats-server (JetStream, no auth), with the
same consumer config (ack_wait 30 s, batches of 50; `faststream1` fetches one at a time, the only way its
pull subscriber applies events in order: it handles a batch's messages concurrently), parse each into its payload model
(shared/events.py `handler_for`), apply it through `shared.outbox.apply` against a stand-in database whose
transaction does nothing (so only the consumer's own cost is measured), and ack it. FastStream's broker has
the runtime's options (no logger, its Prometheus middleware) and does not declare the stream: its default
declaration updates a stream whose config differs, which no service user may do.

`python bench/consumers.py [N]` prints the rate of each (N events waiting, best of three rounds) and the median
time from publishing one event to its rule (of LONE events, one at a time). Never part of the test run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nats
from faststream import AckPolicy
from faststream.nats import JStream, NatsBroker, NatsMessage, PullSub
from faststream.nats.prometheus import NatsPrometheusMiddleware
from nats.js import api
from prometheus_client import CollectorRegistry

from devstack.procs import free_port, port_open, venv_bin
from shared.children import Child, wait_until
from shared.contracts.assets import EVT_SOURCE_RETIRED, SourceRetired
from shared.contracts.common import STREAM_NAME, Event
from shared.events import EventContext, handler_for
from shared.outbox import apply, consume, new_event

N = 3000
ROUNDS = 3
LONE = 10


class _Conn:
    async def fetchval(self, *_: Any) -> int:
        return 1  # every event is new to the inbox


class _Database:
    """The transaction `apply` opens, doing nothing: the consumer's cost alone is measured."""

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[_Conn]:
        yield _Conn()


class Counter:
    def __init__(self, expected: int):
        self.seen, self.expected, self.done = 0, expected, asyncio.Event()

    async def rule(self, ctx: EventContext, retired: SourceRetired) -> None:
        self.seen += 1
        if self.seen == self.expected:
            self.done.set()

    async def lone(self, nc: nats.NATS) -> list[float]:
        """Seconds from publishing each of LONE events, one at a time, to its rule."""
        waits = []
        for _ in range(LONE):
            self.expected, self.done = self.seen + 1, asyncio.Event()
            started = time.perf_counter()
            await publish(nc.jetstream())
            await self.done.wait()
            waits.append(time.perf_counter() - started)
        return waits


async def publish(js: Any) -> None:
    event = new_event(EVT_SOURCE_RETIRED, SourceRetired(source_id="memo", versions=[1, 2]), scope="bench")
    await js.publish(EVT_SOURCE_RETIRED.subject, event.model_dump_json().encode(), stream=STREAM_NAME)


async def fill(nc: nats.NATS, n: int) -> None:
    js = nc.jetstream()
    with contextlib.suppress(Exception):
        await js.delete_stream(STREAM_NAME)
    await js.add_stream(api.StreamConfig(name=STREAM_NAME, subjects=["dossier.evt.>"]))
    for _ in range(n):
        await publish(js)


async def own(servers: str, durable: str, n: int) -> tuple[float, list[float]]:
    counter = Counter(n)
    nc = await nats.connect(servers)
    handler = handler_for(EVT_SOURCE_RETIRED, [counter.rule])
    started = time.perf_counter()
    task = asyncio.create_task(
        consume(nc, _Database(), consumer=durable, filter_subject=EVT_SOURCE_RETIRED.subject, handler=handler)  # type: ignore[arg-type]
    )
    await counter.done.wait()
    seconds = time.perf_counter() - started
    waits = await counter.lone(nc)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await nc.close()
    return n / seconds, waits


async def faststream(servers: str, durable: str, n: int, *, batch: int = 50) -> tuple[float, list[float]]:
    counter = Counter(n)
    handler = handler_for(EVT_SOURCE_RETIRED, [counter.rule])
    db = _Database()
    middlewares = [NatsPrometheusMiddleware(registry=CollectorRegistry(), app_name="bench")]
    broker = NatsBroker(servers, logger=None, middlewares=middlewares)

    @broker.subscriber(
        EVT_SOURCE_RETIRED.subject,
        stream=JStream(STREAM_NAME, declare=False),
        durable=durable,
        pull_sub=PullSub(batch_size=batch, timeout=1.0),
        config=api.ConsumerConfig(ack_wait=30, max_deliver=12),
        ack_policy=AckPolicy.MANUAL,
    )
    async def on_event(event: Event, msg: NatsMessage) -> None:
        await apply(db, durable, event, handler)  # type: ignore[arg-type]
        await msg.ack()

    started = time.perf_counter()
    await broker.start()
    await counter.done.wait()
    seconds = time.perf_counter() - started
    nc = await nats.connect(servers)
    waits = await counter.lone(nc)
    await nc.close()
    await broker.stop()
    return n / seconds, waits


async def measure(servers: str, n: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    variants = {"own": own, "faststream": faststream, "faststream1": partial(faststream, batch=1)}
    rates: dict[str, list[float]] = {name: [] for name in variants}
    waits: dict[str, list[float]] = {name: [] for name in variants}
    nc = await nats.connect(servers)
    for round_ in range(ROUNDS):
        for name, variant in variants.items():
            await fill(nc, n)
            rate, lone = await variant(servers, f"{name}{round_}", n)
            rates[name].append(rate)
            waits[name] += lone
    await nc.close()
    return rates, waits


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else N
    with tempfile.TemporaryDirectory() as home:
        port = free_port()
        conf = Path(home) / "nats.conf"
        conf.write_text(f'port: {port}\njetstream {{ store_dir: "{home}/js" }}\n')
        child = Child("nats", [venv_bin("nats-server"), "-c", str(conf)], dict(os.environ), Path(home) / "nats.log")
        child.start()
        try:
            wait_until(lambda: port_open(port), timeout=10, what="nats-server")
            rates, waits = asyncio.run(measure(f"nats://127.0.0.1:{port}", n))
        finally:
            child.stop()
    for name, values in rates.items():
        lone = statistics.median(waits[name]) * 1000
        print(f"{name:>10}: {max(values):7.0f} events/s best of {ROUNDS}; one event on an idle consumer {lone:.1f} ms")
    print(f"faststream/own: {max(rates['faststream']) / max(rates['own']):.2f}")


if __name__ == "__main__":
    main()
