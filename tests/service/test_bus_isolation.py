"""The bus refuses what a service's credentials do not allow (docs/security.md), checked on a real server.

Every refusal asserted here is the server's own: NATS answers a denied subscribe or publish with a
permissions violation (delivered to the error callback) and drops the message.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import nats
import pytest
from nats.js import api

from shared.bus import BusClient
from shared.contracts import publication, runhost, workspace
from shared.contracts.common import STREAM_NAME, Actor
from shared.errors import Unreachable
from shared.streams import ensure_stream
from tests.support.infra import Infra, events_descriptor
from tests.support.owners import publish_event
from tests.support.probe import probe_until


class Violations:
    """The permission violations one connection received from the server."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def record(self, error: Exception) -> None:
        self.seen.append(str(error))

    async def wait_for(self, what: str, subject: str) -> None:
        expected = f'permissions violation for {what} to "{subject.lower()}"'

        async def found() -> bool:
            return any(expected in message.lower() for message in self.seen)

        await probe_until(found, timeout=10)


Connect = Callable[[str], Awaitable[tuple[nats.NATS, Violations]]]


@pytest.fixture
async def connect_as(infra: Infra) -> AsyncIterator[Connect]:
    opened: list[nats.NATS] = []

    async def connect(user: str) -> tuple[nats.NATS, Violations]:
        violations = Violations()
        nc = await infra.connect(user, error_cb=violations.record)
        opened.append(nc)
        return nc, violations

    yield connect
    for nc in opened:
        await nc.close()


async def test_an_anonymous_connection_is_refused(infra: Infra) -> None:
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(infra.nats_url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2)


async def test_a_wrong_password_is_refused(infra: Infra) -> None:
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(
            infra.nats_url, user="publication", password="guessed", allow_reconnect=False, max_reconnect_attempts=0
        )


async def test_a_service_cannot_take_another_services_requests(connect_as: Connect) -> None:
    nc, violations = await connect_as("artifact")
    await nc.subscribe(publication.READ, queue="publication")
    await nc.flush()
    await violations.wait_for("subscription", publication.READ)


@pytest.mark.parametrize("service", ["publication", "workspace", "assets", "runhost", "artifact"])
async def test_a_service_password_cannot_watch_its_own_requests(connect_as: Connect, service: str) -> None:
    """Its requests reach it only as a member of its queue group, where each goes to one member: a connection
    with the password cannot watch what the service's replicas answer, nor listen in a group of its own."""
    nc, violations = await connect_as(service)
    subject = f"dossier.{service}.health"
    # The server answers a refused subscription before the flush's pong: none came for the queue group.
    await nc.subscribe(subject, queue=service)
    await nc.flush()
    await nc.flush()
    assert not violations.seen
    for queue in ("", "eavesdrop"):
        await nc.subscribe(subject, queue=queue)
        await nc.flush()
        await violations.wait_for("subscription", subject)
        violations.seen.clear()


async def test_a_service_cannot_read_another_connections_replies(connect_as: Connect) -> None:
    nc, violations = await connect_as("publication")
    for inbox in ("_INBOX.>", "_INBOX_gateway.>"):
        await nc.subscribe(inbox)
        await nc.flush()
        await violations.wait_for("subscription", inbox)


async def test_a_service_cannot_publish_another_services_events(connect_as: Connect) -> None:
    nc, violations = await connect_as("artifact")
    subject = "dossier.evt.publication.committed"
    with pytest.raises(nats.errors.TimeoutError):
        await nc.jetstream().publish(subject, b"{}", stream=STREAM_NAME, timeout=1)
    await violations.wait_for("publish", subject)


async def test_a_service_publishes_its_own_events(infra: Infra, connect_as: Connect) -> None:
    nc, violations = await connect_as("artifact")
    await ensure_stream(nc)
    ack = await nc.jetstream().publish("dossier.evt.artifact.registered", b"{}", stream=STREAM_NAME)
    assert ack.stream == STREAM_NAME and violations.seen == []


