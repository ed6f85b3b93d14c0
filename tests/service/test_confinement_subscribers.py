"""Outside subscribers cannot reach past their own consumers (docs/security.md).

Each attack is one an outside subscriber played against the single-account bus: the JetStream API
forms that carry a consumer's name in the body, a push consumer delivering into a request subject, a
JetStream reply aimed at a service's inbox. The internal side is a tester connection standing in for
the workspace service and the gateway; the attacker holds exactly what `$DOSSIER_HOME/nats/events.json`
hands out.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import nats
import pytest
from nats.js import api

from shared.contracts.common import STREAM_NAME
from shared.outside import MAX_CONSUMERS_DEFAULT, MAX_CONSUMERS_SETTING
from shared.serving import subscriptions_live
from shared.streams import ensure_stream
from tests.support.infra import Infra, events_descriptor
from tests.support.owners import publish_event
from tests.support.probe import probe_until

ASSOCIATION = "dossier.evt.asset.association_requested"
OTHER = "dossier.evt.publication.committed"


class Outside:
    """The outside subscriber's connection and the permission violations the server sent it."""

    def __init__(self, nc: nats.NATS, violations: list[str]):
        self.nc = nc
        self.violations = violations

    async def api(self, subject: str, body: dict[str, Any], timeout: float = 2) -> dict[str, Any] | None:
        """A JetStream API request; None when the server dropped it (a permissions violation)."""
        try:
            reply = await self.nc.request(subject, json.dumps(body).encode(), timeout=timeout)
        except nats.errors.TimeoutError:
            return None
        return dict(json.loads(reply.data))

    async def refused(self, subject: str) -> bool:
        return any(f'publish to "{subject.lower()}"' in v.lower() for v in self.violations)


@pytest.fixture
async def tester(infra: Infra) -> AsyncIterator[nats.NATS]:
    nc = await infra.connect()
    await ensure_stream(nc)
    yield nc
    await nc.close()


@pytest.fixture
async def outside(infra: Infra) -> AsyncIterator[Outside]:
    descriptor = events_descriptor(infra)
    violations: list[str] = []

    async def record(error: Exception) -> None:
        violations.append(str(error))

    nc = await nats.connect(
        descriptor["servers"], user=descriptor["user"], password=descriptor["password"], error_cb=record
    )
    yield Outside(nc, violations)
    await nc.close()


@pytest.fixture
async def internal_durable(tester: nats.NATS) -> AsyncIterator[str]:
    """A workspace-style durable following one event type, as the workspace service makes them."""
    name = f"workspace_assoc_{uuid.uuid4().hex[:8]}"
    config = api.ConsumerConfig(
        name=name, durable_name=name, filter_subject=ASSOCIATION, ack_policy=api.AckPolicy.EXPLICIT
    )
    await tester.jetstream().add_consumer(STREAM_NAME, config)
    yield name
    await tester.jetstream().delete_consumer(STREAM_NAME, name)


async def _unchanged(tester: nats.NATS, name: str) -> None:
    info = await tester.jetstream().consumer_info(STREAM_NAME, name)
    assert info.config.filter_subject == ASSOCIATION and info.config.deliver_subject is None


def _config(**fields: Any) -> dict[str, Any]:
    return {"stream_name": STREAM_NAME, "config": {"ack_policy": "explicit", "deliver_policy": "all", **fields}}


async def test_the_nameless_create_form_is_refused(outside: Outside, tester: nats.NATS, internal_durable: str) -> None:
    """The name is in the body, where no permission can see it: the form is not allowed at all."""
    subject = f"$JS.API.CONSUMER.CREATE.{STREAM_NAME}"
    body = _config(name=internal_durable, filter_subject=OTHER)
    assert await outside.api(subject, body) is None
    await probe_until(lambda: outside.refused(subject), timeout=10)
    await _unchanged(tester, internal_durable)


