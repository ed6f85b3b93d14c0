"""The request subjects of one service, served on its own nats-py subscriptions.

`dispatch` already does all a request needs: the envelope, validation, the request id in the log
context, and the per-subject metrics. FastStream's subscriber added its middlewares, its dependency
injection and a context lookup for the body on every message, about a fifth of a publication read in
the profile of issue 14, so request subjects skip it. Events are served by durable pull consumers
(shared/outbox.py `consume`, started from the marked rules, shared/events.py). Only the health pings stay
on a FastStream subscriber: the AsyncAPI document promises their replies' FastStream headers, and the
operators' `faststream_*` metrics count them (docs/architecture.md, "One way to serve each message").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from shared import tracing
from shared.batching import BATCH_HEADER, BadBatch, batch_count
from shared.bus import EndpointSpec, dispatch, dispatch_batch
from shared.proof import ProofVerifier
from shared.subscriptions import subscriptions_live

log = logging.getLogger("dossier.serving")


class EndpointServer:
    """Subscribes each endpoint in its queue group; handles up to its `concurrency` messages at once.

    Every request's proof of caller is checked by `verifier` before its handler runs (shared/proof.py).
    """

    # The connection it serves on, from `start`.
    _nc: NATS

    def __init__(self, specs: list[EndpointSpec], verifier: ProofVerifier):
        self._specs = specs
        self._verifier = verifier
        self._subscriptions: list[Subscription] = []
        self._in_flight: set[asyncio.Task[None]] = set()

    async def start(self, nc: NATS) -> None:
        self._nc = nc
        for spec in self._specs:
            self._subscriptions.append(await nc.subscribe(spec.subject, queue=spec.queue, cb=self._receiver(spec)))
        # Live before the service says it serves: the request subjects and the health subscribers that
        # FastStream subscribed on the same connection just before.
        await subscriptions_live(nc)

    def _receiver(self, spec: EndpointSpec) -> Callable[[Msg], Awaitable[None]]:
        slots = asyncio.Semaphore(spec.concurrency)

        async def receive(msg: Msg) -> None:
            # nats-py awaits this callback before it hands over the subscription's next message: waiting
            # for a slot here is the back-pressure, and the answer runs as its own task. A batch takes a
            # slot for each of its requests, up to all of them.
            batch = _batch_count(spec, msg)
            taken = max(1, min(batch, spec.concurrency)) if isinstance(batch, int) else 1
            for _ in range(taken):
                await slots.acquire()
            task = asyncio.create_task(self._answer(spec, msg, batch))
            self._in_flight.add(task)
            task.add_done_callback(lambda done: finished(done, taken))

        def finished(task: asyncio.Task[None], taken: int) -> None:
            self._in_flight.discard(task)
            for _ in range(taken):
                slots.release()

        return receive

    async def _answer(self, spec: EndpointSpec, msg: Msg, batch: int | BadBatch | None) -> None:
        if tracing.enabled():
            with tracing.consumer_span(spec.subject, msg.headers):
                reply = await self._reply(spec, msg.data, batch)
        else:
            reply = await self._reply(spec, msg.data, batch)
        if not msg.reply:
            return
        try:
            # Not `msg.respond`, which sends the request's headers back (a batch's count, a trace's context):
            # a reply carries none (docs/asyncapi.json).
            await self._nc.publish(msg.reply, reply)
        except Exception as exc:
            # The caller is gone or the connection is closing; its request times out as if never answered.
            log.warning("could not answer %s: %s", spec.subject, exc)

    async def _reply(self, spec: EndpointSpec, data: bytes, batch: int | BadBatch | None) -> bytes:
        if batch is None:
            return await dispatch(data, spec.subject, spec.handler, self._verifier)
        return await dispatch_batch(data, batch, spec.subject, spec.handler, self._verifier, limit=self._nc.max_payload)

    async def stop(self, *, timeout: float) -> None:
        """Stop taking requests, answer the ones already received, never wait longer than `timeout`."""
        try:
            async with asyncio.timeout(timeout):
                for subscription in self._subscriptions:
                    try:
                        await subscription.drain()
                    except nats.errors.Error as exc:
                        log.warning("could not drain %s: %s", subscription.subject, exc)
                if self._in_flight:
                    await asyncio.wait(set(self._in_flight))
        except TimeoutError:
            log.warning("%d requests still in flight after %.0f s; leaving them", len(self._in_flight), timeout)
        self._subscriptions.clear()


def _batch_count(spec: EndpointSpec, msg: Msg) -> int | BadBatch | None:
    """The count of a request's batch header on a batched subject (shared/batching.py), read once: for the
    batch's slots and its answer. None for one request alone; the BadBatch of a header that is no count, which
    takes one slot and is answered `invalid` at once."""
    if not spec.subject.batched or not msg.headers:
        return None
    try:
        return batch_count(msg.headers.get(BATCH_HEADER))
    except BadBatch as exc:
        return exc
