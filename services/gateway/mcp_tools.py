"""What each MCP tool does: the same bus calls as its HTTP route, with the caller's actor and nothing else.

No rule lives here: scope filtering, grants, CAS and eligibility are the owner services' answers, so another
scope's id is `not_found` here exactly as it is in the API.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from services.gateway.deps import ActorBus
from shared.contracts import assets, publication, runhost, workspace
from shared.contracts import mcp as m
from shared.contracts.common import Model, Subject
from shared.errors import NotFound

ToolFn = Callable[[ActorBus, Any], Awaitable[Model]]


@dataclass(frozen=True)
class BusTool:
    """A tool that is its bus request: its input model is the subject's request, its answer the reply."""

    subject: Subject[Any, Any]
    timeout: float | None = None

    async def __call__(self, bus: ActorBus, req: Model) -> Model:
        reply: Model = await bus.call(self.subject, req, timeout=self.timeout)
        return reply


async def show_workspace(bus: ActorBus, req: workspace.CatalogRequest) -> m.WorkspaceView:
    # The workspace first: a missing or foreign one answers not_found before anything else is asked.
    shown = await bus.call(workspace.GET, workspace.WorkspaceIdRequest(workspace_id=req.workspace_id))
    catalog = await bus.call(workspace.CATALOG, req)
    try:
        checkpoint = await bus.call(
            workspace.CHECKPOINT_GET, workspace.WorkspaceIdRequest(workspace_id=req.workspace_id)
        )
    except NotFound:
        checkpoint = None  # the workspace exists (read above), so not_found here means "no checkpoint yet"
    return m.WorkspaceView(workspace=shown, catalog=catalog, checkpoint=checkpoint)


async def begin_run(bus: ActorBus, req: m.BeginRunRequest) -> runhost.Run:
    admit = runhost.AdmitRequest(driver="external", **req.model_dump())
    return (await bus.call(runhost.ADMIT, admit)).run


async def write_run_file(bus: ActorBus, req: runhost.ExternalWriteRequest) -> m.WrittenFile:
    await bus.call(runhost.EXTERNAL_WRITE, req)
    return m.WrittenFile(path=req.path, size=len(req.text.encode("utf-8")))


IMPLEMENTATIONS: dict[str, ToolFn] = {
    m.LIST_WORKSPACES: BusTool(workspace.LIST),
    m.SHOW_WORKSPACE: show_workspace,
    m.SEARCH_EVIDENCE: BusTool(assets.SEARCH),
    m.READ_EVIDENCE: BusTool(assets.READ),
    m.READ_PUBLICATION: BusTool(publication.READ),
    m.START_RUN: BusTool(runhost.ADMIT),
    m.GET_RUN: BusTool(runhost.GET_RUN),
    m.GET_LEDGER: BusTool(runhost.LEDGER),
    m.LIST_RUN_FILES: BusTool(runhost.LIST_FILES),
    m.READ_RUN_FILE: BusTool(runhost.READ_FILE),
    # The request keeps which fields the caller set: an omitted summary keeps the current one, a null clears it.
    m.PROPOSE_CHECKPOINT_UPDATE: BusTool(workspace.CHECKPOINT_UPDATE),
    m.BEGIN_RUN: begin_run,
    m.RUN_CATALOG: BusTool(runhost.EXTERNAL_CATALOG),
    m.RUN_SEARCH: BusTool(runhost.EXTERNAL_SEARCH),
    m.RUN_READ: BusTool(runhost.EXTERNAL_READ),
    m.WRITE_RUN_FILE: write_run_file,
    m.RENEW_LEASE: BusTool(runhost.EXTERNAL_RENEW),
    m.TAKE_OVER_RUN: BusTool(runhost.EXTERNAL_TAKE),
    m.FINISH_RUN: BusTool(runhost.EXTERNAL_FINISH, timeout=60),
}