@pytest.mark.parametrize("form", ["create", "create_with_filter", "durable_create", "delete"])
async def test_no_named_form_reaches_an_internal_consumer(
    outside: Outside, tester: nats.NATS, internal_durable: str, form: str
) -> None:
    """Re-filtering the association consumer lost associations; here every form leaves it as it was."""
    name = internal_durable
    prefix = "$JS.API.CONSUMER"
    subject, body = {
        "create": (f"{prefix}.CREATE.{STREAM_NAME}.{name}", _config(name=name, durable_name=name)),
        "create_with_filter": (
            f"{prefix}.CREATE.{STREAM_NAME}.{name}.{OTHER}",
            _config(name=name, durable_name=name, filter_subject=OTHER),
        ),
        "durable_create": (
            f"{prefix}.DURABLE.CREATE.{STREAM_NAME}.{name}",
            _config(durable_name=name, filter_subject=OTHER),
        ),
        "delete": (f"{prefix}.DELETE.{STREAM_NAME}.{name}", {}),
    }[form]
    reply = await outside.api(subject, body)
    # The guard refuses a name that is not ext-*; the mirror has no consumer of that name to delete.
    assert reply is not None and reply["error"]["code"] == (404 if form == "delete" else 403), reply
    await _unchanged(tester, internal_durable)


@pytest.mark.parametrize(
    ("name", "fields"),
    [
        ("workspace_x", {"durable_name": "workspace_x"}),
        ("ext-ok", {"durable_name": "workspace_x"}),
        ("ext-ok", {"name": "other", "durable_name": "ext-ok"}),
        ("ext-push", {"durable_name": "ext-push", "deliver_subject": "dossier.evt.fake"}),
    ],
)
async def test_only_ext_pull_consumers_named_in_the_subject_are_made(
    outside: Outside, name: str, fields: dict[str, Any]
) -> None:
    for subject in (
        f"$JS.API.CONSUMER.DURABLE.CREATE.{STREAM_NAME}.{name}",
        f"$JS.API.CONSUMER.CREATE.{STREAM_NAME}.{name}",
        f"$JS.API.CONSUMER.CREATE.{STREAM_NAME}.{name}.dossier.evt.>",
    ):
        reply = await outside.api(subject, _config(**fields))
        assert reply is not None and reply["error"]["code"] == 403, (subject, reply)
    assert await outside.api(f"$JS.API.CONSUMER.INFO.{STREAM_NAME}.{name}", {}) == {
        "type": "io.nats.jetstream.api.v1.consumer_info_response",
        "error": {"code": 404, "err_code": 10014, "description": "consumer not found"},
    }


async def test_a_push_consumer_cannot_deliver_into_a_request_subject(outside: Outside, tester: nats.NATS) -> None:
    """Whatever `deliver_subject` says, deliveries stay in the outside account: the workspace's request
    subject (and a service's reply inbox) never sees them."""
    targets = ["dossier.workspace.list", "_INBOX_gateway.victim"]
    received: list[str] = []

    async def record(msg: Any) -> None:
        received.append(msg.subject)

    for target in targets:
        await tester.subscribe(target, cb=record)
    await subscriptions_live(tester)
    names = [f"ext-push-{uuid.uuid4().hex[:8]}" for _ in targets]
    for name, target in zip(names, targets, strict=True):
        body = _config(name=name, durable_name=name, deliver_subject=target, deliver_policy="new")
        reply = await outside.api(f"$JS.API.CONSUMER.CREATE.{STREAM_NAME}.{name}", body)
        assert reply is not None and reply["error"]["code"] == 403, reply
    event = await publish_event(tester, type="artifact.registered", scope="push-test", data={})

    async def held_outside() -> bool:
        reply = await outside.api(f"$JS.API.STREAM.INFO.{STREAM_NAME}", {})
        return reply is not None and reply["state"]["last_seq"] >= 1

    await probe_until(held_outside, timeout=15)
    for name in names:
        reply = await outside.api(f"$JS.API.CONSUMER.INFO.{STREAM_NAME}.{name}", {})
        # No one in the outside account listens on those subjects, so nothing is even sent.
        assert reply is not None and not reply.get("push_bound"), reply
    await tester.flush()
    assert received == [], f"{event.id} was pushed into {received}"


async def test_a_jetstream_reply_cannot_be_aimed_at_a_services_inbox(outside: Outside, tester: nats.NATS) -> None:
    """A JetStream API request names its own reply subject: the answer must not land in the gateway's inbox."""
    received: list[str] = []

    async def record(msg: Any) -> None:
        received.append(msg.subject)

    await tester.subscribe("_INBOX_gateway.>", cb=record)
    await subscriptions_live(tester)
    await outside.nc.publish("$JS.API.INFO", b"", reply="_INBOX_gateway.forged.1")
    # The same connection's next request is answered after the forged one was.
    assert await outside.api("$JS.API.INFO", {}) is not None
    await tester.flush()
    assert received == []


