"""What each MCP tool does: the same bus calls as its HTTP route, with the caller's actor and nothing else.

No rule lives here: scope filtering, grants, CAS and eligibility are the owner services' answers, so another
scope's id is `not_found` here exactly as it is in the API. What is MCP's own is the session: `begin_run` and
`take_over_run` bind the run and its lease to the caller's MCP session (services/gateway/mcp/run_bindings.py),
and the run-bound tools act on the run the session holds unless they are given a run and a lease.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from services.gateway.mcp.caller import Caller
from shared.contracts import assets, publication, runhost, workspace
from shared.contracts import mcp as m
from shared.contracts.common import Model, Subject
from shared.errors import DomainError, Forbidden, Invalid, NotFound

ToolFn = Callable[[Caller, Any], Awaitable[Model]]


@dataclass(frozen=True)
class BusTool:
    """A tool that is its bus request: its input model is the subject's request, its answer the reply."""

    subject: Subject[Any, Any]
    timeout: float | None = None

    async def __call__(self, caller: Caller, req: Model) -> Model:
        reply: Model = await caller.bus.call(self.subject, req, timeout=self.timeout)
        return reply


@dataclass(frozen=True)
class HeldLease:
    run_id: str
    lease: str
    # Held by the MCP session (not passed by the caller): the token is not answered back.
    bound: bool


async def held_lease(caller: Caller, req: m.RunBound) -> HeldLease:
    """The run a run-bound call acts on and its lease: as passed, else as the caller's MCP session holds it."""
    if "lease" in req.model_fields_set and req.run_id is None:
        raise Invalid("a lease is passed with the run_id it is for", {"field": "run_id"})
    if req.run_id is not None and req.lease is not None:
        return HeldLease(req.run_id, req.lease, bound=False)
    if caller.session is None:
        raise Forbidden(
            "this connection keeps no MCP session to hold a run's lease: pass run_id and lease as begin_run "
            "answered them",
            {"field": "lease"},
        )
    held = await caller.bindings.lease_of(caller.session, req.run_id)
    if held is None:
        which = f"run {req.run_id}" if req.run_id is not None else "any run"
        raise Forbidden(
            f"this MCP session holds no lease of {which}: begin_run or take_over_run it, or pass run_id and lease",
            {"field": "lease"},
        )
    return HeldLease(*held, bound=True)


async def _lease_call(caller: Caller, subject: Subject[Any, Any], req: Model, timeout: float | None = None) -> Any:
    try:
        return await caller.bus.call(subject, req, timeout=timeout)
    except DomainError as err:
        if err.code == "forbidden":
            # The run host names the HTTP route's header; here the lease is this tool's argument.
            raise Forbidden(err.message, {"field": "lease"}) from None
        raise


@dataclass(frozen=True)
class RunTool:
    """A run-bound tool: its bus request is its own arguments with the run and the lease it acts under."""

    subject: Subject[Any, Any]
    timeout: float | None = None

    async def __call__(self, caller: Caller, req: m.RunBound) -> Model:
        held = await held_lease(caller, req)
        own = req.model_dump(exclude={"run_id", "lease"})
        request = self.subject.request.model_validate(own | {"run_id": held.run_id, "lease": held.lease})
        reply: Model = await _lease_call(caller, self.subject, request, self.timeout)
        return reply


async def show_workspace(caller: Caller, req: workspace.CatalogRequest) -> m.WorkspaceView:
    bus = caller.bus
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


async def start_run(caller: Caller, req: m.StartRunRequest) -> runhost.AdmitReply:
    admit = runhost.AdmitRequest.model_validate(req.model_dump(exclude_unset=True))
    reply: runhost.AdmitReply = await caller.bus.call(runhost.ADMIT, admit)
    return reply


async def begin_run(caller: Caller, req: m.BeginRunRequest) -> runhost.Run:
    admit = runhost.AdmitRequest(driver="external", **req.model_dump(exclude={"reveal_lease"}))
    run: runhost.Run = (await caller.bus.call(runhost.ADMIT, admit)).run
    # Only the admission shows the token (a repeat does not): bind it to the session that asked.
    if run.lease is not None and caller.session is not None:
        await caller.bindings.bind(caller.session, run.id, run.lease.token)
        if not req.reveal_lease:
            run.lease = None  # `lease_state` still tells the epoch and the expiry
    return run


async def take_over_run(caller: Caller, req: m.TakeOverRequest) -> m.TakenOver:
    take = runhost.TakeRequest(run_id=req.run_id, force=req.force)
    taken: runhost.TakeReply = await caller.bus.call(runhost.EXTERNAL_TAKE, take, timeout=runhost.TAKE_TIMEOUT_SECONDS)
    shown: str | None = taken.lease.token
    if caller.session is not None:
        await caller.bindings.bind(caller.session, req.run_id, taken.lease.token)
        shown = taken.lease.token if req.reveal_lease else None
    lease = m.SessionLease(token=shown, epoch=taken.lease.epoch, expires_at=taken.lease.expires_at)
    return m.TakenOver(lease=lease, resume=taken.resume)


async def renew_lease(caller: Caller, req: m.RunBound) -> m.SessionLease:
    held = await held_lease(caller, req)
    renewed: runhost.Lease = await _lease_call(
        caller, runhost.EXTERNAL_RENEW, runhost.LeaseRequest(run_id=held.run_id, lease=held.lease)
    )
    if held.bound and caller.session is not None:
        await caller.bindings.renewed(caller.session, held.run_id)
    token = None if held.bound else renewed.token
    return m.SessionLease(token=token, epoch=renewed.epoch, expires_at=renewed.expires_at)


async def write_run_file(caller: Caller, req: m.RunWriteRequest) -> m.WrittenFile:
    await RunTool(runhost.EXTERNAL_WRITE)(caller, req)
    return m.WrittenFile(path=req.path, size=len(req.text.encode("utf-8")))


IMPLEMENTATIONS: dict[str, ToolFn] = {
    m.LIST_WORKSPACES: BusTool(workspace.LIST),
    m.SHOW_WORKSPACE: show_workspace,
    m.SEARCH_EVIDENCE: BusTool(assets.SEARCH),
    m.READ_EVIDENCE: BusTool(assets.READ),
    m.READ_PUBLICATION: BusTool(publication.READ),
    m.START_RUN: start_run,
    m.GET_RUN: BusTool(runhost.GET_RUN),
    m.GET_LEDGER: BusTool(runhost.LEDGER),
    m.LIST_RUN_FILES: BusTool(runhost.LIST_FILES),
    m.READ_RUN_FILE: BusTool(runhost.READ_FILE),
    # The request keeps which fields the caller set: an omitted summary keeps the current one, a null clears it.
    m.PROPOSE_CHECKPOINT_UPDATE: BusTool(workspace.CHECKPOINT_UPDATE),
    m.BEGIN_RUN: begin_run,
    m.RUN_CATALOG: RunTool(runhost.EXTERNAL_CATALOG),
    m.RUN_SEARCH: RunTool(runhost.EXTERNAL_SEARCH),
    m.RUN_READ: RunTool(runhost.EXTERNAL_READ),
    m.WRITE_RUN_FILE: write_run_file,
    m.RENEW_LEASE: renew_lease,
    m.TAKE_OVER_RUN: take_over_run,
    m.FINISH_RUN: RunTool(runhost.EXTERNAL_FINISH, timeout=60),
}
