"""A service's event rules served in memory, without NATS (as FastStream's `TestNatsBroker` serves its handlers).

`InMemoryEvents(runtime)` takes a service built by its own `create_app` and dispatches events to the rules
its runtime follows (`ServiceRuntime.event_rules`, the methods marked `@consumes`), through the same
`shared.outbox.apply` its durable consumers use: the rules and the consumer's inbox row commit in one
transaction of the service's database, so delivering an event twice applies it once. `relay()` plays the
outbox relay and the stream: it takes the events the rules (or requests) committed to the outbox, marks them
published and delivers each to the rules that follow it, until none is left. `call()` asks a request rule
(marked `@answers`) directly, as the envelope and the proof of caller would hand it over (shared/bus.py),
to set up or read what the event rules act on.

A rule that asks another service over the runtime's bus gets its answer from `outside`, functions standing in
for those services' rules (`OutsideAnswers`), through the service's own `BusClient`; a subject none of them
answers is refused as NATS refuses a subject no service serves (`Unreachable`). `in_memory` builds a service
on a database of its own in `Infra`'s PostgreSQL and serves it so.

A rule's failure is raised to the test; the retries and dead letters around it belong to the consumer loop
(tests/service/test_dead_letters.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import orjson
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from pydantic import ValidationError

from shared.bus import BusClient, RequestContext, described_endpoints, validation_details
from shared.contracts.common import Actor, BusReply, ErrorBody, Event, EventType, P, Q, R, Subject
from shared.errors import DomainError, Invalid
from shared.events import handler_for
from shared.outbox import EventHandler, apply, new_event
from shared.runtime import ServiceRuntime
from shared.settings import CommonSettings
from tests.support.infra import Infra
from tests.support.service import settings_from

S = TypeVar("S", bound=CommonSettings)
# Another service's rule as a test stands it in: the caller's actor and the request, to the reply.
Answer = Callable[[Actor, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Reply:
    data: bytes


class OutsideAnswers:
    """What a `BusClient`'s NATS connection is asked, answered by `answers` in the reply envelope an owner
    writes, a DomainError they raise as the owner's refusal; `asked` keeps every request, in order."""

    def __init__(self, answers: Mapping[Subject[Any, Any], Answer]):
        self._answers = {subject.name: (subject, answer) for subject, answer in answers.items()}
        self.asked: list[tuple[str, Actor, Any]] = []

    async def request(self, subject: str, payload: bytes, timeout: float, headers: object = None) -> Reply:
        if subject not in self._answers:
            raise NoRespondersError
        owned, answer = self._answers[subject]
        envelope = orjson.loads(payload)
        actor, request = Actor.model_validate(envelope["actor"]), owned.request.model_validate(envelope["data"])
        self.asked.append((subject, actor, request))
        try:
            reply = BusReply(ok=True, data=(await answer(actor, request)).model_dump(mode="json"))
        except DomainError as err:
            reply = BusReply(ok=False, error=ErrorBody(code=err.code, message=err.message, details=err.details))
        return Reply(reply.model_dump_json().encode())


class InMemoryEvents:
    def __init__(self, runtime: ServiceRuntime, outside: Mapping[Subject[Any, Any], Answer] | None = None):
        self._runtime = runtime
        self.outside = OutsideAnswers(outside or {})
        # The client `ServiceRuntime.start` would connect, on the stand-ins instead of NATS.
        runtime._bus = BusClient(cast(NATS, self.outside), timeout=1.0)
        self._handlers: dict[str, tuple[str, EventHandler]] = {
            event_type.name: (runtime.durable(event_type), handler_for(event_type, rules))
            for event_type, rules in runtime.event_rules.items()
        }

    @property
    def runtime(self) -> ServiceRuntime:
        """The service served, for a test to reach its settings or database directly."""
        return self._runtime

    async def call(self, subject: Subject[Q, R], request: Q, *, actor: Actor, grant: str | None = None) -> R:
        """The reply of the service's rule for `subject`, or the DomainError it refuses with: `Invalid` for a
        request the subject's model refuses, as the owner answers it (shared/bus.py). `grant`: the run grant the
        envelope carries, if any."""
        [handler] = [spec.handler for spec in described_endpoints(self._runtime.broker) if spec.subject == subject]
        ctx = RequestContext(actor=actor, grant=grant, subject=subject, issuer="gateway")
        try:
            payload = subject.request.model_validate(request.model_dump(exclude_unset=True))
        except ValidationError as exc:
            raise Invalid("the request is malformed", validation_details(exc)) from exc
        reply: R = await handler(ctx, payload)
        return reply

    async def __aenter__(self) -> InMemoryEvents:
        """Connect the service's database (migrated), which its rules write to; no bus is connected."""
        await self._runtime.db.connect(self._runtime.migrations)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._runtime.db.close()

    async def publish(self, event_type: EventType[P], payload: P, *, scope: str) -> Event:
        """A new event of `event_type`, as its owner's outbox would publish it, delivered to the rules."""
        event = new_event(event_type, payload, scope=scope)
        await self.deliver(event)
        return event

    async def deliver(self, event: Event) -> str:
        """Deliver `event` (again, to try a redelivery) to the consumer of its type: `handled`, `duplicate`, or
        `ignored` for a type the service does not follow."""
        if event.type not in self._handlers:
            return "ignored"
        durable, handler = self._handlers[event.type]
        return await apply(self._runtime.db, durable, event, handler)

    async def relay(self, *, follow: Collection[str] | None = None) -> list[Event]:
        """Publish what the service's outbox holds, in order, delivering each event to the rules of its type
        (of the types in `follow`, when given), until the outbox is empty; returns every event published."""
        published: list[Event] = []
        while rows := await self._unpublished():
            for row in rows:
                event = Event.model_validate(row["payload"])
                published.append(event)
                if follow is None or event.type in follow:
                    await self.deliver(event)
        return published

    async def _unpublished(self) -> list[Any]:
        async with self._runtime.db.transaction() as conn:
            return list(
                await conn.fetch(
                    "WITH taken AS (UPDATE outbox SET published_at = now()"
                    " WHERE published_at IS NULL AND parked_at IS NULL RETURNING seq, payload)"
                    " SELECT seq, payload FROM taken ORDER BY seq"
                )
            )


def in_memory(
    infra: Infra,
    service: str,
    create_app: Callable[[S], ServiceRuntime],
    settings: Callable[[], S],
    outside: Mapping[Subject[Any, Any], Answer] | None = None,
    **env: str,
) -> InMemoryEvents:
    """`service` built by its `create_app` with its settings from `Infra` (and `env`), to be served in memory."""
    built: S = settings_from(infra.settings_env(service, **env), settings)
    return InMemoryEvents(create_app(built), outside)