async def test_an_ext_durable_still_receives_every_event(outside: Outside, tester: nats.NATS) -> None:
    durable = f"ext-{uuid.uuid4().hex[:8]}"
    js = outside.nc.jetstream(timeout=5)
    sub = await js.pull_subscribe(
        "dossier.evt.>", durable=durable, stream=STREAM_NAME, config=api.ConsumerConfig(deliver_policy="new")
    )
    plain = await outside.nc.subscribe("dossier.evt.artifact.>")
    await subscriptions_live(outside.nc)
    events = [await publish_event(tester, type="artifact.registered", scope="ext", data={"n": n}) for n in range(5)]
    seen: list[str] = []

    async def all_delivered() -> bool:
        try:
            for msg in await sub.fetch(10, timeout=0.5):
                seen.append(json.loads(msg.data)["id"])
                await msg.ack()
        except nats.errors.TimeoutError:
            pass
        return all(e.id in seen for e in events)

    await probe_until(all_delivered, timeout=20)
    live = [json.loads((await plain.next_msg(timeout=5)).data)["id"] for _ in events]
    assert live == [e.id for e in events]
    # Its own consumers it may delete: nothing it makes outlives its wish.
    await js.delete_consumer(STREAM_NAME, durable)
    assert outside.violations == []


async def _ext_consumers(outside: Outside) -> list[str]:
    reply = await outside.api(f"$JS.API.CONSUMER.NAMES.{STREAM_NAME}", {})
    assert reply is not None and "error" not in reply, reply
    return list(reply["consumers"] or [])


async def test_consumers_past_the_cap_are_refused_and_the_earlier_ones_still_work(
    outside: Outside, tester: nats.NATS
) -> None:
    """300 creates at once made 300 consumers; the outside account now holds at most its cap (shared.outside),
    the rest are refused with JetStream's own error, and the consumers made keep delivering."""
    cap = MAX_CONSUMERS_DEFAULT  # as the test infrastructure, like the stack, leaves it
    # What earlier tests left counts too (the attacker may delete any ext-* consumer anyway).
    for name in await _ext_consumers(outside):
        await outside.api(f"$JS.API.CONSUMER.DELETE.{STREAM_NAME}.{name}", {})
    run = uuid.uuid4().hex[:8]
    names = [f"ext-flood-{run}-{n:03d}" for n in range(300)]

    async def create(name: str) -> dict[str, Any] | None:
        subject = f"$JS.API.CONSUMER.DURABLE.CREATE.{STREAM_NAME}.{name}"
        return await outside.api(subject, _config(durable_name=name, deliver_policy="new"), timeout=30)

    replies = await asyncio.gather(*(create(name) for name in names))
    made = [name for name, reply in zip(names, replies, strict=True) if reply is not None and "error" not in reply]
    try:
        assert len(made) == cap, f"{len(made)} consumers made"
        refusals = [reply["error"] for reply in replies if reply is not None and "error" in reply]
        assert len(refusals) == len(names) - cap
        assert all(e["err_code"] == 10026 and "maximum consumers" in e["description"] for e in refusals), refusals[0]
        assert MAX_CONSUMERS_SETTING in refusals[0]["description"], "the refusal says what sets the cap"
        assert sorted(await _ext_consumers(outside)) == sorted(made)

        # The consumers made still deliver.
        sub = await outside.nc.jetstream(timeout=5).pull_subscribe_bind(made[0], stream=STREAM_NAME)
        event = await publish_event(tester, type="artifact.registered", scope="cap", data={})
        delivered = await sub.fetch(1, timeout=10)
        assert json.loads(delivered[0].data)["id"] == event.id
        await delivered[0].ack()

        # Deleting one makes room for one.
        await outside.api(f"$JS.API.CONSUMER.DELETE.{STREAM_NAME}.{made.pop()}", {})
        another = f"ext-flood-{run}-again"
        assert "error" not in (await create(another) or {"error": None})
        made.append(another)
    finally:
        for name in made:
            await outside.api(f"$JS.API.CONSUMER.DELETE.{STREAM_NAME}.{name}", {})
    assert outside.violations == []