@pytest.mark.parametrize("operation", ["delete_stream", "purge_stream"])
async def test_no_service_may_delete_or_purge_the_stream(infra: Infra, connect_as: Connect, operation: str) -> None:
    tester = await infra.connect()
    try:
        await ensure_stream(tester)
        nc, violations = await connect_as("workspace")
        with pytest.raises(nats.errors.TimeoutError):
            await getattr(nc.jetstream(timeout=1), operation)(STREAM_NAME)
        action = "DELETE" if operation == "delete_stream" else "PURGE"
        await violations.wait_for("publish", f"$JS.API.STREAM.{action}.{STREAM_NAME}")
        assert (await tester.jetstream().stream_info(STREAM_NAME)).config.name == STREAM_NAME
    finally:
        await tester.close()


@pytest.mark.parametrize(
    ("caller", "subject"),
    [
        # A user-facing request carrying a user's actor: only the gateway may send it.
        ("artifact", workspace.GET),
        ("publication", runhost.ADMIT),
        ("assets", publication.COMMIT),
        ("workspace", runhost.CANCEL),
        ("workspace", workspace.DELETE.replace("workspace", "publication", 1)),
        # Runhost calls the reads of a run and the finishing steps, never another user-facing write.
        ("runhost", workspace.DELETE),
        ("runhost", publication.WITHDRAW),
    ],
)
async def test_a_service_may_request_only_what_it_calls(connect_as: Connect, caller: str, subject: str) -> None:
    nc, violations = await connect_as(caller)
    bus = BusClient(nc, timeout=1.0)
    with pytest.raises(Unreachable):
        await bus.call_raw(subject, {}, actor=Actor(scope="victim", principal="mallory"))
    await violations.wait_for("publish", subject)


async def test_external_read_only_credentials_read_events_through_an_ext_consumer(infra: Infra) -> None:
    tester = await infra.connect()
    violations = Violations()
    descriptor: dict[str, Any] = events_descriptor(infra)
    reader = await nats.connect(
        descriptor["servers"], user=descriptor["user"], password=descriptor["password"], error_cb=violations.record
    )
    durable = f"ext-{uuid.uuid4().hex[:8]}"
    try:
        await ensure_stream(tester)
        js = reader.jetstream(timeout=2)
        sub = await js.pull_subscribe(
            "dossier.evt.>",
            durable=durable,
            stream=STREAM_NAME,
            config=api.ConsumerConfig(deliver_policy=api.DeliverPolicy.NEW),
        )
        event = await publish_event(tester, type="artifact.registered", scope="ext-test", data={"n": 1})
        seen: list[str] = []

        async def delivered() -> bool:
            try:
                for msg in await sub.fetch(10, timeout=0.5):
                    seen.append(msg.data.decode())
                    await msg.ack()
            except nats.errors.TimeoutError:
                pass
            return any(event.id in body for body in seen)

        await probe_until(delivered, timeout=15)

        # Read-only: no publishing (events or anything else), no requests, no stream admin; its own
        # consumers (on the outside mirror, shared.outside) it may delete.
        await reader.publish("dossier.evt.artifact.registered", b"{}")
        await violations.wait_for("publish", "dossier.evt.artifact.registered")
        with pytest.raises(Unreachable):
            await BusClient(reader, timeout=1.0).call_raw(publication.READ, {}, actor=Actor(scope="s", principal="p"))
        await violations.wait_for("publish", publication.READ)
        assert await reader.jetstream(timeout=2).delete_consumer(STREAM_NAME, durable)
        with pytest.raises(nats.errors.TimeoutError):
            await reader.jetstream(timeout=1).delete_stream(STREAM_NAME)
        await violations.wait_for("publish", f"$JS.API.STREAM.DELETE.{STREAM_NAME}")
    finally:
        await reader.close()
        await tester.close()
