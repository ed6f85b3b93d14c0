"""Tool arguments are checked against each tool's schema, and any assistant message shape becomes a step."""

from __future__ import annotations

import hashlib
import json

import pytest

from services.runhost.policies.openai import MALFORMED, completion_from_reply, step_from_completion
from services.runhost.policies.vocabulary import ToolCall
from services.runhost.tool_args import ARGUMENTS, TOOLS, BadArguments, parse_arguments
from services.runhost.tools import TABLE


def test_every_tool_schema_has_an_argument_model_with_the_same_fields() -> None:
    for tool in TOOLS:
        name = tool["function"]["name"]
        params = tool["function"]["parameters"]
        model = ARGUMENTS[name]
        assert set(model.model_fields) == set(params["properties"]), name
        required = {n for n, f in model.model_fields.items() if f.is_required()}
        assert required == set(params["required"]), name


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("read_publication", {"id": "pub_1", "version": "x"}, "version"),
        ("read_publication", {"id": None, "version": 1}, "id"),
        ("search_evidence", {"query": None}, "query"),
        ("search_evidence", {}, "query"),
        ("read_file", {"path": "plan.md", "offset": "x"}, "offset"),
        ("write_note", {"source": 5, "text": ["a"]}, "source"),
        ("write_draft", {"text": {"a": 1}}, "text"),
        ("list_catalog", {"unexpected": 1}, "unexpected"),
        ("finish", {"answer": 42}, "answer"),
    ],
)
def test_wrong_arguments_are_refused_with_a_message_naming_the_field(
    tool: str, arguments: dict[str, object], field: str
) -> None:
    with pytest.raises(BadArguments) as caught:
        parse_arguments(tool, arguments)
    assert str(caught.value).startswith(f"bad arguments for {tool}") and field in str(caught.value)


def test_numbers_sent_as_strings_are_taken_as_meant() -> None:
    args = parse_arguments("read_publication", {"id": "pub_1", "version": "3"})
    assert args.model_dump() == {"id": "pub_1", "version": 3}


def step(message: object, finish_reason: str = "stop") -> ToolCall:
    return step_from_completion(
        completion_from_reply({"choices": [{"message": message, "finish_reason": finish_reason}]})
    )


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("# answer", "# answer"),
        ([{"type": "text", "text": "# part one"}, {"type": "text", "text": "part two"}], "# part one\npart two"),
        (42, "42"),
        ({"answer": "x"}, '{"answer": "x"}'),
    ],
)
def test_message_content_of_any_shape_is_narration_never_an_answer(content: object, text: str) -> None:
    call = step({"role": "assistant", "content": content})
    assert call.name == "" and call.problem == "narration" and call.content == text


def test_finish_reason_decides_a_cut_or_filtered_reply() -> None:
    cut = step(
        {"tool_calls": [{"id": "c1", "function": {"name": "write_draft", "arguments": '{"text": "ab'}}]}, "length"
    )
    assert (cut.name, cut.problem, cut.call_id) == ("write_draft", "length", "c1")
    assert step({"content": "The answer is"}, "length").problem == "length"
    assert step({"content": None}, "content_filter").problem == "content_filter"


def test_parallel_tool_calls_are_all_kept_in_order() -> None:
    calls = [{"id": f"c{n}", "function": {"name": "read_file", "arguments": f'{{"path": "p{n}"}}'}} for n in range(3)]
    first = step({"tool_calls": calls}, "tool_calls")
    assert [c.arguments["path"] for c in first.calls()] == ["p0", "p1", "p2"]
    assert ToolCall.from_record(first.record()).calls() == first.calls()


def test_an_empty_or_odd_message_is_answered_back_not_failed() -> None:
    assert step({"role": "assistant", "content": None}).problem == "empty"
    assert step({"role": "assistant", "content": [], "tool_calls": []}).problem == "empty"
    odd = step({"tool_calls": [{"id": "c1", "function": {"name": "read_file", "arguments": "[1]"}}]})
    assert odd.name == "read_file" and MALFORMED in odd.arguments
    assert step({"tool_calls": ["nonsense"]}).problem == "empty"
    assert step(["not", "a", "message"]).problem == "empty"


def test_the_tool_schemas_are_the_ones_earlier_runs_were_journaled_with() -> None:
    # A run's model-call journal is keyed by its model input, tools included (services/runhost/journal.py):
    # schemas written otherwise would leave an earlier attempt's answers unfound on resume. Changed on purpose
    # only, as when list_catalog took its cursor and search_evidence a `cursor` (issue 37): a run resumed across
    # that upgrade asks its model again.
    canonical = json.dumps(TOOLS, sort_keys=True).encode()
    assert hashlib.sha256(canonical).hexdigest() == "86be0948846d33d5f5aec634f895100c32425b3d3b1f9d6fb5aa7e4f4d2f6fcd"


def test_a_tool_schema_shows_each_field_by_its_json_type_and_the_tool_by_its_docstring() -> None:
    (search,) = [t["function"] for t in TOOLS if t["function"]["name"] == "search_evidence"]
    assert search["description"].startswith("Full-text search over active source versions")
    assert search["parameters"] == {
        "type": "object",
        "properties": {"query": {"type": "string"}, "source_id": {"type": "string"}, "cursor": {"type": "string"}},
        "required": ["query"],
        "additionalProperties": False,
    }


def test_every_tool_but_finish_is_dispatched_with_its_own_argument_model() -> None:
    assert set(TABLE) == set(ARGUMENTS) - {"finish"}
    assert all(TABLE[name].args is ARGUMENTS[name] for name in TABLE)
