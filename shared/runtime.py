"""The life of one service process: connect, migrate, serve on the bus, relay the outbox, drain on SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import nats
import uvloop
from faststream.nats import NatsBroker
from faststream.nats.prometheus import NatsPrometheusMiddleware
from prometheus_client import REGISTRY

from shared import tracing
from shared.bus import (
    BusClient,
    RequestContext,
    described_endpoints,
    endpoint,
    health_endpoint,
    rules_of,
)
from shared.children import wait_for_file
from shared.contracts.common import EventType, Q, R, Subject
from shared.contracts.registry import contract_events
from shared.db import Database
from shared.events import BoundRule, event_rules, handler_for
from shared.gcfreeze import freeze_startup_objects
from shared.health import HealthReporter, connection_answers
from shared.metrics import BUS_REQUESTS, BUS_SECONDS, OUTBOX_PARKED, from_zero, serve_metrics
from shared.natsauth import EVENT_PREFIX, broker_options, connect_options, durable_name
from shared.observe import configure_logging
from shared.outbox import OutboxRelay, consume
from shared.proof import signer_for, verifier_for
from shared.serving import EndpointServer
from shared.settings import CommonSettings
from shared.streams import ensure_stream

log = logging.getLogger("dossier.runtime")

BackgroundTask = Callable[[], Awaitable[None]]


class ServiceRuntime:
    """Owns the broker, the database and the background loops of one service."""

    def __init__(
        self,
        name: str,
        settings: CommonSettings,
        migrations: Path,
        *,
        session_state: bool = True,
        idle_transaction_seconds: float | None = None,
        consumer_prefix: str | None = None,
    ):
        """`consumer_prefix`: what the names of its durable consumers start with (the service's name unless a
        test gives each instance its own)."""
        self.name = name
        self.consumer_prefix = consumer_prefix or name
        self.settings = settings
        self.migrations = migrations
        tracing.setup_tracing(name, sql=settings.trace_sql)
        # No FastStream telemetry middleware: its only subscribers here are health pings, which no trace wants,
        # and it named each reply's span by its inbox (a name per request).
        middlewares = [NatsPrometheusMiddleware(registry=REGISTRY, app_name=name)]
        # logger=None: FastStream's per-message logging costs about 30% of throughput.
        self.broker = NatsBroker(
            settings.nats_servers,
            logger=None,
            graceful_timeout=10.0,
            middlewares=middlewares,
            max_reconnect_attempts=-1,
            reconnect_time_wait=settings.nats_reconnect_wait,
            ping_interval=settings.nats_ping_interval,
            **broker_options(settings),
        )
        self.db = Database(
            settings.database_url,
            max_size=settings.db_pool_size,
            session_state=session_state,
            idle_transaction_seconds=idle_transaction_seconds,
        )
        self._background: list[BackgroundTask] = []
        self._on_start: list[BackgroundTask] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._bus: BusClient | None = None
        self._endpoints: EndpointServer | None = None
        # The rules of each event type it follows, as `serve_rules` found them marked.
        self.event_rules: dict[EventType[Any], list[BoundRule]] = {}
        health_endpoint(self.broker, name, self.health_problem)

    def serve(self, subject: Subject[Q, R], handler: Callable[[RequestContext, Q], Awaitable[R]]) -> None:
        """Answer `subject` with `handler(ctx, request) -> reply`, in this service's queue group."""
        from_zero(BUS_REQUESTS, [subject], ["internal"])
        from_zero(BUS_SECONDS, [subject])
        endpoint(self.broker, subject, handler, queue=self.name)

    def serve_rules(self, *owners: object) -> None:
        """Serve every subject a method of these objects answers (marked with `shared.bus.answers`), and follow
        every event type one consumes (marked with `shared.events.consumes`) with a durable consumer.

        Given every object of the service at once: the event rules must be exactly the events the contracts
        let it consume (shared/events.py). A subject answered twice is a mistake in the service's wiring,
        refused here rather than served twice.
        """
        served: set[str] = set()
        for owner in owners:
            for subject, handler in rules_of(owner):
                if subject in served:
                    raise ValueError(f"{subject} is answered twice")
                served.add(subject)
                self.serve(subject, handler)
        self.event_rules = event_rules(self.name, *owners)
        for event_type, rules in self.event_rules.items():
            self.background(partial(self._follow, self.durable(event_type), event_type, rules))

    def durable(self, event_type: str) -> str:
        """The name of this service's durable consumer of `event_type` (shared/natsauth.py grants it)."""
        return durable_name(self.consumer_prefix, event_type)

    async def _follow(self, durable: str, event_type: EventType[Any], rules: list[BoundRule]) -> None:
        """One durable pull consumer of `event_type` (shared/outbox.py `consume`), on a connection of its own:
        at shutdown the broker drains its connection, and nats-py's drain waits on a pull subscription's
        queue until its timeout (30 s) instead of returning."""
        settings = self.settings
        nc = await nats.connect(
            settings.nats_servers,
            name=f"{self.name}-{durable}",
            max_reconnect_attempts=-1,
            **connect_options(settings),
        )
        try:
            await consume(
                nc,
                self.db,
                consumer=durable,
                filter_subject=event_type.subject,
                handler=handler_for(event_type, rules),
                replicas=settings.stream_replicas,
            )
        finally:
            await nc.close()

    def health_problem(self) -> str | None:
        """Why this service cannot do part of its work, for its health reply; None when it can."""
        return None

    @property
    def bus(self) -> BusClient:
        if self._bus is None:
            raise RuntimeError("the runtime has not started")
        return self._bus

    def on_start(self, hook: BackgroundTask) -> None:
        """Run `hook` once at start, after the database and bus are connected (e.g. ensure a bucket)."""
        self._on_start.append(hook)

    def background(self, task: BackgroundTask) -> None:
        """Run `task` for the life of the process (sweepers, backfills; `serve_rules` adds the event consumers)."""
        self._background.append(task)

    async def start(self) -> None:
        prefix = EVENT_PREFIX.get(self.name)
        from_zero(OUTBOX_PARKED, [event.name for event in contract_events() if event.name.split(".")[0] == prefix])
        if self.settings.health_file is not None:
            reporter = HealthReporter(self.settings.health_file, self._healthy, interval=self.settings.health_interval)
            self._spawn(reporter.run)
        if self.settings.metrics_port is not None:
            if not self.settings.metrics_token:
                raise RuntimeError("DOSSIER_METRICS_PORT is set without DOSSIER_METRICS_TOKEN: metrics are never open")
            port = serve_metrics(self.settings.metrics_port, self.settings.metrics_token, self.name)
            log.info("%s serves metrics on 127.0.0.1:%d", self.name, port)
        await self.db.connect(self.migrations)
        await self.broker.connect()
        nc = self.broker.connection
        await ensure_stream(nc, replicas=self.settings.stream_replicas)
        self._bus = BusClient(nc, timeout=self.settings.request_timeout, signer=signer_for(self.name, self.settings))
        for hook in self._on_start:
            await hook()
        if self.settings.outbox_relay:
            self._spawn(OutboxRelay(self.db, nc, keep_seconds=self.settings.outbox_keep_seconds).run)
        for task in self._background:
            self._spawn(task)
        await self.broker.start()
        self._endpoints = EndpointServer(described_endpoints(self.broker), verifier_for(self.settings))
        await self._endpoints.start(nc)
        log.info("%s service is serving", self.name)

    async def _healthy(self) -> bool:
        """Connected, the server answers, and this service's own health subject answers over the bus."""
        if self._bus is None:
            return False
        return await connection_answers(self.broker.connection) and await self.bus.ping(self.name)

    async def _cancel_tasks(self) -> None:
        """Cancel the loops and wait for them; a loop that let a cancel pass is cancelled again, never waited on for ever."""
        pending = set(self._tasks)
        self._tasks.clear()
        while pending:
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=5.0)
            if pending:
                log.warning("%s: %d background loops outlived a cancel; cancelling them again", self.name, len(pending))

    def _spawn(self, task: BackgroundTask) -> None:
        async def guarded() -> None:
            while True:
                try:
                    await task()
                    return
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("%s background task %s crashed; restarting it", self.name, task)
                    await asyncio.sleep(1.0)

        self._tasks.append(asyncio.create_task(guarded()))

    async def stop(self) -> None:
        # The loops first (a consumer still fetching makes the broker's drain wait out its timeout), then
        # stop taking messages and finish the in-flight ones, then the pool.
        await self._cancel_tasks()
        if self._endpoints is not None:
            await self._endpoints.stop(timeout=10.0)
        try:
            # FastStream waits up to its graceful timeout for in-flight messages; never longer than this.
            async with asyncio.timeout(20.0):
                await self.broker.stop()
        except TimeoutError:
            log.warning("%s: the broker did not stop in time; closing its connection", self.name)
            await self.broker.connection.close()
        await self.db.close()


async def serve_until_signalled(start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[None]]) -> None:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await start()
    try:
        await stopping.wait()
    finally:
        await stop()


def run_service(runtime: ServiceRuntime) -> None:
    settings = runtime.settings
    configure_logging(runtime.name, settings.log_level, process=settings.process, log_file=settings.log_file)
    wait_for_file(runtime.settings.infra_ready_file)
    # uvloop: the bus hops and the pool's round trips cost less loop time than on the default loop.
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve_until_signalled(partial(_start_and_freeze, runtime), runtime.stop))


async def _start_and_freeze(runtime: ServiceRuntime) -> None:
    await runtime.start()
    # Only here, in the process's own entry point: tests start many runtimes in one process.
    freeze_startup_objects()
