"""Tests only: stand-ins on the real NATS for owner services this branch does not have, plus probes.

`AssetsStandIn` answers `dossier.assets.check` exactly in the shape of the assets contract (issue 3),
from a table the test fills. `SilentOwner` takes requests and never answers (an owner that does not
answer in time). `RequestTap` counts the requests a subject receives without answering them, to prove
that checks are batched. `EventTap` collects events as the relay publishes them.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import nats
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import api

from shared.contracts.common import (
    EVENT_SUBJECT_PREFIX,
    STREAM_NAME,
    BusReply,
    BusRequest,
    CheckReply,
    CheckRequest,
    Eligibility,
    Event,
    Ref,
    event_subject,
)
from shared.contracts.workspace import ASSETS_CHECK
from shared.streams import ensure_stream


class Subscribed:
    """A stand-in's one subscription, from its `start` until `stop`."""

    _sub: Subscription | None = None

    async def stop(self) -> None:
        if self._sub is not None:
            sub, self._sub = self._sub, None
            await sub.unsubscribe()


@dataclass
class SourceState:
    active: int | None
    # version -> None when usable, else the reason (`superseded`, `retired`, `failed`)
    versions: dict[int, str | None]
    title: str


@dataclass
class AssetsStandIn(Subscribed):
    """Answers `dossier.assets.check` like the assets service would, from `sources`. Tests only."""

    nc: nats.NATS
    sources: dict[tuple[str, str], SourceState] = field(default_factory=dict)
    batches: list[list[Ref]] = field(default_factory=list)

    def put(self, scope: str, source_id: str, *, active: int | None = 1, **versions: str | None) -> None:
        """`put(scope, "S1", active=2, v1="superseded", v2=None)`; by default one usable version 1."""
        states = {int(k[1:]): v for k, v in versions.items()} or {1: None}
        self.sources[(scope, source_id)] = SourceState(active=active, versions=states, title=f"Source {source_id}")

    async def start(self) -> AssetsStandIn:
        self._sub = await self.nc.subscribe(ASSETS_CHECK, queue="assets", cb=self._on_check)
        return self

    def _answer(self, scope: str, ref: Ref) -> Eligibility:
        state = self.sources.get((scope, ref.id))
        if ref.kind != "source" or state is None:
            return Eligibility(ref=ref, available=False, reason="not_found")
        if ref.version is None and state.active is None:
            # No active version: the source was retired (or every version failed).
            reason = "retired" if any(r == "retired" for r in state.versions.values()) else "failed"
            return Eligibility(ref=ref, available=False, reason=reason)
        version = ref.version if ref.version is not None else state.active
        if version not in state.versions:
            return Eligibility(ref=ref, available=False, reason="not_found")
        reason = state.versions[version]
        return Eligibility(
            ref=Ref(kind="source", id=ref.id, version=version),
            available=reason is None,
            reason=reason,
            title=state.title,
            created_at=datetime.now(UTC),
        )

    async def _on_check(self, msg: Msg) -> None:
        request = BusRequest.model_validate_json(msg.data)
        refs = CheckRequest.model_validate(request.data).refs
        self.batches.append(refs)
        reply = CheckReply(items=[self._answer(request.actor.scope, ref) for ref in refs])
        await msg.respond(BusReply(ok=True, data=reply.model_dump(mode="json")).model_dump_json().encode())


@dataclass
class SilentOwner(Subscribed):
    """Subscribes to an owner's subject in its queue group and never answers. Tests only."""

    nc: nats.NATS
    subject: str
    queue: str
    received: int = 0

    async def start(self) -> SilentOwner:
        async def swallow(msg: Msg) -> None:
            self.received += 1

        self._sub = await self.nc.subscribe(self.subject, queue=self.queue, cb=swallow)
        return self


@dataclass
class RequestTap(Subscribed):
    """Sees every request on a subject (outside the queue group) and never answers."""

    nc: nats.NATS
    subject: str
    refs: list[list[dict[str, Any]]] = field(default_factory=list)

    async def start(self) -> RequestTap:
        async def record(msg: Msg) -> None:
            self.refs.append(BusRequest.model_validate_json(msg.data).data.get("refs", []))

        self._sub = await self.nc.subscribe(self.subject, cb=record)
        return self


@dataclass
class EventTap(Subscribed):
    """Collects the events of one scope as they are published (a plain subscription on the subjects)."""

    nc: nats.NATS
    scope: str
    events: list[Event] = field(default_factory=list)

    async def start(self) -> EventTap:
        async def record(msg: Msg) -> None:
            event = Event.model_validate_json(msg.data)
            if event.scope == self.scope:
                self.events.append(event)

        self._sub = await self.nc.subscribe(f"{EVENT_SUBJECT_PREFIX}.>", cb=record)
        return self

    def of(self, type: str) -> list[Event]:
        return [e for e in self.events if e.type == type]


async def publish_event(nc: nats.NATS, *, type: str, scope: str, data: dict[str, Any], id: str | None = None) -> Event:
    """Put an event on the real stream, as another service's relay would."""
    event = Event(id=id or f"evt_{uuid.uuid4().hex}", type=type, scope=scope, occurred_at=datetime.now(UTC), data=data)
    await nc.jetstream().publish(
        event_subject(type),
        event.model_dump_json().encode(),
        stream=STREAM_NAME,
        # A redelivery test republishes the same event id under another message id.
        headers={"Nats-Msg-Id": f"{event.id}-{uuid.uuid4().hex[:6]}"},
    )
    return event


async def create_durables_from_now(nc: nats.NATS, durables: dict[str, str]) -> None:
    """Create a service's durable consumers starting at the next event, so a fresh test instance does
    not replay every event earlier tests left on the shared stream. `consume()` then binds to them."""
    await ensure_stream(nc)
    js = nc.jetstream()
    for durable, subject in durables.items():
        await js.add_consumer(
            STREAM_NAME,
            api.ConsumerConfig(
                name=durable,
                durable_name=durable,
                filter_subject=subject,
                deliver_policy=api.DeliverPolicy.NEW,
                ack_policy=api.AckPolicy.EXPLICIT,
                ack_wait=30,
                max_deliver=20,
            ),
        )


async def delete_durables(nc: nats.NATS, durables: dict[str, str]) -> None:
    js = nc.jetstream()
    for durable in durables:
        await js.delete_consumer(STREAM_NAME, durable)
