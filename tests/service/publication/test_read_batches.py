"""Reads asked for together go to the publication owner in one message (shared/batching.py), on real NATS
and PostgreSQL: each caller gets its own answer, a malformed batch is refused as a whole, and a caller whose
owner does not know batches gets its answers one by one."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import nats
import orjson
import pytest

from services.publication.app import create_app
from shared.batching import BATCH_HEADER, BATCH_MAX, frames, unframe
from shared.bus import BusClient
from shared.contracts import publication as c
from shared.contracts.common import Actor, BusReply, Model, Subject
from shared.errors import NotFound
from shared.serving import subscriptions_live
from shared.settings import PublicationSettings
from tests.support.infra import Infra
from tests.support.service import running, settings_from


@pytest.fixture
async def publication(infra: Infra) -> AsyncIterator[PublicationSettings]:
    settings = settings_from(infra.settings_env("publication"), PublicationSettings)
    async with running(create_app(settings)):
        yield settings


@pytest.fixture
async def spy(infra: Infra) -> AsyncIterator[list[nats.aio.msg.Msg]]:
    """Every message sent on the read subject, as a subscriber outside the owner's queue group gets it."""
    nc = await infra.connect()
    seen: list[nats.aio.msg.Msg] = []

    async def keep(msg: nats.aio.msg.Msg) -> None:
        seen.append(msg)

    await nc.subscribe(c.READ, cb=keep)
    await subscriptions_live(nc)
    try:
        yield seen
    finally:
        await nc.close()


def someone() -> Actor:
    return Actor(scope=f"s{uuid.uuid4().hex[:8]}", principal="alice")


async def commit(bus: BusClient, who: Actor, body: str) -> str:
    return str((await bus.call_raw(c.COMMIT, {"title": "Report", "body": body}, actor=who))["id"])


def read(pub_id: str, version: int = 1) -> c.ReadRequest:
    return c.ReadRequest(id=pub_id, version=version)


async def test_reads_asked_together_go_in_one_message_and_each_caller_gets_its_own_answer(
    publication: PublicationSettings, bus: BusClient, spy: list[nats.aio.msg.Msg]
) -> None:
    alice, bob = someone(), someone()
    a, b = await commit(bus, alice, "Alice's report"), await commit(bus, bob, "Bob's report")
    spy.clear()
    answers = await asyncio.gather(
        bus.call(c.READ, read(a), actor=alice),
        bus.call(c.READ, read(b), actor=bob),
        bus.call(c.READ, read(a, 2), actor=alice),
        bus.call(c.READ, read(b), actor=alice),  # another scope's publication: not found for her
        bus.call(c.READ, read(a), actor=alice),
        return_exceptions=True,
    )
    assert [getattr(x, "body", None) for x in answers] == [
        "Alice's report",
        "Bob's report",
        None,
        None,
        "Alice's report",
    ]
    assert isinstance(answers[2], NotFound) and isinstance(answers[3], NotFound)
    await asyncio.sleep(0.2)
    assert [m.headers for m in spy] == [{BATCH_HEADER: "5"}]
    # Each envelope in it is the one a read alone sends: its own actor, request id and proof.
    envelopes = [orjson.loads(part) for part in unframe(spy[0].data, 5)]
    assert [e["actor"]["scope"] for e in envelopes] == [alice.scope, bob.scope, alice.scope, alice.scope, alice.scope]
    assert len({e["proof"] for e in envelopes}) == len({e["request_id"] for e in envelopes}) == 5
    # A read alone goes as it always did.
    spy.clear()
    assert (await bus.call(c.READ, read(b), actor=bob)).body == "Bob's report"
    await asyncio.sleep(0.2)
    assert [m.headers for m in spy] == [None]


async def test_more_reads_than_a_batch_holds_go_in_several(
    publication: PublicationSettings, bus: BusClient, spy: list[nats.aio.msg.Msg]
) -> None:
    who = someone()
    pub = await commit(bus, who, "One report")
    spy.clear()
    answers = await asyncio.gather(*(bus.call(c.READ, read(pub), actor=who) for _ in range(BATCH_MAX + 3)))
    assert {x.body for x in answers} == {"One report"}
    await asyncio.sleep(0.2)
    assert sorted(int((m.headers or {}).get(BATCH_HEADER, 1)) for m in spy) == [3, BATCH_MAX]


