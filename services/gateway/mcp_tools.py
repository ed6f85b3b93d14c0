"""What each MCP tool does: the same bus calls as its HTTP route, with the caller's actor and nothing else.

No rule lives here: scope filtering, grants, CAS and eligibility are the owner services' answers, so another
scope's id is `not_found` here exactly as it is in the API.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from shared.bus import BusClient
from shared.contracts import assets, publication, runhost, workspace
from shared.contracts import mcp as m
from shared.contracts.common import Actor
from shared.errors import NotFound

ToolFn = Callable[[BusClient, Actor, Any], Awaitable[Any]]


async def list_workspaces(bus: BusClient, actor: Actor, req: workspace.ListRequest) -> Any:
    return await bus.call_raw(workspace.LIST, req, actor=actor)


async def show_workspace(bus: BusClient, actor: Actor, req: workspace.CatalogRequest) -> Any:
    # The workspace first: a missing or foreign one answers not_found before anything else is asked.
    shown = await bus.call_raw(workspace.GET, {"workspace_id": req.workspace_id}, actor=actor)
    catalog = await bus.call_raw(workspace.CATALOG, req, actor=actor)
    try:
        checkpoint = await bus.call_raw(workspace.CHECKPOINT_GET, {"workspace_id": req.workspace_id}, actor=actor)
    except NotFound:
        checkpoint = None  # the workspace exists (read above), so not_found here means "no checkpoint yet"
    return {"workspace": shown, "catalog": catalog, "checkpoint": checkpoint}


async def search_evidence(bus: BusClient, actor: Actor, req: assets.SearchRequest) -> Any:
    return await bus.call_raw(assets.SEARCH, req, actor=actor)


async def read_evidence(bus: BusClient, actor: Actor, req: assets.EvidenceReadRequest) -> Any:
    return await bus.call_raw(assets.READ, req, actor=actor)


async def read_publication(bus: BusClient, actor: Actor, req: publication.ReadRequest) -> Any:
    return await bus.call_raw(publication.READ, req, actor=actor)


async def start_run(bus: BusClient, actor: Actor, req: runhost.AdmitRequest) -> Any:
    return await bus.call_raw(runhost.ADMIT, req, actor=actor)


async def get_run(bus: BusClient, actor: Actor, req: runhost.RunIdRequest) -> Any:
    return await bus.call_raw(runhost.GET_RUN, req, actor=actor)


async def get_ledger(bus: BusClient, actor: Actor, req: runhost.RunPageRequest) -> Any:
    return await bus.call_raw(runhost.LEDGER, req, actor=actor)


async def list_run_files(bus: BusClient, actor: Actor, req: runhost.RunPageRequest) -> Any:
    return await bus.call_raw(runhost.LIST_FILES, req, actor=actor)


async def read_run_file(bus: BusClient, actor: Actor, req: runhost.ReadFileRequest) -> Any:
    return await bus.call_raw(runhost.READ_FILE, req, actor=actor)


async def propose_checkpoint_update(bus: BusClient, actor: Actor, req: workspace.UpdateCheckpointRequest) -> Any:
    # exclude_unset, as the HTTP route: an omitted summary keeps the current one, an explicit null clears it.
    return await bus.call_raw(workspace.CHECKPOINT_UPDATE, req.model_dump(exclude_unset=True), actor=actor)


async def begin_run(bus: BusClient, actor: Actor, req: m.BeginRunRequest) -> Any:
    admit = runhost.AdmitRequest(driver="external", **req.model_dump())
    return (await bus.call_raw(runhost.ADMIT, admit, actor=actor))["run"]


def _bus_tool(subject: str, timeout: float | None = None) -> ToolFn:
    """A tool that is its bus request: the input model is the request the HTTP route sends."""

    async def call(bus: BusClient, actor: Actor, req: Any) -> Any:
        return await bus.call_raw(subject, req, actor=actor, timeout=timeout)

    return call


async def write_run_file(bus: BusClient, actor: Actor, req: runhost.ExternalWriteRequest) -> Any:
    await bus.call_raw(runhost.EXTERNAL_WRITE, req, actor=actor)
    return {"path": req.path, "size": len(req.text.encode("utf-8"))}


IMPLEMENTATIONS: dict[str, ToolFn] = {
    m.LIST_WORKSPACES: list_workspaces,
    m.SHOW_WORKSPACE: show_workspace,
    m.SEARCH_EVIDENCE: search_evidence,
    m.READ_EVIDENCE: read_evidence,
    m.READ_PUBLICATION: read_publication,
    m.START_RUN: start_run,
    m.GET_RUN: get_run,
    m.GET_LEDGER: get_ledger,
    m.LIST_RUN_FILES: list_run_files,
    m.READ_RUN_FILE: read_run_file,
    m.PROPOSE_CHECKPOINT_UPDATE: propose_checkpoint_update,
    m.BEGIN_RUN: begin_run,
    m.RUN_CATALOG: _bus_tool(runhost.EXTERNAL_CATALOG),
    m.RUN_SEARCH: _bus_tool(runhost.EXTERNAL_SEARCH),
    m.RUN_READ: _bus_tool(runhost.EXTERNAL_READ),
    m.WRITE_RUN_FILE: write_run_file,
    m.RENEW_LEASE: _bus_tool(runhost.EXTERNAL_RENEW),
    m.TAKE_OVER_RUN: _bus_tool(runhost.EXTERNAL_TAKE),
    m.FINISH_RUN: _bus_tool(runhost.EXTERNAL_FINISH, timeout=60),
}
