"""The MCP tool surface: every contracted tool is implemented, and its schema is its contract model's."""

from __future__ import annotations

from services.gateway.mcp_server import build_server
from services.gateway.mcp_tools import IMPLEMENTATIONS, BusTool
from shared.contracts import mcp as contract


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


def test_a_tool_that_is_its_bus_request_takes_that_request() -> None:
    for tool in contract.TOOLS:
        implementation = IMPLEMENTATIONS[tool.name]
        if isinstance(implementation, BusTool):
            assert tool.input is implementation.subject.request, tool.name
