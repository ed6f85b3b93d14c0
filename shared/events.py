"""Event rules: a method marked with the event type it consumes receives that event's payload model.

A rule method `(self, ctx, payload) -> None` marked `@consumes(EVENT)` is the whole declaration of what a
service does with an event: the runtime gathers the marked methods of the objects it serves
(`ServiceRuntime.serve_rules`), starts one durable consumer per event type, and checks that the marks are
exactly the events whose contract names the service among their `consumers` (the declaration its NATS
permissions are made from, shared/natsauth.py). Several rules of one event type run in the order their
objects were given, in one transaction.

Each event is applied by `shared.outbox.apply`: its rules and its inbox row commit together, so a
redelivered event changes nothing. The payload is read from the event's `data`, only the fields its model
declares (the producer may add more); a payload that does not fit is logged and skipped, its inbox row
kept, so it is not tried again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
from pydantic import ValidationError

from shared.bus import marked_methods, set_mark
from shared.contracts.common import Event, EventType, P
from shared.contracts.registry import consumed_by
from shared.outbox import EventHandler

log = logging.getLogger("dossier.events")

S = TypeVar("S")
# The attribute `consumes` marks a rule method with: the event type it consumes.
_CONSUMES = "__consumes__"


@dataclass(frozen=True)
class EventContext:
    """What a rule gets beside the payload: the consumer's transaction (the inbox row is in it) and the
    event's envelope fields."""

    conn: asyncpg.Connection
    id: str
    type: str
    scope: str
    request_id: str | None
    occurred_at: datetime


EventRule = Callable[[S, EventContext, P], Awaitable[None]]
BoundRule = Callable[[EventContext, Any], Awaitable[None]]


def consumes(event_type: EventType[P]) -> Callable[[EventRule[S, P]], EventRule[S, P]]:
    """Mark a rule method `(self, ctx, payload) -> None` as consuming `event_type`, where the rule is declared.

    Typed so a method whose payload is not the event type's model fails the type check.
    """

    def mark(method: EventRule[S, P]) -> EventRule[S, P]:
        return set_mark(method, _CONSUMES, event_type, "consumes")

    return mark


def event_rules_of(owner: object) -> list[tuple[EventType[Any], BoundRule]]:
    """Each event type a method of `owner`'s class consumes (marked by `consumes`), with the method bound to it."""
    return marked_methods(owner, _CONSUMES, EventType)


def event_rules(service: str, *owners: object) -> dict[EventType[Any], list[BoundRule]]:
    """The rules of each event type `service` consumes, in the order of `owners`.

    Refuses marks that differ from the contracts' `consumers`: an event the service may not follow, or one
    it is declared to follow with no rule (its durable would take the events and drop them).
    """
    found: dict[EventType[Any], list[BoundRule]] = {}
    for owner in owners:
        for event_type, rule in event_rules_of(owner):
            found.setdefault(event_type, []).append(rule)
    declared = {event.name for event in consumed_by(service)}
    marked = {event.name for event in found}
    if marked != declared:
        raise ValueError(
            f"{service} has rules for {sorted(marked - declared)} that its contracts do not let it consume,"
            f" and none for {sorted(declared - marked)} that they do"
        )
    return found


def handler_for(event_type: EventType[Any], rules: list[BoundRule]) -> EventHandler:
    """What the consumer of `event_type` runs inside its transaction: the payload read once, then each rule."""

    async def handle(conn: asyncpg.Connection, event: Event) -> None:
        model = event_type.payload
        try:
            payload = model.model_validate({k: v for k, v in event.data.items() if k in model.model_fields})
        except ValidationError:
            log.error("ignoring a malformed %s event %s", event.type, event.id)
            return
        ctx = EventContext(
            conn=conn,
            id=event.id,
            type=event.type,
            scope=event.scope,
            request_id=event.request_id,
            occurred_at=event.occurred_at,
        )
        for rule in rules:
            await rule(ctx, payload)

    return handle
