"""Every request gets a reply: the envelope for malformed bodies, refusals and faults."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import asyncpg
import pytest
from pydantic import Field

from shared.bus import BusClient, RequestContext, _encode_envelope, dispatch
from shared.contracts.common import Actor, BusReply, BusRequest, ErrorBody, Model, Subject
from shared.errors import HTTP_STATUS, LOST_SESSION, Conflict, DomainError, Invalid, Unavailable, from_envelope
from tests.support.stack import ROOT
from tests.unit.shared.proofs import SIGNER, VERIFIER


class Echo(Model):
    text: str = Field(min_length=1)


async def echo(ctx: RequestContext, req: Echo) -> dict[str, str]:
    if req.text == "conflict":
        raise Conflict("taken", {"current_version": 3})
    if req.text == "boom":
        raise RuntimeError("/secret/path/of/the/server")
    if req.text == "lost":
        raise asyncpg.AdminShutdownError("terminating connection due to administrator command")
    return {"text": req.text, "scope": ctx.actor.scope}


def request(data: dict[str, object], subject: str = "t.echo") -> bytes:
    actor = Actor(scope="acme", principal="alice")
    proof = SIGNER.prove(subject, actor, "req-1", data=data)
    return BusRequest(actor=actor, proof=proof, request_id="req-1", data=data).model_dump_json().encode()


async def call(raw: bytes) -> BusReply:
    return BusReply.model_validate_json(await dispatch(raw, Subject("t.echo", Echo, Echo), echo, VERIFIER))


async def test_success_carries_data() -> None:
    reply = await call(request({"text": "hi"}))
    assert reply.ok and reply.data == {"text": "hi", "scope": "acme"}


@pytest.mark.parametrize(
    "raw", [b"", b"not json{", b"[]", b'{"data": {}}', b'{"actor": {"scope": "", "principal": "a"}}']
)
async def test_malformed_envelope_answers_invalid(raw: bytes) -> None:
    reply = await call(raw)
    assert not reply.ok and reply.error is not None
    assert reply.error.code == "invalid"


async def test_malformed_payload_names_the_field() -> None:
    reply = await call(request({"text": ""}))
    assert reply.error is not None and reply.error.code == "invalid"
    assert reply.error.details["field"] == "text"
    reply = await call(request({"text": "x", "extra": 1}))
    assert reply.error is not None and reply.error.details["field"] == "extra"


async def test_domain_error_travels_with_details() -> None:
    reply = await call(request({"text": "conflict"}))
    assert reply.error is not None
    assert (reply.error.code, reply.error.details) == ("conflict", {"current_version": 3})


async def test_unexpected_fault_is_internal_without_leaking() -> None:
    reply = await call(request({"text": "boom"}))
    assert reply.error is not None and reply.error.code == "internal"
    assert "/secret" not in json.dumps(reply.model_dump())


async def test_a_handler_that_lost_its_database_session_answers_timeout() -> None:
    """Its outcome is not known, as when no answer came in time: not `internal`, and not a retry-safe 503."""
    reply = await call(request({"text": "lost"}))
    assert reply.error is not None
    assert (reply.error.code, reply.error.message) == ("timeout", LOST_SESSION)


def test_error_codes_map_to_contract_statuses() -> None:
    """Every code and its status as docs/api.md lists them (its paragraph on errors), and no other."""
    errors = (ROOT / "docs" / "api.md").read_text().split("- Errors:", 1)[1].split("\n- ", 1)[0]
    assert HTTP_STATUS == {code: int(status) for code, status in re.findall(r"`([a-z_]+)`\s+(\d{3})", errors)}
    err = Unavailable("gone", reason="withdrawn")
    assert err.envelope() == {"error": {"code": "unavailable", "message": "gone", "details": {"reason": "withdrawn"}}}
    with pytest.raises(ValueError):
        DomainError("x", code="teapot")


def test_unknown_code_from_the_wire_becomes_internal() -> None:
    assert from_envelope({"code": "teapot", "message": "?"}).code == "internal"
    assert from_envelope({"code": "not_found", "message": "no"}).code == "not_found"


class Answer(Model):
    text: str
    count: int


async def answer_with(value: object) -> BusReply:
    async def handler(ctx: RequestContext, req: Echo) -> object:
        return value

    return BusReply.model_validate_json(
        await dispatch(request({"text": "x"}, "t.any"), Subject("t.any", Echo, Echo), handler, VERIFIER)
    )


@pytest.mark.parametrize(
    ("value", "data"),
    [
        (Answer(text="é", count=2), {"text": "é", "count": 2}),
        ([Answer(text="a", count=1)], [{"text": "a", "count": 1}]),
        ({"n": None}, {"n": None}),
        # orjson refuses these two; the reply falls back to pydantic's encoder rather than failing.
        ({"big": 2**70}, {"big": 2**70}),
        ({1: "int key"}, {"1": "int key"}),
    ],
)
async def test_a_result_is_encoded_once_whatever_its_shape(value: object, data: object) -> None:
    reply = await answer_with(value)
    assert reply.ok and reply.error is None and reply.data == data


async def test_an_envelope_orjson_refuses_is_still_sent_or_named() -> None:
    actor = {"scope": "acme", "principal": "alice"}
    sent = _encode_envelope({"actor": actor, "grant": None, "request_id": "r", "data": {"amount": Decimal("1.5")}})
    assert BusRequest.model_validate_json(sent).data == {"amount": "1.5"}
    with pytest.raises(Invalid) as refused:
        _encode_envelope({"actor": actor, "grant": None, "request_id": "r", "data": {"title": "a\ud800"}})
    assert refused.value.details["field"] == "title"


class Replies:
    """A connection whose every request is answered with `reply`; it keeps what was sent."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.sent: list[bytes] = []

    async def request(self, subject: str, body: bytes, timeout: float, headers: object) -> object:
        self.sent.append(body)
        return type("Msg", (), {"data": self.reply})()


