"""Cursors and unstorable text: pure logic behind The API's paging (docs/api.md) and "Errors"."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

import pytest

from shared.bus import RequestContext, dispatch
from shared.contracts.common import Actor, BusReply, BusRequest, Model, Subject
from shared.errors import Invalid
from shared.paging import Int32, Int64, Keyset, cut_page, decode_cursor, encode_cursor
from shared.storable import require_storable, unstorable_field
from tests.unit.shared.proofs import SIGNER, VERIFIER


def raw_cursor(value: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def test_a_cursor_round_trips_its_key() -> None:
    at = datetime(2026, 11, 30, 9, 1, 2, 345678, tzinfo=UTC)
    assert decode_cursor(encode_cursor([at, "ws_1"]), datetime, str) == (at, "ws_1")
    assert decode_cursor(encode_cursor([7, 12]), Int64, Int64) == (7, 12)


def test_a_cursors_validator_is_built_once_for_its_types(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building one costs about 0.2 ms: a list's every page after the first paid it again."""
    import shared.paging

    built: list[object] = []
    adapter = shared.paging.TypeAdapter

    def counting(shape: object) -> object:
        built.append(shape)
        return adapter(shape)

    shared.paging._adapter.cache_clear()
    monkeypatch.setattr(shared.paging, "TypeAdapter", counting)
    try:
        for key in ([1, "a"], [2, "b"], [3, "c"]):
            assert decode_cursor(encode_cursor(key), Int32, str) == tuple(key)
    finally:
        shared.paging._adapter.cache_clear()
    assert len(built) == 1


@pytest.mark.parametrize(
    ("cursor", "types"),
    [
        ("%%%", (Int32,)),
        (raw_cursor({"a": 1}), (Int32,)),
        (raw_cursor([]), (Int32,)),
        (raw_cursor([1, 2]), (Int32,)),
        (raw_cursor(["x"]), (Int32,)),
        (raw_cursor([2**31]), (Int32,)),
        (raw_cursor([-1]), (Int32,)),
        (raw_cursor([2**63]), (Int64,)),
        (raw_cursor(["2026-11-30T09:00:00", "ws_1"]), (datetime, str)),
        (raw_cursor(["not a time", "ws_1"]), (datetime, str)),
        (raw_cursor(["a\x00"]), (str,)),
        (base64.urlsafe_b64encode(b'["a\\ud800"]').decode(), (str,)),
        (base64.urlsafe_b64encode(b"\xff\xfe").decode(), (str,)),
    ],
)
def test_a_cursor_the_list_did_not_give_out_is_invalid(cursor: str, types: tuple[object, ...]) -> None:
    with pytest.raises(Invalid) as err:
        decode_cursor(cursor, *types)
    assert err.value.details == {"field": "cursor"}


class Statements:
    """Takes the place of a connection: keeps each statement asked with its parameters, answers no rows."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, tuple[object, ...]]] = []

    async def fetch(self, query: str, *args: object) -> list[object]:
        self.asked.append((query, args))
        return []


async def test_a_keyset_asks_for_the_rows_after_its_key_in_its_order() -> None:
    newest_first = Keyset(("w.created_at", "w.id"), (datetime, str), descending=True)
    conn, at = Statements(), datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    query = "SELECT w.id FROM w WHERE w.scope = $1"
    await newest_first.fetch(conn, query, "s", after=None, limit=3)
    await newest_first.fetch(conn, query, "s", after=(at, "ws_1"), limit=3)
    await Keyset(("seq",), (Int64,)).fetch(conn, "SELECT * FROM d WHERE d.w = $1", "w", after=(7,), limit=2)
    assert conn.asked == [
        (f"{query} ORDER BY w.created_at DESC, w.id DESC LIMIT $2", ("s", 3)),
        (
            f"{query} AND (w.created_at, w.id) < ($2, $3) ORDER BY w.created_at DESC, w.id DESC LIMIT $4",
            ("s", at, "ws_1", 3),
        ),
        ("SELECT * FROM d WHERE d.w = $1 AND (seq) > ($2) ORDER BY seq LIMIT $3", ("w", 7, 2)),
    ]


def test_a_keyset_cursor_holds_the_key_of_the_last_row_by_its_column_names() -> None:
    keyset = Keyset(("w.created_at", "w.id"), (datetime, str), descending=True)
    at = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    rows = [{"created_at": at, "id": f"ws_{i}", "title": "t"} for i in range(3)]
    page, cursor = keyset.cut(rows, 2)
    assert page == rows[:2] and keyset.after(cursor) == (at, "ws_1")
    assert keyset.cut(rows, 3) == (rows, None) and keyset.after(None) is None
    with pytest.raises(Invalid):
        keyset.after(encode_cursor([7]))


def test_cut_page_gives_a_cursor_only_when_another_page_exists() -> None:
    rows = [{"v": i} for i in range(1, 6)]
    page, cursor = cut_page(rows, 4, lambda r: (r["v"],))
    assert page == rows[:4] and cursor is not None and decode_cursor(cursor, Int32) == (4,)
    assert cut_page(rows, 5, lambda r: (r["v"],)) == (rows, None)
    assert cut_page([], 5, lambda r: (r["v"],)) == ([], None)


def test_unstorable_text_is_found_and_named() -> None:
    assert unstorable_field({"title": "fine", "goal": "ok \U0001f600"}) is None
    assert unstorable_field({"title": "a\x00"}) == "title"
    assert unstorable_field({"history": [{"id": "x"}, {"id": "\udc00"}]}) == "history.1.id"
    assert unstorable_field({"nested": {"k\x00": 1}}) == "nested"
    assert unstorable_field("\ud800", "body") == "body"
    deep: object = "a\x00"
    for _ in range(10_000):
        deep = [deep]
    assert unstorable_field({"x": deep}) == "x" + ".0" * 10_000
    with pytest.raises(Invalid) as err:
        require_storable({"q": "a\x00"})
    assert err.value.details == {"field": "q"}


class Text(Model):
    text: str


async def test_the_bus_envelope_refuses_unstorable_text() -> None:
    async def never(ctx: RequestContext, req: Text) -> None:
        raise AssertionError("the rule must not see unstorable text")

    actor = Actor(scope="acme", principal="alice")
    proof = SIGNER.prove("s", actor, "req-1", data={"text": "a\x00"})
    nul = BusRequest(actor=actor, proof=proof, request_id="req-1", data={"text": "a\x00"}).model_dump_json().encode()
    lone = b'{"actor": {"scope": "acme", "principal": "alice"}, "data": {"text": "a\\ud800"}}'
    for raw in (nul, lone):
        reply = BusReply.model_validate_json(await dispatch(raw, Subject("s", Text, Text), never, VERIFIER))
        assert reply.error is not None and reply.error.code == "invalid" and reply.error.details["field"] == "text"