async def test_replies_too_large_for_one_message_are_sent_in_part_and_the_rest_asked_for_alone(
    publication: PublicationSettings, bus: BusClient, spy: list[nats.aio.msg.Msg]
) -> None:
    """Twelve reads of a body near the size limit do not fit one message of the server's max_payload: the
    owner answers what fits and leaves the rest out, and those are asked for again, one message each."""
    who = someone()
    body = "x" * (publication.max_body_bytes - 100)
    pub = await commit(bus, who, body)
    assert 12 * len(body) > bus._nc.max_payload
    spy.clear()
    answers = await asyncio.gather(*(bus.call(c.READ, read(pub), actor=who) for _ in range(12)))
    assert all(x.body == body for x in answers)
    await asyncio.sleep(0.2)
    assert spy[0].headers == {BATCH_HEADER: "12"}
    alone = [m for m in spy[1:] if not m.headers]
    assert len(alone) == len(spy) - 1 and 0 < len(alone) < 12, [m.headers for m in spy]


def forged_batches(envelope: bytes) -> dict[str, tuple[dict[str, str], bytes]]:
    return {
        "a count that is no number": ({BATCH_HEADER: "two"}, frames([envelope, envelope])),
        "a count of none": ({BATCH_HEADER: "0"}, b""),
        "more than a batch holds": ({BATCH_HEADER: str(BATCH_MAX + 1)}, frames([envelope] * (BATCH_MAX + 1))),
        "fewer frames than counted": ({BATCH_HEADER: "3"}, frames([envelope, envelope])),
        "more frames than counted": ({BATCH_HEADER: "1"}, frames([envelope, envelope])),
        "a frame cut short": ({BATCH_HEADER: "2"}, frames([envelope, envelope])[:-5]),
        "a length cut short": ({BATCH_HEADER: "2"}, frames([envelope])[:-1] + b"\x00\x00"),
        "a length past the end": ({BATCH_HEADER: "1"}, b"\xff\xff\xff\xff" + envelope),
    }


async def test_a_malformed_batch_is_refused_whole_and_reads_nothing(
    publication: PublicationSettings, bus: BusClient, infra: Infra
) -> None:
    who = someone()
    pub = await commit(bus, who, "A report")
    data = {"id": pub, "version": 1}
    nc = await infra.connect()
    try:
        for what, (headers, body) in forged_batches(b"{}").items():
            raw = (await nc.request(c.READ, body, headers=headers, timeout=5)).data
            reply = BusReply.model_validate_json(raw)
            assert not reply.ok and reply.error is not None, what
            assert reply.error.code == "invalid" and reply.error.details["field"] == BATCH_HEADER, (what, reply)
        # A well-formed batch of one genuine envelope is answered, framed.
        proof = infra.signer().prove(c.READ, who, "req-one", data=data)
        envelope = orjson.dumps({"actor": who.model_dump(), "request_id": "req-one", "proof": proof, "data": data})
        reply_msg = await nc.request(c.READ, frames([envelope]), headers={BATCH_HEADER: "1"}, timeout=5)
        assert not reply_msg.headers
        (answer,) = unframe(reply_msg.data, 1)
        assert BusReply.model_validate_json(answer).data["body"] == "A report"
    finally:
        await nc.close()


class Echo(Model):
    text: str


ECHO = Subject("dossier.test.echo_batched", Echo, Echo, "A batched subject whose owner knows no batches.", batched=True)


async def test_an_owner_that_does_not_know_batches_gets_each_request_again_alone(infra: Infra, bus: BusClient) -> None:
    """An owner of an earlier release reads a batch as one malformed envelope and refuses it; the caller
    then sends each request on its own, and every caller gets its own answer."""
    nc = await infra.connect()
    received: list[dict[str, str] | None] = []

    async def answer(msg: nats.aio.msg.Msg) -> None:
        received.append(msg.headers)
        try:
            text = orjson.loads(msg.data)["data"]["text"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            reply: dict[str, Any] = {"ok": False, "error": {"code": "invalid", "message": "malformed", "details": {}}}
        else:
            reply = {"ok": True, "data": {"text": text.upper()}}
        await msg.respond(orjson.dumps(reply))

    await nc.subscribe(ECHO, queue="test", cb=answer)
    await subscriptions_live(nc)
    try:
        who = someone()
        answers = await asyncio.gather(*(bus.call(ECHO, Echo(text=t), actor=who) for t in ("a", "b", "c")))
        assert [x.text for x in answers] == ["A", "B", "C"]
        assert received == [{BATCH_HEADER: "3"}, None, None, None]
    finally:
        await nc.close()
