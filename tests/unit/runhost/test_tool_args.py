"""Tool arguments are checked against each tool's schema, and any assistant message shape becomes a step."""

from __future__ import annotations

import pytest

from services.runhost.policies.base import TOOLS
from services.runhost.policies.openai import MALFORMED, PolicyError, step_from_message
from services.runhost.tool_args import ARGUMENTS, BadArguments, parse_arguments


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


@pytest.mark.parametrize(
    ("content", "answer"),
    [
        ("# answer", "# answer"),
        ([{"type": "text", "text": "# part one"}, {"type": "text", "text": "part two"}], "# part one\npart two"),
        (42, "42"),
        ({"answer": "x"}, '{"answer": "x"}'),
    ],
)
def test_message_content_of_any_shape_becomes_an_answer(content: object, answer: str) -> None:
    call = step_from_message({"role": "assistant", "content": content})
    assert call.name == "finish" and call.arguments == {"answer": answer}


def test_an_empty_or_odd_message_is_answered_back_not_failed() -> None:
    assert step_from_message({"role": "assistant", "content": None}).name == ""
    assert step_from_message({"role": "assistant", "content": [], "tool_calls": []}).name == ""
    odd = step_from_message({"tool_calls": [{"id": "c1", "function": {"name": "read_file", "arguments": "[1]"}}]})
    assert odd.name == "read_file" and MALFORMED in odd.arguments
    weird = step_from_message({"tool_calls": ["nonsense"]})
    assert weird.name == ""
    with pytest.raises(PolicyError):
        step_from_message(["not", "a", "message"])
