"""Streamed chunks assembled into the body of a whole reply (services/runhost/policies/stream.py), fed the
chunks the fake server sends for a whole reply, so both sides of the wire format are checked together."""

from __future__ import annotations

import pytest

from services.runhost.policies.openai import completion_from_reply, step_from_completion
from services.runhost.policies.stream import Assembly, StreamTooLong
from tests.support.fake_openai import chunks_of, text_reply, tool_call, tool_calls


def assembled(payload: dict, usage: bool = True) -> dict:
    assembly = Assembly()
    for chunk in chunks_of(payload, usage):
        assembly.add(chunk)
    return assembly.reply()


def test_parallel_calls_split_over_chunks_come_back_whole_and_in_order() -> None:
    payload = tool_calls([("list_catalog", "{}", "a"), ("write_note", '{"source": "s", "text": "a long note"}', "b")])
    body = assembled(payload)
    assert body["choices"][0]["message"]["tool_calls"] == payload["choices"][0]["message"]["tool_calls"]
    assert body["choices"][0]["finish_reason"] == "tool_calls" and body["usage"] == payload["usage"]
    step = step_from_completion(completion_from_reply(body))
    assert (step.name, step.call_id, [s.arguments for s in step.siblings]) == (
        "list_catalog",
        "a",
        [{"source": "s", "text": "a long note"}],
    )


def test_a_cut_call_and_cut_text_keep_their_finish_reason() -> None:
    cut = step_from_completion(
        completion_from_reply(assembled(tool_call("write_draft", '{"text": "# Dr', "c", "length")))
    )
    assert cut.problem == "length" and cut.call_id == "c"
    text = step_from_completion(completion_from_reply(assembled(text_reply("Let me start by", "stop"), usage=False)))
    assert text.problem == "narration" and text.content == "Let me start by" and text.tokens_in is None


def test_a_stream_that_never_stops_sending_is_bounded() -> None:
    assembly = Assembly()
    with pytest.raises(StreamTooLong):
        for _ in range(10_000):
            assembly.add({"choices": [{"index": 0, "delta": {"content": "x" * 1000}}]})
