"""The MCP server behind `/mcp`: its tools and resources, as the SDK's low-level `Server`.

Each tool call and resource read is the same bus call as the API's (services/gateway/mcp/tools.py), made
with the actor that McpEndpoint authenticated for this HTTP request, so scopes, grants and eligibility are
the owner services' answers and nothing is cached here. Every call is logged with its request id.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate
from pydantic import ValidationError
from starlette.requests import Request

from services.gateway.mcp.caller import CALLER, Caller
from services.gateway.mcp.tools import IMPLEMENTATIONS
from shared.bus import validation_details
from shared.contracts import assets, publication
from shared.contracts import mcp as m
from shared.contracts.common import Model
from shared.errors import DomainError, Invalid, Unauthenticated
from shared.observe import bound

log = logging.getLogger("dossier.gateway.mcp")

# JSON-RPC error codes for resource reads: the MCP spec's "resource not found", and the generic ones.
RESOURCE_NOT_FOUND = -32002
_RESOURCE_CODES = {"not_found": RESOURCE_NOT_FOUND, "invalid": types.INVALID_PARAMS}

_CONTRACTS = {tool.name: tool for tool in m.TOOLS}
# Names and URIs come from the caller: log lines and messages quote at most this much of them.
_QUOTED = 200
_PUBLICATION_URI = UriTemplate.parse(m.PUBLICATION_VERSION_URI)
_EVIDENCE_URI = UriTemplate.parse(m.EVIDENCE_URI)


def _caller(ctx: ServerRequestContext[Any, Any]) -> Caller:
    request = ctx.request
    caller = request.scope.get(CALLER) if isinstance(request, Request) else None
    if not isinstance(caller, Caller):
        # Only reachable if the server were served without McpEndpoint in front of it.
        raise Unauthenticated("an Authorization: Bearer token is required")
    return caller


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _tool_error(err: DomainError) -> types.CallToolResult:
    body = err.envelope()
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=_json(body))], structured_content=body, is_error=True
    )


def _unstorable_field(value: Any, path: str = "") -> str | None:
    """The first field holding U+0000, which no database can store (the SDK's JSON parser already refuses a
    lone surrogate with a JSON-RPC parse error)."""
    if isinstance(value, str):
        return (path or "arguments") if "\x00" in value else None
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found = _unstorable_field(child, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def _validated(model: type[Model], arguments: dict[str, Any], what: str) -> Model:
    # The API's error rules (docs/api.md): such text is bad input (422 invalid), never a fault deeper down.
    field = _unstorable_field(arguments)
    if field is not None:
        raise Invalid(f"{field}: the text holds a character that cannot be stored", {"field": field})
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        raise Invalid(f"the {what} is malformed", validation_details(exc)) from exc


def _tool_list() -> list[types.Tool]:
    return [
        types.Tool(
            name=tool.name,
            description=tool.description,
            input_schema=tool.input.model_json_schema(),
            output_schema=tool.output.model_json_schema(mode="serialization"),
            annotations=types.ToolAnnotations(
                read_only_hint=tool.read_only,
                destructive_hint=False,
                idempotent_hint=tool.read_only or tool.idempotent,
                open_world_hint=False,
            ),
        )
        for tool in m.TOOLS
    ]


async def _list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=_tool_list())


async def _call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    try:
        caller = _caller(ctx)
    except DomainError as err:
        return _tool_error(err)
    # Handlers run in the session manager's tasks, not the HTTP request's: bind its id here, so this call's
    # log lines and every bus request it makes carry it.
    with bound(request_id=caller.request_id, scope=caller.actor.scope):
        started = time.perf_counter()
        outcome = "ok"
        try:
            tool = _CONTRACTS.get(params.name)
            if tool is None:
                raise Invalid(f"there is no tool named {params.name[:_QUOTED]!r}", {"field": "name"})
            payload = _validated(tool.input, params.arguments or {}, "tool's input")
            result = (await IMPLEMENTATIONS[tool.name](caller, payload)).model_dump(mode="json")
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=_json(result))], structured_content=result
            )
        except DomainError as err:
            outcome = err.code
            return _tool_error(err)
        except Exception:
            outcome = "internal"
            log.exception("mcp tool %s failed", params.name[:_QUOTED])
            return _tool_error(DomainError("the server failed to handle the tool call", code="internal"))
        finally:
            log.info("mcp tool %s → %s in %.1f ms", params.name[:_QUOTED], outcome, _elapsed_ms(started))


def _elapsed_ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000


async def _list_resources(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    # Resources are addressed by exact version through the templates; enumerating them would be unbounded.
    return types.ListResourcesResult(resources=[])


async def _list_resource_templates(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    return types.ListResourceTemplatesResult(
        resource_templates=[
            types.ResourceTemplate(
                name="publication_version",
                uri_template=m.PUBLICATION_VERSION_URI,
                description="A publication at an exact version (as the read_publication tool).",
                mime_type="application/json",
            ),
            types.ResourceTemplate(
                name="evidence",
                uri_template=m.EVIDENCE_URI,
                description="An evidence passage at the exact asset version its id names (as read_evidence).",
                mime_type="application/json",
            ),
        ]
    )


async def _read_addressed(caller: Caller, uri: str) -> Model:
    """The resource `uri` names, through the same bus read as its tool."""
    if (found := _PUBLICATION_URI.match(uri)) is not None:
        req = _validated(publication.ReadRequest, dict(found), "resource URI")
        return await IMPLEMENTATIONS[m.READ_PUBLICATION](caller, req)
    if (found := _EVIDENCE_URI.match(uri)) is not None:
        req = _validated(assets.EvidenceReadRequest, dict(found), "resource URI")
        return await IMPLEMENTATIONS[m.READ_EVIDENCE](caller, req)
    raise Invalid(f"no resource is addressed by {uri[:_QUOTED]!r}", {"field": "uri"})


async def _read_resource(
    ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
) -> types.ReadResourceResult:
    uri = str(params.uri)
    try:
        caller = _caller(ctx)
    except DomainError as err:
        raise MCPError(code=types.INVALID_REQUEST, message=err.message, data=err.envelope()) from err
    with bound(request_id=caller.request_id, scope=caller.actor.scope):
        started = time.perf_counter()
        outcome = "ok"
        try:
            value = (await _read_addressed(caller, uri)).model_dump(mode="json")
        except DomainError as err:
            outcome = err.code
            code = _RESOURCE_CODES.get(err.code, types.INTERNAL_ERROR)
            raise MCPError(code=code, message=err.message, data=err.envelope()) from err
        except Exception as exc:
            outcome = "internal"
            log.exception("mcp resource read %s failed", uri[:_QUOTED])
            raise MCPError(code=types.INTERNAL_ERROR, message="the server failed to read the resource") from exc
        finally:
            log.info("mcp resource read %s → %s in %.1f ms", uri[:_QUOTED], outcome, _elapsed_ms(started))
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=uri, mime_type="application/json", text=_json(value))]
    )


def build_server(version: str) -> Server[Any]:
    return Server(
        "dossier",
        version=version,
        instructions=(
            "Dossier keeps research goals that outlive single runs. Read earlier publications at exact "
            "versions, search and read evidence, start runs and follow their ledgers, and propose "
            "checkpoint updates by compare-and-swap. To research yourself, begin_run: this session then "
            "holds the run and its lease, and the run_* tools take only their own arguments. Errors carry "
            "the API's code: not_found, conflict, unavailable, invalid, forbidden."
        ),
        get_tool_input_schema=lambda name: _CONTRACTS[name].input.model_json_schema() if name in _CONTRACTS else None,
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        on_list_resources=_list_resources,
        on_list_resource_templates=_list_resource_templates,
        on_read_resource=_read_resource,
    )
