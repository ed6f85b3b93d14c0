"""The MCP tool surface: every contracted tool is implemented, its input schema is its contract model's, every
field it takes is described, and it declares the model it answers."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from services.gateway.mcp.server import _tool_list, build_server
from services.gateway.mcp.tools import IMPLEMENTATIONS, BusTool, RunTool
from shared.contracts import mcp as contract
from shared.contracts import runhost


def test_every_contracted_tool_has_one_implementation() -> None:
    assert set(IMPLEMENTATIONS) == {tool.name for tool in contract.TOOLS}
    assert len(contract.TOOLS) == len({tool.name for tool in contract.TOOLS})


def test_input_schemas_are_the_contract_models_and_carry_no_actor() -> None:
    server = build_server(version="test")
    for tool in contract.TOOLS:
        schema = server.get_tool_input_schema(tool.name)  # type: ignore[misc]
        assert schema == tool.input.model_json_schema()
        assert schema["type"] == "object" and schema.get("additionalProperties") is False, tool.name
        assert "actor" not in schema.get("properties", {}) and "grant" not in schema.get("properties", {})


def test_a_tool_that_is_its_bus_request_takes_that_request_and_answers_its_reply() -> None:
    for tool in contract.TOOLS:
        implementation = IMPLEMENTATIONS[tool.name]
        if isinstance(implementation, BusTool):
            assert tool.input is implementation.subject.request, tool.name
        if isinstance(implementation, BusTool | RunTool):
            assert tool.output is implementation.subject.reply, tool.name


def test_a_run_bound_tool_takes_its_requests_own_fields_and_the_run_from_the_session() -> None:
    for tool in contract.TOOLS:
        implementation = IMPLEMENTATIONS[tool.name]
        if isinstance(implementation, RunTool):
            own = set(tool.input.model_fields) - {"run_id", "lease"}
            assert own <= set(implementation.subject.request.model_fields), tool.name
            assert {"run_id", "lease"} <= set(implementation.subject.request.model_fields)
            required = tool.input.model_json_schema().get("required", [])
            assert "run_id" not in required and "lease" not in required, tool.name


def _undescribed(schema: dict[str, Any], where: str) -> list[str]:
    missing = [f"{where}.{name}" for name, field in schema.get("properties", {}).items() if "description" not in field]
    for name, definition in schema.get("$defs", {}).items():
        missing += _undescribed(definition, f"{where}/{name}")
    return missing


def test_every_input_field_is_described_and_every_tool_declares_its_output() -> None:
    tools = _tool_list()
    assert {t.name for t in tools} == {t.name for t in contract.TOOLS}
    missing = [field for t in tools for field in _undescribed(t.input_schema, t.name)]
    assert missing == []
    for tool in tools:
        assert tool.output_schema is not None and tool.output_schema["type"] == "object", tool.name
    described = {t.name: t.description or "" for t in tools}
    assert "publication" in described[contract.RUN_SEARCH], "run_search says it finds publications too"


def test_one_way_to_begin_a_run_you_drive() -> None:
    start = contract.StartRunRequest.model_json_schema()["properties"]
    assert "driver" not in start and "lease_seconds" not in start and "agent" not in start
    with pytest.raises(ValidationError):
        contract.StartRunRequest.model_validate(
            {"workspace_id": "ws", "question": "q?", "request_id": "r", "model": "external"}
        )


def test_run_read_advertises_only_the_refs_a_run_reads() -> None:
    ask = {"ref": {"kind": "evidence", "id": "ev_1"}}
    assert contract.RunReadRequest.model_validate(ask).ref.kind == "evidence"
    for refused in (
        {"ref": {"kind": "source", "id": "announcement", "version": 1}},
        {"ref": {"kind": "artifact", "id": "art_1", "version": 1}},
        {"ref": {"kind": "publication", "id": "pub_1"}},
        ask | {"locator": "page:1"},
    ):
        with pytest.raises(ValidationError):
            contract.RunReadRequest.model_validate(refused)
    # What it takes is what the run host's read takes.
    read = contract.RunReadRequest.model_validate({"ref": {"kind": "publication", "id": "pub_1", "version": 2}})
    body = read.model_dump(exclude={"run_id", "lease"}) | {"run_id": "run_1", "lease": "rl_x"}
    assert runhost.ExternalReadRequest.model_validate(body).ref.version == 2