def client(reply: bytes) -> tuple[BusClient, Replies]:
    nc = Replies(reply)
    return BusClient(nc, signer=SIGNER), nc  # type: ignore[arg-type]


ANSWER = Subject("t.any", Echo, Answer)
ALICE = Actor(scope="acme", principal="alice")


@pytest.mark.parametrize("value", [Answer(text='a "quoted" é', count=2), {"big": 2**70}, {"a": 1, "error": None}, None])
async def test_call_json_passes_the_owners_data_on_as_written(value: object) -> None:
    async def handler(ctx: RequestContext, req: Echo) -> object:
        return value

    written = await dispatch(request({"text": "x"}, "t.any"), ANSWER, handler, VERIFIER)
    bus, _ = client(written)
    data = await bus.call_json(ANSWER, Echo(text="x"), actor=ALICE)
    assert json.loads(data) == BusReply.model_validate_json(written).data
    assert written == b'{"ok":true,"data":' + data + b"}"


@pytest.mark.parametrize("data", [{"text": "a", "count": 1}, None, [1, {"error": None}]])
async def test_call_json_reads_a_reply_written_whole_as_well(data: object) -> None:
    bus, _ = client(BusReply(ok=True, data=data).model_dump_json().encode())
    assert json.loads(await bus.call_json(ANSWER, Echo(text="x"), actor=ALICE)) == data


async def test_call_json_raises_the_refusal() -> None:
    bus, _ = client(BusReply(ok=False, error=ErrorBody(code="conflict", message="taken")).model_dump_json().encode())
    with pytest.raises(Conflict):
        await bus.call_json(ANSWER, Echo(text="x"), actor=ALICE)


class Edit(Model):
    summary: str | None = None
    count: int = 0


async def test_a_request_carries_only_the_fields_its_caller_set() -> None:
    bus, nc = client(b'{"ok":true,"data":null}')
    await bus.call(Subject("t.edit", Edit, type(None)), Edit(count=0), actor=ALICE)
    await bus.call(Subject("t.edit", Edit, type(None)), Edit(summary=None), actor=ALICE)
    assert [BusRequest.model_validate_json(body).data for body in nc.sent] == [{"count": 0}, {"summary": None}]
