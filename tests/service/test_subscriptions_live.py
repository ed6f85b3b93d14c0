"""A service says it serves only once the server has its subscriptions (shared/serving.py).

The order of what a client writes to its socket is read directly, so these tests do not depend on timing:
nats-py's own flush writes its PING ahead of the SUBs still queued for its flusher task, which is why one
flush did not make a responder live, and `subscriptions_live` ends with a PING written after them.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg

from shared.subscriptions import subscriptions_live
from tests.support.infra import Infra


class Wire:
    """Every protocol line one connection writes to its socket, in the order written."""

    def __init__(self, nc: nats.NATS) -> None:
        self.lines: list[str] = []
        transport: Any = nc._transport
        transport.write = self._recorded(transport.write)
        transport.writelines = self._recorded_lines(transport.writelines)

    def _note(self, payload: bytes) -> None:
        self.lines.extend(line.decode(errors="replace") for line in bytes(payload).split(b"\r\n") if line)

    def _recorded(self, write: Callable[[bytes], None]) -> Callable[[bytes], None]:
        def recorded(payload: bytes) -> None:
            self._note(payload)
            write(payload)

        return recorded

    def _recorded_lines(self, writelines: Callable[[list[bytes]], None]) -> Callable[[list[bytes]], None]:
        def recorded(payloads: list[bytes]) -> None:
            for payload in payloads:
                self._note(payload)
            writelines(payloads)

        return recorded

    def first(self, verb: str) -> int:
        return next(index for index, line in enumerate(self.lines) if line.split(" ")[0] == verb)

    def last(self, verb: str) -> int:
        return max(index for index, line in enumerate(self.lines) if line.split(" ")[0] == verb)


@pytest.fixture
async def connection(infra: Infra) -> AsyncIterator[nats.NATS]:
    nc = await infra.connect()
    try:
        yield nc
    finally:
        await nc.close()


def subject() -> str:
    return f"dossier.test.live.{uuid.uuid4().hex}"


async def test_one_flush_of_nats_py_writes_its_ping_before_the_queued_subscription(connection: nats.NATS) -> None:
    # If a nats-py release writes the SUB first, this fails, and subscriptions_live can be one flush again.
    wire = Wire(connection)
    await connection.subscribe(subject())
    await connection.flush()
    assert wire.first("PING") < wire.first("SUB"), wire.lines


async def test_subscriptions_live_ends_with_a_ping_written_after_the_subscription(connection: nats.NATS) -> None:
    wire = Wire(connection)
    await connection.subscribe(subject())
    await connection.subscribe(subject(), queue="live")
    await subscriptions_live(connection)
    assert wire.last("SUB") < wire.last("PING"), wire.lines


async def test_a_new_responder_answers_a_request_sent_at_once(infra: Infra, connection: nats.NATS) -> None:
    requester = await infra.connect()

    async def answer(msg: Msg) -> None:
        await msg.respond(b"here")

    try:
        for _ in range(50):
            target = subject()
            await connection.subscribe(target, queue="live", cb=answer)
            await subscriptions_live(connection)
            reply = await requester.request(target, b"", timeout=5)
            assert reply.data == b"here"
    finally:
        await requester.close()
